// What dlperf-jobs generates from: a cluster profile (how to ask this cluster's Slurm for
// nodes and GPUs, how to load the environment, UCX/NCCL settings) and a job matrix (models x
// configurations, precision, batch per device, repeats). Both are INI files (jobs/README.md);
// load_profile/load_matrix check every key and value and throw JobsError naming
// "file:line: what to fix". expand_jobs turns the pair into one JobSpec per sbatch script.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jobs/ini.h"

namespace dlperf::jobs {

enum class Backend { cuda, cpu };
enum class GpuRequest { gpus_per_node, gres };  // #SBATCH --gpus-per-node=G or --gres=gpu[:type]:G
enum class EnvLoader { none, module, spack };    // how the script puts dlperf on PATH

// The #SBATCH options the generated scripts write themselves, and those that would change the
// GPU count they ask for: a profile's `sbatch` words may not name them, since a later #SBATCH
// line wins (--nodes=3 made a 1n1g job ask for 3 nodes, --requeue undid --no-requeue).
// JobsUnit's Script.EveryOwnSbatchLineIsGuarded checks every line the scripts write against it.
inline constexpr const char* kScriptSbatchOptions[] = {
    "--nodes",  "--ntasks",         "--ntasks-per-node", "--cpus-per-task", "--gpus-per-node", "--gpus",      "--gpus-per-task",
    "--gpus-per-socket", "--ntasks-per-gpu", "--threads-per-core", "--time", "--signal", "--requeue", "--no-requeue",
    "--output", "--job-name", "--partition", "--account", "--qos", "--constraint"};

// #SBATCH settings shared by every job of one backend (profile [slurm] for GPU jobs, [cpu]
// for CPU-backend jobs, which inherits what it does not set).
struct SlurmSettings {
  std::string partition, account, qos, constraint;  // "" = not written
  std::string time = "01:00:00";                      // Slurm time limit
  int cpus_per_task = 1;
  std::vector<std::string> extra_sbatch;              // further options, one #SBATCH line each (not --gres)
  // The profile's --gres entries other than GPUs (nvme:1), every --gres word merged: Slurm keeps
  // only the last --gres line, so a GPU job asking by gres writes them on its gpu:G line.
  std::string gres;
  // srun options that place and bind the ranks (issue 27 item 1): without them Slurm's default
  // distribution may put a rank on the socket far from the GPU dlperf picks by local rank.
  // Every rank sees all of its node's GPUs and dlperf takes its local rank's (--gpu-bind=closest
  // showed a rank every GPU of its socket, and ranks past a socket's GPU count shared one).
  std::vector<std::string> srun = {"--cpu-bind=cores", "--gpu-bind=none", "--distribution=block:block"};
};

struct Profile {
  std::string source;  // file name, for the generated header
  std::string name;    // [cluster] name
  SlurmSettings gpu, cpu;
  GpuRequest gpu_request = GpuRequest::gpus_per_node;
  std::string gpu_type;     // gres type, e.g. a100 ("" = any)
  int signal_seconds = 120; // --signal=USR1@N: dlperf-train stops, flushes, marks the run partial
  std::string srun_mpi = "pmix";
  EnvLoader loader = EnvLoader::none;
  std::vector<std::string> modules;      // module load ... (in order)
  std::string spack_setup, spack_env;    // . SETUP; spack env activate ENV
  std::vector<std::pair<std::string, std::string>> env;  // [network]: exported in file order
  // [fabric]: the link rates the fabric-health jobs (comm_*) are held to, in Gbit/s (0 = not
  // stated: no comparison), and the share of them below which dlperf-reduce warns.
  double link_gbps = 0, intra_gbps = 0, link_warn = 0.8;
  bool has_cpu_section = false;  // [cpu] given (else the CPU-backend jobs take [slurm]'s settings)
};

// "4n8g": 4 nodes x 8 GPUs; "2n2r": 2 nodes x 2 CPU-backend ranks.
struct Configuration {
  int nodes = 1, per_node = 1;
  Backend backend = Backend::cuda;
  std::string tag() const;
};

// One model row of the matrix: the script prefix (rn50), dlperf-train's --model (resnet50).
struct ModelSettings {
  std::string name, train_model, title;
  int batch_per_device = 0, cpu_batch_per_device = 0;
  std::vector<std::string> extra_args;  // appended to dlperf-train's arguments
  std::vector<std::string> cpu_extra_args;  // CPU-backend jobs' instead of extra_args (a reduced network)
  std::string time, cpu_time;           // override the profile's limits ("" = profile)
  bool real_data = false;               // also generate <model>_data_* jobs reading $DLPERF_DATA
  bool llm = false;                     // a language model (Llama): submit_all.sh llm, not gpu/cpu
  std::string precision;                // overrides [matrix] precision for GPU jobs ("" = the matrix's)
  bool own_configurations = false, own_cpu_configurations = false;  // this section sets them
  std::vector<Configuration> configurations, cpu_configurations;     // then these replace [matrix]'s
};

// [comm]: fabric-health jobs, dlperf-comm over the communicator training uses (NCCL on GPUs),
// one per configuration: jobs/comm_<NnGg>.sh, measuring each of `ops` in turn, one record per op
// in results.d (issue 27 item 3).
struct CommSettings {
  std::vector<Configuration> configurations;      // GPU jobs over NCCL (empty: none)
  std::vector<Configuration> cpu_configurations;  // CPU-backend jobs over MPI, host buffers (empty: none)
  std::string min_bytes = "8", max_bytes = "1G";  // dlperf-comm -b/-e (K, M, G suffixes)
  int factor = 2, iters = 20, warmup = 5;
  std::string time = "00:15:00";
  // dlperf-comm --op values, in the order a job runs them: data-parallel training's allreduce,
  // and the sharded optimizer's (--zero) reduce-scatter and all-gather.
  std::vector<std::string> ops = {"allreduce", "reduce_scatter", "all_gather"};
};

struct Matrix {
  std::string source;
  std::vector<ModelSettings> models;
  std::vector<Configuration> configurations, cpu_configurations;
  std::string precision = "fp16", cpu_precision = "fp32";
  int repeats = 5, iterations = 120, warmup = 20;
  std::vector<std::string> extra_args;  // for every job, before the model's own
  CommSettings comm;
};

// Everything one sbatch script needs.
struct JobSpec {
  std::string name;  // file stem: rn50_4n8g, rn50_cpu_1n2r
  const ModelSettings* model = nullptr;
  Configuration config;
  SlurmSettings slurm;  // with the model's time override applied
  std::string precision;
  int batch_per_device = 0, repeats = 0, iterations = 0, warmup = 0;
  std::vector<std::string> extra_args;
  bool real_data = false;  // trains on $DLPERF_DATA (ImageNet) instead of synthetic data
};

Profile load_profile(const IniFile& ini);
// What dlperf-jobs says about a valid profile and matrix that may still not be what a site
// meant, one line each: CPU-backend jobs without a [cpu] section run on [slurm]'s partition.
std::vector<std::string> profile_notes(const Profile& p, const std::vector<JobSpec>& jobs);
Matrix load_matrix(const IniFile& ini);
// GPU jobs first (model order, configuration order), then CPU-backend variants. Checks what
// needs both files (the signal lead time against every time limit).
std::vector<JobSpec> expand_jobs(const Profile& p, const Matrix& m);

// One fabric-health job: jobs/comm_<tag>.sh (GPUs, NCCL) or comm_cpu_<tag>.sh (MPI).
struct CommJob {
  std::string name;  // comm_2n8g, comm_cpu_2n2r
  Configuration config;
  SlurmSettings slurm;  // the profile's [slurm] (GPU) or [cpu], with [comm] time
};
std::vector<CommJob> expand_comm_jobs(const Profile& p, const Matrix& m);

// Slurm time limit ("30", "30:00", "1:00:00", "1-12", "1-12:00", "1-12:00:00") in seconds; -1 if malformed.
long parse_slurm_time(const std::string& s);

}  // namespace dlperf::jobs
