// dlperf-jobs' library: the INI reader, profile and matrix checks (each bad value is one
// JobsError naming file:line and the key), Slurm time limits, and the generated text (the
// #SBATCH lines a configuration implies, signal, SRUN_CPUS_PER_TASK, the repeat loop).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "jobs/ini.h"
#include "jobs/job_spec.h"
#include "jobs/jobs_error.h"
#include "jobs/sbatch_script.h"
#include "jobs/train_args.h"

namespace dlperf::jobs {
namespace {

const char* kProfile = R"(
[cluster]
name = test
[slurm]
partition = gpu
time = 00:30:00
cpus_per_task = 8
signal_seconds = 120
sbatch = --exclusive
[cpu]
partition = cpu
cpus_per_task = 32
[environment]
load = module
modules = dlperf/0.1.0 cuda
[network]
UCX_TLS = rc,sm,self
NCCL_SOCKET_IFNAME = ^lo,docker
)";

const char* kMatrix = R"(
[matrix]
models = rn50 bert_base
configurations = 1n1g 4n8g
cpu_configurations = 2n2r
repeats = 3
[rn50]
batch_per_device = 256
cpu_batch_per_device = 64
time = 01:00:00
[bert_base]
batch_per_device = 64
extra_args = --seq-len 128
)";

Profile profile(const std::string& text = kProfile) { return load_profile(parse_ini(text, "p.ini")); }
Matrix matrix(const std::string& text = kMatrix) { return load_matrix(parse_ini(text, "m.ini")); }

// The message of the JobsError that loading `text` as a profile (or matrix) throws.
std::string profile_error(const std::string& text) {
  try {
    profile(text);
  } catch (const JobsError& e) {
    EXPECT_EQ(e.kind(), JobsErrorKind::bad_input);
    return e.what();
  }
  return "(no error)";
}
std::string matrix_error(const std::string& text) {
  try {
    matrix(text);
  } catch (const JobsError& e) {
    EXPECT_EQ(e.kind(), JobsErrorKind::bad_input);
    return e.what();
  }
  return "(no error)";
}

TEST(Ini, SectionsKeysCommentsInOrder) {
  const IniFile f = parse_ini("# c\n[a]\nx = 1 2 \n; c\ny=\n[b]\nz = q=r\n", "f.ini");
  ASSERT_EQ(f.sections.size(), 2u);
  EXPECT_EQ(f.find("a")->find("x")->value, "1 2");
  EXPECT_EQ(f.find("a")->find("y")->value, "");
  EXPECT_EQ(f.find("b")->find("z")->value, "q=r");
  EXPECT_EQ(f.find("b")->find("z")->line, 7);
}

TEST(Ini, ErrorsNameFileAndLine) {
  EXPECT_THROW(parse_ini("x = 1\n", "f.ini"), JobsError);
  try {
    parse_ini("[a]\nx = 1\nx = 2\n", "f.ini");
    FAIL();
  } catch (const JobsError& e) {
    EXPECT_EQ(std::string(e.what()), "f.ini:3: 'x' is set twice in [a]: keep one");
  }
  EXPECT_THROW(parse_ini("[a]\njunk\n", "f.ini"), JobsError);
  EXPECT_THROW(parse_ini("[a\n", "f.ini"), JobsError);
  EXPECT_THROW(parse_ini("[a]\n[a]\n", "f.ini"), JobsError);
}

TEST(SlurmTime, AllFormats) {
  EXPECT_EQ(parse_slurm_time("30"), 30 * 60);
  EXPECT_EQ(parse_slurm_time("30:15"), 30 * 60 + 15);
  EXPECT_EQ(parse_slurm_time("1:00:00"), 3600);
  EXPECT_EQ(parse_slurm_time("2-12"), (2 * 24 + 12) * 3600);
  EXPECT_EQ(parse_slurm_time("1-00:30"), 24 * 3600 + 30 * 60);
  EXPECT_EQ(parse_slurm_time("1-00:00:10"), 24 * 3600 + 10);
  EXPECT_EQ(parse_slurm_time("1h"), -1);
  EXPECT_EQ(parse_slurm_time(""), -1);
}

TEST(Profile, Loads) {
  const Profile p = profile();
  EXPECT_EQ(p.gpu.partition, "gpu");
  EXPECT_EQ(p.cpu.partition, "cpu");
  EXPECT_EQ(p.cpu.time, "00:30:00");  // inherited from [slurm]
  EXPECT_EQ(p.cpu.cpus_per_task, 32);
  EXPECT_EQ(p.loader, EnvLoader::module);
  ASSERT_EQ(p.modules.size(), 2u);
  ASSERT_EQ(p.env.size(), 2u);
  EXPECT_EQ(p.env[1].second, "^lo,docker");
}

// A profile without [cpu]: its CPU jobs ran on [slurm]'s GPU partition, which was documented but
// easy to miss; dlperf-jobs now says so (one note), and nothing when [cpu] is there.
TEST(Profile, CpuJobsWithoutACpuSectionAreNoted) {
  const Profile with = profile();
  EXPECT_TRUE(profile_notes(with, expand_jobs(with, matrix())).empty());
  std::string text = kProfile;
  text.replace(text.find("[cpu]\npartition = cpu\ncpus_per_task = 32\n"), std::string("[cpu]\npartition = cpu\ncpus_per_task = 32\n").size(), "");
  const Profile without = profile(text);
  const auto notes = profile_notes(without, expand_jobs(without, matrix()));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("the profile has no [cpu] section: its 2 CPU-backend job(s) take [slurm]'s settings (partition gpu)", 0), 0u)
      << notes[0];
}

TEST(Profile, BadValuesNameTheKey) {
  const std::string base = kProfile;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_EQ(profile_error(with("cpus_per_task = 8", "cpus_per_task = eight")),
            "p.ini:7: cpus_per_task must be an integer from 1 to 1024 (got 'eight')");
  EXPECT_NE(profile_error(with("time = 00:30:00", "time = 30m")).find("p.ini:6: time '30m' is not a Slurm time limit"), std::string::npos);
  EXPECT_NE(profile_error(with("partition = gpu", "partiton = gpu")).find("unknown key 'partiton' in [slurm]"), std::string::npos);
  EXPECT_NE(profile_error(with("load = module", "load = conda")).find("load 'conda' is unknown"), std::string::npos);
  EXPECT_NE(profile_error(with("modules = dlperf/0.1.0 cuda", "modules =")).find("modules must list"), std::string::npos);
  EXPECT_NE(profile_error(with("partition = gpu", "partition = gpu;rm")).find("must be one word"), std::string::npos);
  // A feature expression's operators are sbatch's to read (an #SBATCH line passes no shell).
  for (const char* c : {"h100&ib", "[rack1|rack2]", "(a100|h100)&ib*2", "[quad*2&hemi*1]"})
    EXPECT_EQ(profile(with("partition = gpu", std::string("partition = gpu\nconstraint = ") + c)).gpu.constraint, c) << c;
  EXPECT_NE(profile_error(with("partition = gpu", "partition = gpu\nconstraint = h100 & ib")).find("constraint 'h100 & ib' must be one Slurm feature expression"),
            std::string::npos);
  EXPECT_NE(profile_error(with("partition = gpu", "partition = gpu\nconstraint = h100;rm")).find("must be one Slurm feature expression"),
            std::string::npos);
  EXPECT_NE(profile_error(with("partition = gpu", "partition = gpu\nconstraint = [a|b")).find("p.ini:6: constraint '[a|b' has unbalanced"),
            std::string::npos)
      << profile_error(with("partition = gpu", "partition = gpu\nconstraint = [a|b"));
  EXPECT_NE(profile_error(with("partition = gpu", "partition = gpu\nconstraint = a)&(b")).find("unbalanced"), std::string::npos);
  EXPECT_NE(profile_error(with("UCX_TLS", "UCX-TLS")).find("environment variables like UCX_TLS"), std::string::npos);
  EXPECT_NE(profile_error(with("UCX_TLS", "1UCX_TLS")).find("environment variables like UCX_TLS"), std::string::npos);
  // Open MPI's MCA variables are mixed case: an Ethernet cluster's profile needs them.
  EXPECT_EQ(profile(with("UCX_TLS", "OMPI_MCA_btl_tcp_if_include")).env.front().first, "OMPI_MCA_btl_tcp_if_include");
  EXPECT_NE(profile_error(with("--exclusive", "exclusive")).find("long sbatch options"), std::string::npos);
  EXPECT_NE(profile_error(base + "[gpus]\n").find("unknown section [gpus]"), std::string::npos);
}

TEST(Matrix, BadValuesNameTheKey) {
  const std::string base = kMatrix;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_EQ(matrix_error(with("rn50 bert_base", "rn50 alexnet")), "m.ini:3: models 'alexnet' is unknown: use rn50, vgg16, bert_base, llama3_8b, llama3_2_1b");
  EXPECT_NE(matrix_error(with("1n1g 4n8g", "1n1g 4x8")).find("'4x8' is not a configuration"), std::string::npos);
  EXPECT_NE(matrix_error(with("cpu_configurations = 2n2r", "cpu_configurations = 2n2g")).find("'2n2g' is not a configuration"), std::string::npos);
  EXPECT_NE(matrix_error(with("1n1g 4n8g", "1n1g 1n1g")).find("twice"), std::string::npos);
  EXPECT_NE(matrix_error(with("repeats = 3", "repeats = 0")).find("repeats must be an integer from 1"), std::string::npos);
  EXPECT_NE(matrix_error(with("[bert_base]\nbatch_per_device = 64\n", "[bert_base]\n")).find("batch_per_device is missing in [bert_base]"), std::string::npos);
  EXPECT_NE(matrix_error(with("[bert_base]", "[bert]")).find("unknown section [bert]"), std::string::npos);
  EXPECT_NE(matrix_error(base + "[matrix2]\n").find("unknown section"), std::string::npos);
  EXPECT_NE(matrix_error(with("repeats = 3", "precision = fp8")).find("precision 'fp8' is unknown"), std::string::npos);
  EXPECT_NE(matrix_error(with("repeats = 3", "iterations = 10\nwarmup = 10")).find("leaves no measured iteration"), std::string::npos);
}

TEST(Jobs, OnePerModelAndConfigurationThenCpuVariants) {
  const Profile p = profile();
  const Matrix m = matrix();
  const auto jobs = expand_jobs(p, m);
  std::vector<std::string> names;
  for (const auto& j : jobs) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rn50_1n1g", "rn50_4n8g", "bert_base_1n1g", "bert_base_4n8g", "rn50_cpu_2n2r",
                                             "bert_base_cpu_2n2r"}));
  EXPECT_EQ(jobs[1].slurm.time, "01:00:00");  // the model's override
  EXPECT_EQ(jobs[2].slurm.time, "00:30:00");
  EXPECT_EQ(jobs[4].batch_per_device, 64);
  EXPECT_EQ(jobs[5].batch_per_device, 64);  // cpu batch defaults to the GPU one
}

// real_data = yes adds <model>_data_* jobs that read $DLPERF_DATA (refusing to start without
// it), kept out of submit_all.sh's gpu/cpu sets and submitted with `data`.
TEST(Jobs, RealDataVariantsReadDlperfData) {
  std::string text = kMatrix;
  text.replace(text.find("time = 01:00:00"), 15, "time = 01:00:00\nreal_data = yes");
  const auto jobs = expand_jobs(profile(), matrix(text));
  std::vector<std::string> names;
  for (const auto& j : jobs) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rn50_1n1g", "rn50_4n8g", "rn50_data_1n1g", "rn50_data_4n8g", "bert_base_1n1g",
                                             "bert_base_4n8g", "rn50_cpu_2n2r", "rn50_data_cpu_2n2r", "bert_base_cpu_2n2r"}));
  const std::string g = render_sbatch(profile(), jobs[3], {"p.ini", "m.ini"});
  EXPECT_NE(g.find("if [ -z \"${DLPERF_DATA:-}\" ]; then"), std::string::npos) << g;
  EXPECT_NE(g.find("--data \"$DLPERF_DATA\" --variant real_data --loader-threads \"$SLURM_CPUS_PER_TASK\""), std::string::npos) << g;
  const std::string c = render_sbatch(profile(), jobs[7], {"p.ini", "m.ini"});
  EXPECT_NE(c.find("--loader-threads 1"), std::string::npos) << c;
  EXPECT_EQ(render_sbatch(profile(), jobs[0], {"p.ini", "m.ini"}).find("DLPERF_DATA"), std::string::npos);
  const std::string all = render_submit_all(jobs, {}, {"p.ini", "m.ini"});
  EXPECT_NE(all.find("data_jobs=(rn50_data_1n1g.sh rn50_data_4n8g.sh rn50_data_cpu_2n2r.sh)"), std::string::npos) << all;
  EXPECT_NE(all.find("gpu_jobs=(rn50_1n1g.sh rn50_4n8g.sh bert_base_1n1g.sh bert_base_4n8g.sh)"), std::string::npos) << all;
  text = kMatrix;
  text.replace(text.find("extra_args = --seq-len 128"), 26, "extra_args = --seq-len 128\nreal_data = yes");
  EXPECT_NE(matrix_error(text).find("real_data"), std::string::npos);
  text = kMatrix;
  text.replace(text.find("time = 01:00:00"), 15, "time = 01:00:00\nreal_data = maybe");
  EXPECT_NE(matrix_error(text).find("yes or no"), std::string::npos);
}

// The dlperf-train command of a rendered script, as the words it runs with, the job-time
// values (cores, data set, results file) stood in.
std::vector<std::string> rendered_train_command(const std::string& script) {
  const auto at = script.find("dlperf-train --model");
  if (at == std::string::npos) return {};
  std::string cmd = script.substr(at + std::string("dlperf-train").size(), script.find("--repeat-index \"$i\"", at) + 20 - at - 12);
  const auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t p = cmd.find(from); p != std::string::npos; p = cmd.find(from, p + to.size())) cmd.replace(p, from.size(), to);
  };
  replace_all("\\\n", " ");
  replace_all("$((SLURM_CPUS_PER_TASK > 1 ? SLURM_CPUS_PER_TASK - 1 : 1))", "3");
  replace_all("\"$SLURM_CPUS_PER_TASK\"", "4");
  replace_all("\"$DLPERF_DATA\"", "/data/train-{000000..000001}.tar");
  replace_all("\"$results\"", "r.h5");
  replace_all("\"$i\"", "0");
  std::istringstream in(cmd);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Issue 27 item 11: every script's dlperf-train command, read back from the rendered text, is
// accepted by dlperf-train's own parser; an extra_args that clashes with what a job adds
// itself (real_data's --variant) is refused when generating, naming file:line.
TEST(Jobs, EveryRenderedCommandPassesDlperfTrainsParser) {
  std::string text = kMatrix;
  text.replace(text.find("time = 01:00:00"), 15, "time = 01:00:00\nreal_data = yes\nextra_args = --seed 7");
  const Profile p = profile();
  const auto jobs = expand_jobs(p, matrix(text));
  ASSERT_EQ(jobs.size(), 9u);
  for (const auto& j : jobs) {
    const auto words = rendered_train_command(render_sbatch(p, j, {"p.ini", "m.ini"}));
    ASSERT_GT(words.size(), 10u) << j.name;
    EXPECT_EQ(train_arguments_error(words), "") << j.name;
    EXPECT_EQ(words.back(), "0") << j.name;  // the command was read to its end
  }
  text = kMatrix;
  text.replace(text.find("time = 01:00:00"), 15, "time = 01:00:00\nreal_data = yes\nextra_args = --variant mine");
  const std::string e = matrix_error(text);
  EXPECT_NE(e.find("m.ini:12: extra_args is refused by dlperf-train for rn50 with real_data = yes: option '--variant' cannot be "
                   "specified more than once"),
            std::string::npos)
      << e;
}

// Issue 27 item 1: placement and binding. The profile's srun key (defaults: cores bound, every
// GPU of the node shown, block:block distribution; CPU jobs without --gpu-bind), --no-requeue, one thread
// per core and --pin-threads for CPU ranks, module purge before the profile's modules.
TEST(Script, RanksAreBoundAndJobsNotRequeued) {
  const Profile p = profile();
  const auto jobs = expand_jobs(p, matrix());
  const std::string g = render_sbatch(p, jobs[0], {"p.ini", "m.ini"});
  EXPECT_NE(g.find("srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores --gpu-bind=none --distribution=block:block dlperf-train"),
            std::string::npos)
      << g;
  EXPECT_NE(g.find("#SBATCH --no-requeue\n"), std::string::npos);
  EXPECT_EQ(g.find("--threads-per-core"), std::string::npos);
  EXPECT_NE(g.find("module purge\nmodule load dlperf/0.1.0 cuda"), std::string::npos) << g;
  const JobSpec* cpu_job = nullptr;
  for (const auto& j : jobs)
    if (j.config.backend == Backend::cpu) cpu_job = &j;
  ASSERT_NE(cpu_job, nullptr);
  const std::string c = render_sbatch(p, *cpu_job, {"p.ini", "m.ini"});
  EXPECT_NE(c.find("--kill-on-bad-exit=1 --cpu-bind=cores --distribution=block:block dlperf-train"), std::string::npos) << c;
  EXPECT_NE(c.find("#SBATCH --threads-per-core=1\n"), std::string::npos) << c;
  EXPECT_NE(c.find("--pin-threads"), std::string::npos) << c;
  // Set per profile: [slurm] for both (less --gpu-bind on CPU jobs), [cpu] for CPU jobs; empty: none.
  std::string text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive\nsrun = --cpu-bind=sockets --gpu-bind=single:1");
  text.replace(text.find("cpus_per_task = 32"), 18, "cpus_per_task = 32\nsrun =");
  const Profile q = profile(text);
  EXPECT_EQ(q.gpu.srun, (std::vector<std::string>{"--cpu-bind=sockets", "--gpu-bind=single:1"}));
  EXPECT_TRUE(q.cpu.srun.empty());
  const auto q_jobs = expand_jobs(q, matrix());
  EXPECT_NE(render_sbatch(q, q_jobs.back(), {"p.ini", "m.ini"}).find("--kill-on-bad-exit=1 dlperf-train"), std::string::npos);
  EXPECT_NE(render_sbatch(q, q_jobs.front(), {"p.ini", "m.ini"}).find("--cpu-bind=sockets --gpu-bind=single:1 dlperf-train"),
            std::string::npos);
  text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive\nsrun = --cpu-bind=sockets");
  EXPECT_EQ(profile(text).cpu.srun, (std::vector<std::string>{"--cpu-bind=sockets"}));
  // Every option that asks for or binds GPUs stays out of CPU jobs: srun --gpus-per-task=1 fails
  // on a node without GPUs.
  text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20,
               "sbatch = --exclusive --mem-per-gpu=80G --gres=nvme:1,shard:2\nsrun = --cpu-bind=cores --gpus-per-task=1 "
               "--gpu-bind=closest --tres-bind=gres/gpu:closest --ntasks-per-gpu=1 --tres-per-task=cpu=2,gres/gpu=1 --gres=gpu:1,nvme:1");
  EXPECT_EQ(profile(text).cpu.srun, (std::vector<std::string>{"--cpu-bind=cores", "--tres-per-task=cpu=2", "--gres=nvme:1"}));
  EXPECT_EQ(profile(text).cpu.extra_sbatch, (std::vector<std::string>{"--exclusive"}));
  EXPECT_EQ(profile(text).cpu.gres, "nvme:1");
  EXPECT_EQ(profile(text).gpu.gres, "nvme:1,shard:2");
  text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive\nsrun = -c 4");
  EXPECT_NE(profile_error(text).find("p.ini:10: srun takes long srun options in the --opt=value form"), std::string::npos)
      << profile_error(text);
  text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive\nsrun = --mpi=pmi2");
  EXPECT_NE(profile_error(text).find("is set by the scripts themselves"), std::string::npos) << profile_error(text);
  // A later #SBATCH line wins: a 1n1g job asked for 3 nodes, --requeue undid --no-requeue.
  for (const char* own : {"--nodes=3", "--time=1", "--signal=USR1@1", "--requeue", "--job-name=x", "--ntasks-per-node=7", "--gpus=16"}) {
    text = kProfile;
    text.replace(text.find("sbatch = --exclusive"), 20, std::string("sbatch = --exclusive ") + own);
    EXPECT_NE(profile_error(text).find(std::string("'") + own + "' is set by the scripts themselves"), std::string::npos)
        << profile_error(text);
  }
}

// Slurm keeps the last --gres line only: a gres GPU request and the profile's nvme:1 on two
// lines gave the GPU jobs no GPUs. Every entry goes on one line; GPUs come from the matrix.
TEST(Script, GenericResourcesShareOneGresLine) {
  std::string text = kProfile;
  text.replace(text.find("signal_seconds"), 0, "gpu_request = gres\ngpu_type = h100\n");
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive --gres=nvme:1 --gres=tmpfs:10G,shard:2");
  Profile p = profile(text);
  const auto jobs = expand_jobs(p, matrix());
  const auto gres_lines = [](const std::string& script) {
    std::vector<std::string> lines;
    for (size_t at = script.find("#SBATCH --gres"); at != std::string::npos; at = script.find("#SBATCH --gres", at + 1))
      lines.push_back(script.substr(at, script.find('\n', at) - at));
    return lines;
  };
  EXPECT_EQ(gres_lines(render_sbatch(p, jobs[1], {"p.ini", "m.ini"})),  // rn50_4n8g
            (std::vector<std::string>{"#SBATCH --gres=gpu:h100:8,nvme:1,tmpfs:10G,shard:2"}));
  EXPECT_EQ(gres_lines(render_sbatch(p, jobs[4], {"p.ini", "m.ini"})),  // rn50_cpu_2n2r: no GPU entries
            (std::vector<std::string>{"#SBATCH --gres=nvme:1,tmpfs:10G"}));
  const Matrix m = matrix(std::string(kMatrix) + "[comm]\nconfigurations = 1n2g\n");
  EXPECT_EQ(gres_lines(render_comm_sbatch(p, m, expand_comm_jobs(p, m).at(0), {"p.ini", "m.ini"})),
            (std::vector<std::string>{"#SBATCH --gres=gpu:h100:2,nvme:1,tmpfs:10G,shard:2"}));
  // Asked for by --gpus-per-node, the GPUs keep their own line beside the one --gres line.
  p.gpu_request = GpuRequest::gpus_per_node;
  const std::string g = render_sbatch(p, jobs[1], {"p.ini", "m.ini"});
  EXPECT_EQ(gres_lines(g), (std::vector<std::string>{"#SBATCH --gres=nvme:1,tmpfs:10G,shard:2"}));
  EXPECT_NE(g.find("#SBATCH --gpus-per-node=h100:8\n"), std::string::npos);
  // A GPU entry would replace the count the configuration asks for.
  for (const char* gpus : {"--gres=gpu:4", "--gres=nvme:1,gpu:a100:4", "--gres=gpu"}) {
    text = kProfile;
    text.replace(text.find("sbatch = --exclusive"), 20, std::string("sbatch = --exclusive ") + gpus);
    EXPECT_NE(profile_error(text).find(std::string("p.ini:9: sbatch '") + gpus + "' asks for GPUs, which the scripts do"),
              std::string::npos)
        << profile_error(text);
  }
  text = kProfile;
  text.replace(text.find("sbatch = --exclusive"), 20, "sbatch = --exclusive --gres=nvme:1,,x:1");
  EXPECT_NE(profile_error(text).find("has an empty entry"), std::string::npos) << profile_error(text);
}

// Every option the scripts write on an #SBATCH line is one a profile may not set again (a later
// line would win), or --gres, whose entries the scripts merge onto their own line.
TEST(Script, EveryOwnSbatchLineIsGuarded) {
  for (const char* request : {"gpus-per-node", "gres"}) {
    std::string text = kProfile;
    text.replace(text.find("signal_seconds"), 0, std::string("gpu_request = ") + request + "\naccount = a\nqos = q\nconstraint = c\n");
    text.replace(text.find("sbatch = --exclusive"), 20, "");
    const Profile p = profile(text);
    const Matrix m = matrix(std::string(kMatrix) + "[comm]\nconfigurations = 1n2g 2n8g\ncpu_configurations = 2n2r\n");
    ASSERT_EQ(expand_comm_jobs(p, m).size(), 3u);
    std::vector<std::string> scripts;
    for (const auto& j : expand_jobs(p, m)) scripts.push_back(render_sbatch(p, j, {"p.ini", "m.ini"}));
    for (const auto& j : expand_comm_jobs(p, m)) scripts.push_back(render_comm_sbatch(p, m, j, {"p.ini", "m.ini"}));
    scripts.push_back(render_reduce(p, m, {"p.ini", "m.ini"}));
    int seen = 0;
    for (const std::string& s : scripts)
      for (size_t at = s.find("#SBATCH "); at != std::string::npos; at = s.find("#SBATCH ", at + 1)) {
        const std::string line = s.substr(at + 8, s.find('\n', at) - at - 8);
        const std::string name = line.substr(0, line.find('='));
        bool guarded = name == "--gres";
        for (const char* own : kScriptSbatchOptions) guarded = guarded || name == own;
        EXPECT_TRUE(guarded) << request << ": #SBATCH " << line << " could be overridden by a profile's sbatch words";
        ++seen;
      }
    EXPECT_GT(seen, 50);
  }
}

TEST(Jobs, SignalMustComeBeforeTheTimeLimit) {
  const Profile p = profile(std::string(kProfile) + "");
  Matrix m = matrix();
  m.models[0].time = "2";  // 120 s: the signal would come at the start
  try {
    expand_jobs(p, m);
    FAIL();
  } catch (const JobsError& e) {
    EXPECT_NE(std::string(e.what()).find("signal_seconds 120 is not less than the time limit 2 of rn50_1n1g"), std::string::npos);
  }
}

TEST(Script, GpuJobHasTheConfigurationsSbatchLines) {
  const Profile p = profile();
  const Matrix m = matrix();
  const auto jobs = expand_jobs(p, m);
  const std::string s = render_sbatch(p, jobs[3], {"p.ini", "m.ini"});  // bert_base_4n8g
  for (const char* line : {"#!/bin/bash\n", "#SBATCH --job-name=dlperf_bert_base_4n8g\n", "#SBATCH --nodes=4\n",
                           "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-node=8\n", "#SBATCH --cpus-per-task=8\n",
                           "#SBATCH --time=00:30:00\n", "#SBATCH --signal=USR1@120\n", "#SBATCH --output=%x_%j.out\n",
                           "#SBATCH --partition=gpu\n", "#SBATCH --exclusive\n", "export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK\n",
                           "module load dlperf/0.1.0 cuda || exit 1\n", "export NCCL_SOCKET_IFNAME='^lo,docker'\n", "repeats=3\n",
                           "srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores --gpu-bind=none --distribution=block:block dlperf-train --model bert_base "
                           "--backend cuda --precision fp16",
                           " --seq-len 128 \\\n", "--output \"$results\" --repeat-index \"$i\"\n",
                           "results=${DLPERF_RESULTS:-$results_dir/bert_base_4n8g_$SLURM_JOB_ID.h5}\n", "dlperf-reduce --warmup 20 --window 100 \"$results\"",
                           "if [ -z \"${SLURM_JOB_ID:-}\" ]; then\n"})
    EXPECT_NE(s.find(line), std::string::npos) << line;
  // #SBATCH lines are only read before the first command.
  EXPECT_LT(s.rfind("#SBATCH"), s.find("\nset -uo pipefail"));
}

TEST(Script, CpuJobAndGresAndSpack) {
  std::string text = kProfile;
  text.replace(text.find("signal_seconds"), 0, "gpu_request = gres\ngpu_type = a100\n");
  text.replace(text.find("load = module\nmodules = dlperf/0.1.0 cuda"), 41, "load = spack\nspack_env = /sw/dlperf");
  const Profile p = profile(text);
  const auto jobs = expand_jobs(p, matrix());
  const std::string g = render_sbatch(p, jobs[0], {"p.ini", "m.ini"});
  EXPECT_NE(g.find("#SBATCH --gres=gpu:a100:1\n"), std::string::npos);
  EXPECT_NE(g.find("spack env activate /sw/dlperf || exit 1\n"), std::string::npos);
  const std::string c = render_sbatch(p, jobs[4], {"p.ini", "m.ini"});  // rn50_cpu_2n2r
  EXPECT_EQ(c.find("--gres"), std::string::npos);
  EXPECT_NE(c.find("#SBATCH --partition=cpu\n"), std::string::npos);
  EXPECT_NE(c.find("#SBATCH --cpus-per-task=32\n"), std::string::npos);
  EXPECT_NE(c.find("--backend cpu --precision fp32"), std::string::npos);
  EXPECT_NE(c.find("--batch-size 64"), std::string::npos);
}

TEST(Script, SubmitAllChainsTheReduceJob) {
  const Profile p = profile();
  const Matrix m = matrix();
  const auto jobs = expand_jobs(p, m);
  const std::string s = render_submit_all(jobs, {}, {"p.ini", "m.ini"});
  EXPECT_NE(s.find("gpu_jobs=(rn50_1n1g.sh rn50_4n8g.sh bert_base_1n1g.sh bert_base_4n8g.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("cpu_jobs=(rn50_cpu_2n2r.sh bert_base_cpu_2n2r.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("--dependency=afterany:\"$dep\""), std::string::npos);
  const std::string r = render_reduce(p, m, {"p.ini", "m.ini"});
  EXPECT_NE(r.find("#SBATCH --ntasks=1\n"), std::string::npos);
  EXPECT_NE(r.find("--json"), std::string::npos);
}

// Issue 24 item 7: a model section may set its own configurations, GPU precision and CPU-only
// arguments (the Llama jobs: bf16 8B on 1n8g..4n8g, a reduced CPU variant); language models
// are submitted by `submit_all.sh llm`, not gpu or cpu.
TEST(Jobs, ModelsSetTheirOwnConfigurationsPrecisionAndCpuArguments) {
  const Profile p = profile();
  const std::string own = R"(
[matrix]
models = rn50 bert_base
configurations = 1n1g 4n8g
cpu_configurations = 2n2r
[rn50]
batch_per_device = 256
[bert_base]
configurations = 1n8g 2n8g
cpu_configurations = 1n1r
precision = bf16
batch_per_device = 1
extra_args = --seq-len 512
cpu_extra_args = --seq-len 128 --bert-layers 2
)";
  const Matrix o = matrix(own);
  std::vector<std::string> names;
  for (const auto& j : expand_jobs(p, o)) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rn50_1n1g", "rn50_4n8g", "bert_base_1n8g", "bert_base_2n8g", "rn50_cpu_2n2r", "bert_base_cpu_1n1r"}));
  const auto jobs = expand_jobs(p, o);
  EXPECT_EQ(jobs[0].precision, "fp16");
  EXPECT_EQ(jobs[2].precision, "bf16");
  EXPECT_EQ(jobs[2].extra_args, (std::vector<std::string>{"--seq-len", "512"}));
  EXPECT_EQ(jobs[5].extra_args, (std::vector<std::string>{"--seq-len", "128", "--bert-layers", "2"}));
  std::string fp8 = own;
  fp8.replace(fp8.find("precision = bf16"), 16, "precision = fp8");
  EXPECT_NE(matrix_error(fp8).find("m.ini:11: precision 'fp8' is unknown"), std::string::npos);
  // A bad CPU-only argument names cpu_extra_args, checked by dlperf-train's parser.
  std::string bad = own;
  bad.replace(bad.find("--bert-layers 2"), 15, "--bert-layers x");
  EXPECT_NE(matrix_error(bad).find("cpu_extra_args is refused by dlperf-train for bert_base (CPU backend)"), std::string::npos);

  // A language model's jobs (the flag dlperf-jobs sets for llama3_8b and llama3_2_1b).
  Matrix l = o;
  l.models[1].llm = true;
  l.models[1].train_model = "llama3_8b";
  const auto ljobs = expand_jobs(p, l);
  const std::string s = render_submit_all(ljobs, {}, {"p.ini", "m.ini"});
  EXPECT_NE(s.find("gpu_jobs=(rn50_1n1g.sh rn50_4n8g.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("cpu_jobs=(rn50_cpu_2n2r.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("llm_jobs=(bert_base_1n8g.sh bert_base_2n8g.sh bert_base_cpu_1n1r.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("  llm) scripts=(\"${llm_jobs[@]}\") ;;\n"), std::string::npos);
  const std::string g = render_sbatch(p, ljobs[3], {"p.ini", "m.ini"});
  EXPECT_NE(g.find("dlperf-train --model llama3_8b --backend cuda --precision bf16 \\\n      --batch-size 1 "), std::string::npos);
  EXPECT_NE(g.find("\\\n      --seq-len 512 \\\n"), std::string::npos);
}

// Fabric health (issue 27 item 3): [comm] configurations become comm_<tag>.sh running
// dlperf-comm with a record in results.d; [fabric] rates reach dlperf-reduce; submit_all.sh comm.
TEST(Script, CommJobsMeasureTheFabric) {
  const Profile p = profile(std::string(kProfile) + "[fabric]\nlink_gbps = 200\nintra_gbps = 2400\nwarn_fraction = 0.7\n");
  const Matrix m = matrix(std::string(kMatrix) + "[comm]\nconfigurations = 1n8g 2n8g\nmax_bytes = 256M\niters = 10\n");
  const auto comm = expand_comm_jobs(p, m);
  ASSERT_EQ(comm.size(), 2u);
  EXPECT_EQ(comm[1].name, "comm_2n8g");
  const std::string c = render_comm_sbatch(p, m, comm[1], {"p.ini", "m.ini"});
  EXPECT_NE(c.find("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --gpus-per-node=8\n"), std::string::npos);
  EXPECT_NE(c.find("#SBATCH --time=00:15:00\n"), std::string::npos);
  EXPECT_NE(c.find("dlperf-comm --backend nccl --op \"$op\" \\\n        -b 8 -e 256M -f 2 -n 10 -w 5 --output \"$record\"\n"), std::string::npos);
  // Every collective by default, one record each; the job exits with the worst status.
  EXPECT_NE(c.find("for op in allreduce reduce_scatter all_gather; do\n"), std::string::npos);
  EXPECT_NE(c.find("  record=$results_dir/comm_2n8g_${op}_$SLURM_JOB_ID.comm\n"), std::string::npos);
  EXPECT_NE(c.find("exit $worst\n"), std::string::npos);
  EXPECT_NE(c.find("export NCCL_SOCKET_IFNAME='^lo,docker'\n"), std::string::npos);
  EXPECT_NE(c.find("dlperf-reduce \"${records[@]}\" --link-gbps 200 --intra-gbps 2400 --link-warn 0.7\n"), std::string::npos);
  EXPECT_NE(render_reduce(p, m, {"p.ini", "m.ini"}).find("--link-gbps 200 --intra-gbps 2400 --link-warn 0.7\n"), std::string::npos);
  const std::string s = render_submit_all(expand_jobs(p, m), comm, {"p.ini", "m.ini"});
  EXPECT_NE(s.find("comm_jobs=(comm_1n8g.sh comm_2n8g.sh)\n"), std::string::npos);
  EXPECT_NE(s.find("  all) scripts=(\"${comm_jobs[@]}\" \"${gpu_jobs[@]}\" \"${cpu_jobs[@]}\" \"${llm_jobs[@]}\") ;;\n"), std::string::npos);
  // Without [fabric], no comparison is asked for; without [comm], no comm jobs.
  EXPECT_EQ(render_reduce(profile(), m, {"p.ini", "m.ini"}).find("--link-gbps"), std::string::npos);
  EXPECT_TRUE(expand_comm_jobs(p, matrix()).empty());
  // CPU-backend fabric jobs: MPI over host buffers, the [cpu] partition, no GPU request.
  const Matrix mc = matrix(std::string(kMatrix) + "[comm]\ncpu_configurations = 2n2r\n");
  const auto cpu = expand_comm_jobs(p, mc);
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_EQ(cpu[0].name, "comm_cpu_2n2r");
  const std::string cc = render_comm_sbatch(p, mc, cpu[0], {"p.ini", "m.ini"});
  EXPECT_NE(cc.find("dlperf-comm --backend mpi --op \"$op\" \\\n        -b 8 -e 1G "), std::string::npos);
  // ops: a subset, in the order given.
  const Matrix mo = matrix(std::string(kMatrix) + "[comm]\nconfigurations = 1n8g\nops = all_gather reduce_scatter\n");
  EXPECT_NE(render_comm_sbatch(p, mo, expand_comm_jobs(p, mo)[0], {"p.ini", "m.ini"}).find("for op in all_gather reduce_scatter; do\n"),
            std::string::npos);
  EXPECT_NE(cc.find("#SBATCH --partition=cpu\n"), std::string::npos);
  EXPECT_EQ(cc.find("gpus-per-node"), std::string::npos);
  EXPECT_EQ(cc.find("--gpu-bind"), std::string::npos);
  // Bad values name the file, line and key.
  EXPECT_NE(profile_error(std::string(kProfile) + "[fabric]\nlink_gbps = fast\n").find("link_gbps must be a number from 0"), std::string::npos);
  EXPECT_NE(profile_error(std::string(kProfile) + "[fabric]\nwarn_fraction = 1.5\n").find("warn_fraction must be a number above 0 to 1"),
            std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nconfigurations = 2n2r\n").find("'2n2r' is not a configuration"), std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nconfigurations = 1n8g\nmax_bytes = 1T\n").find("max_bytes '1T' is not a message size"),
            std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nop = allgather\n").find("unknown key 'op' in [comm]"), std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nops = allgather\n").find("ops 'allgather' is not a collective dlperf-comm measures"),
            std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nops = allreduce allreduce\n").find("ops names 'allreduce' twice"), std::string::npos);
  EXPECT_NE(matrix_error(std::string(kMatrix) + "[comm]\nops =\n").find("ops is empty"), std::string::npos);
}

}  // namespace
}  // namespace dlperf::jobs
