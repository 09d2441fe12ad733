#include "jobs/job_spec.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/parse_number.h"
#include "jobs/train_args.h"

namespace dlperf::jobs {
namespace {

struct KnownModel {
  const char* name;
  const char* train_model;
  const char* title;
};
constexpr KnownModel kModels[] = {
    {"rn50", "resnet50", "ResNet-50 v1.5"},
    {"vgg16", "vgg16", "VGG16"},
    {"bert_base", "bert_base", "BERT-base pretraining"},
    {"llama3_8b", "llama3_8b", "Llama 3 8B pretraining"},
    {"llama3_2_1b", "llama3_2_1b", "Llama 3.2 1B pretraining"},
};
bool is_llm(const std::string& name) { return name.rfind("llama", 0) == 0; }

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}

// Characters that need no quoting in a shell word: options, paths, module names, partitions.
bool shell_safe(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_.,:=/+@%^-").find(c) != std::string_view::npos;
  });
}

// Reads one section, rejecting keys it does not know (a typo must not be silently ignored).
class SectionReader {
 public:
  SectionReader(const IniFile& f, const IniSection* s, std::vector<std::string> known) : f_(f), s_(s) {
    if (!s_) return;
    for (const auto& e : s_->entries)
      if (std::find(known.begin(), known.end(), e.key) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw_bad_input(f_.where(e.line) + ": unknown key '" + e.key + "' in [" + s_->name + "]: known keys are " + list);
      }
  }
  bool has(const std::string& key) const { return s_ && s_->find(key); }
  std::string where(const std::string& key) const {
    const IniEntry* e = s_ ? s_->find(key) : nullptr;
    return f_.where(e ? e->line : (s_ ? s_->line : 0));
  }
  std::string str(const std::string& key, const std::string& fallback) const {
    const IniEntry* e = s_ ? s_->find(key) : nullptr;
    return e ? e->value : fallback;
  }
  // A single shell-safe word, or "" when empty is allowed.
  std::string word(const std::string& key, const std::string& fallback, bool allow_empty = true) const {
    const std::string v = str(key, fallback);
    if (v.empty() && allow_empty) return v;
    if (!shell_safe(v)) fail(key, "'" + v + "' must be one word of letters, digits and _.,:=/+@%^-");
    return v;
  }
  // A Slurm feature expression ("h100&ib", "[rack1|rack2]", "(a&b)*2"): written only on an
  // #SBATCH line, which sbatch reads itself (no shell), so its operators need no quoting.
  std::string constraint(const std::string& key, const std::string& fallback) const {
    const std::string v = str(key, fallback);
    if (v.empty()) return v;
    int square = 0, round = 0;
    for (char c : v) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_.,:=/+@%^-&|[]()*").find(c) == std::string_view::npos)
        fail(key, "'" + v + "' must be one Slurm feature expression of letters, digits, _.:=/+@%^- and the operators &|,*[]() (no spaces or quotes)");
      square += c == '[' ? 1 : c == ']' ? -1 : 0;
      round += c == '(' ? 1 : c == ')' ? -1 : 0;
      if (square < 0 || round < 0) break;
    }
    if (square != 0 || round != 0) fail(key, "'" + v + "' has unbalanced brackets or parentheses");
    return v;
  }
  std::vector<std::string> list(const std::string& key, const std::string& fallback) const {
    auto w = words(str(key, fallback));
    for (const auto& t : w)
      if (!shell_safe(t)) fail(key, "'" + t + "' may only use letters, digits and _.,:=/+@%^- (no quotes or spaces inside a word)");
    return w;
  }
  int integer(const std::string& key, int fallback, int lo, int hi) const {
    if (!has(key)) return fallback;
    const std::string v = str(key, "");
    const auto n = parse_int64(v);
    if (!n || *n < lo || *n > hi)
      fail(key, "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + " (got '" + v + "')");
    return static_cast<int>(*n);
  }
  // A rate: a finite number from 0 (exclusive unless lo_open is false) up to hi.
  double real(const std::string& key, double fallback, double lo, double hi, bool lo_open) const {
    if (!has(key)) return fallback;
    const std::string v = str(key, "");
    // Strict decimal: std::stod read "0x10" as 16 and " 8" as 8; 1e-400 (read as 0) is refused.
    const std::optional<double> d = parse_double(v);
    if (!d || !(lo_open ? *d > lo : *d >= lo) || !(*d <= hi))
      fail(key, "must be a number " + std::string(lo_open ? "above " : "from ") + fmt(lo) + " to " + fmt(hi) + " (got '" + v + "')");
    return *d;
  }
  static std::string fmt(double d) {
    std::ostringstream o;
    o << d;
    return o.str();
  }
  std::string time(const std::string& key, const std::string& fallback) const {
    const std::string v = str(key, fallback);
    if (!v.empty() && parse_slurm_time(v) <= 0)
      fail(key, "'" + v + "' is not a Slurm time limit: use minutes, MM:SS, HH:MM:SS or D-HH:MM:SS");
    return v;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw_bad_input(where(key) + ": " + key + " " + what);
  }

 private:
  const IniFile& f_;
  const IniSection* s_;
};

void reject_unknown_sections(const IniFile& f, const std::vector<std::string>& known, const std::string& what) {
  for (const auto& s : f.sections)
    if (std::find(known.begin(), known.end(), s.name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "[" : ", [") + k + "]";
      throw_bad_input(f.where(s.line) + ": unknown section [" + s.name + "] in a " + what + ": use " + list);
    }
}

// "nvme:1,,gpu:4" -> {"nvme:1", "", "gpu:4"}: the entries of a --gres or --tres-per-* value.
std::vector<std::string> comma_entries(const std::string& list) {
  std::vector<std::string> out;
  for (size_t from = 0; from <= list.size();) {
    const size_t comma = std::min(list.find(',', from), list.size());
    out.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

SlurmSettings read_slurm(const SectionReader& r, const SlurmSettings& base) {
  SlurmSettings s;
  s.partition = r.word("partition", base.partition);
  s.account = r.word("account", base.account);
  s.qos = r.word("qos", base.qos);
  s.constraint = r.constraint("constraint", base.constraint);
  s.time = r.time("time", base.time);
  if (s.time.empty()) r.fail("time", "must be set (a Slurm time limit such as 01:00:00)");
  s.cpus_per_task = r.integer("cpus_per_task", base.cpus_per_task, 1, 1024);
  const std::vector<std::string> words = r.has("sbatch") ? r.list("sbatch", "") : base.extra_sbatch;
  s.gres = r.has("sbatch") ? "" : base.gres;
  for (const auto& o : words) {
    if (o.rfind("--", 0) != 0) r.fail("sbatch", "takes long sbatch options such as --exclusive --mem=0 (got '" + o + "')");
    const std::string name = o.substr(0, o.find('='));
    for (const char* own : kScriptSbatchOptions)
      if (name == own)
        r.fail("sbatch", "'" + o + "' is set by the scripts themselves (from the matrix's scales and the profile's keys: partition, "
                         "account, qos, constraint, time, cpus_per_task, signal_seconds, gpu_request, gpu_type)");
    if (name != "--gres") {
      s.extra_sbatch.push_back(o);
      continue;
    }
    // Slurm keeps the last --gres line only: a GPU job's gpu:G and nvme:1 on two lines left it
    // without GPUs. Every entry goes on one line; GPUs come from the configurations.
    if (o.size() <= name.size() + 1) r.fail("sbatch", "'" + o + "' names no generic resource (such as --gres=nvme:1)");
    for (const std::string& entry : comma_entries(o.substr(name.size() + 1))) {
      if (entry.empty()) r.fail("sbatch", "'" + o + "' has an empty entry");
      if (entry == "gpu" || entry.rfind("gpu:", 0) == 0)
        r.fail("sbatch", "'" + o + "' asks for GPUs, which the scripts do from the matrix's configurations (gpu_request, gpu_type); "
                         "other generic resources such as --gres=nvme:1 are kept");
      s.gres += (s.gres.empty() ? "" : ",") + entry;
    }
  }
  s.srun = r.has("srun") ? r.list("srun", "") : base.srun;
  for (const auto& o : s.srun) {
    if (o.rfind("--", 0) != 0 || o.find('=') == std::string::npos)
      r.fail("srun", "takes long srun options in the --opt=value form such as --cpu-bind=cores (got '" + o + "')");
    for (const char* own : {"--mpi=", "--kill-on-bad-exit="})
      if (o.rfind(own, 0) == 0) r.fail("srun", "'" + o + "' is set by the scripts themselves ([slurm] mpi; --kill-on-bad-exit=1)");
  }
  return s;
}

std::vector<Configuration> read_configurations(const SectionReader& r, const std::string& key, char unit, const std::string& fallback) {
  static const std::regex re("([0-9]+)n([0-9]+)([gr])");
  std::vector<Configuration> out;
  for (const auto& w : r.list(key, fallback)) {
    std::smatch m;
    const std::string example = unit == 'g' ? "1n1g 1n8g 4n8g (nodes n GPUs per node g)" : "1n1r 1n2r 2n2r (nodes n ranks per node r)";
    if (!std::regex_match(w, m, re) || m[3].str()[0] != unit) r.fail(key, "'" + w + "' is not a configuration: use words like " + example);
    Configuration c;
    const auto nodes = parse_int64(m[1].str()), per_node = parse_int64(m[2].str());  // empty on overflow
    c.backend = unit == 'g' ? Backend::cuda : Backend::cpu;
    if (!nodes || !per_node || *nodes < 1 || *nodes > 4096 || *per_node < 1 || *per_node > 256)
      r.fail(key, "'" + w + "' needs 1-4096 nodes and 1-256 per node");
    c.nodes = static_cast<int>(*nodes);
    c.per_node = static_cast<int>(*per_node);
    for (const auto& o : out)
      if (o.tag() == c.tag()) r.fail(key, "lists '" + w + "' twice");
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Configuration::tag() const {
  return std::to_string(nodes) + "n" + std::to_string(per_node) + (backend == Backend::cuda ? "g" : "r");
}

long parse_slurm_time(const std::string& s) {
  static const std::regex re("(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return -1;
  // Each field at most 8 digits (years of minutes), so the sums below cannot overflow.
  for (int i = 1; i <= 4; ++i)
    if (m[i].matched && m[i].length() > 8) return -1;
  const auto n = [&](int i) { return m[i].matched ? *parse_int64(m[i].str()) : 0L; };
  if (m[1].matched)  // days-hours[:minutes[:seconds]]
    return ((n(1) * 24 + n(2)) * 60 + n(3)) * 60 + n(4);
  if (m[4].matched) return (n(2) * 60 + n(3)) * 60 + n(4);  // hours:minutes:seconds
  if (m[3].matched) return n(2) * 60 + n(3);                // minutes:seconds
  return n(2) * 60;                                         // minutes
}

Profile load_profile(const IniFile& f) {
  reject_unknown_sections(f, {"cluster", "slurm", "cpu", "environment", "network", "fabric"}, "cluster profile");
  Profile p;
  p.source = f.path.substr(f.path.find_last_of('/') + 1);
  const SectionReader cluster(f, f.find("cluster"), {"name", "description"});
  p.name = cluster.word("name", "cluster", false);

  const SectionReader slurm(f, f.find("slurm"), {"partition", "account", "qos", "constraint", "time", "cpus_per_task", "sbatch",
                                                 "srun", "gpu_request", "gpu_type", "signal_seconds", "mpi"});
  p.gpu = read_slurm(slurm, SlurmSettings{});
  const std::string req = slurm.str("gpu_request", "gpus-per-node");
  if (req == "gpus-per-node") p.gpu_request = GpuRequest::gpus_per_node;
  else if (req == "gres") p.gpu_request = GpuRequest::gres;
  else slurm.fail("gpu_request", "'" + req + "' is unknown: use gpus-per-node (--gpus-per-node=G) or gres (--gres=gpu[:type]:G)");
  p.gpu_type = slurm.word("gpu_type", "");
  p.signal_seconds = slurm.integer("signal_seconds", p.signal_seconds, 1, 65535);  // sbatch --signal's limit
  p.srun_mpi = slurm.word("mpi", p.srun_mpi, false);

  const SectionReader cpu(f, f.find("cpu"), {"partition", "account", "qos", "constraint", "time", "cpus_per_task", "sbatch", "srun"});
  // CPU jobs bind cores the same way but have no GPU: [slurm]'s srun and sbatch options less
  // those that ask for or bind GPUs (on a node without GPUs, srun --gpus-per-task=1 fails with
  // "Invalid generic resource (gres) specification"), unless [cpu] sets its own.
  SlurmSettings cpu_base = p.gpu;
  // "nvme:1,gpu:4" -> "nvme:1": the entries of a --gres or --tres-per-* list that are GPUs
  // (shared as shard or mps too).
  const auto other_entries = [](const std::string& list) {
    std::string rest;
    for (const std::string& entry : comma_entries(list)) {
      bool gpu_entry = false;
      for (const char* g : {"gpu", "shard", "mps", "gres/gpu", "gres/shard", "gres/mps"})
        gpu_entry = gpu_entry || entry.rfind(g, 0) == 0;
      if (!entry.empty() && !gpu_entry) rest += (rest.empty() ? "" : ",") + entry;
    }
    return rest;
  };
  const auto without_gpus = [&](std::vector<std::string>& options) {
    std::vector<std::string> kept;
    for (const std::string& o : options) {
      bool gpu = false;
      for (const char* prefix : {"--gpu", "--mem-per-gpu", "--cpus-per-gpu", "--ntasks-per-gpu", "--tres-bind=gres/gpu"})
        gpu = gpu || o.rfind(prefix, 0) == 0;
      if (gpu) continue;
      // srun --gres=nvme:1,gpu:1 and --tres-per-task=cpu=2,gres/gpu=1: only the GPU entries go.
      const size_t eq = o.find('=');
      const std::string name = o.substr(0, eq);
      if (eq != std::string::npos && (name == "--gres" || name == "--tres-per-task" || name == "--tres-per-node")) {
        if (const std::string rest = other_entries(o.substr(eq + 1)); !rest.empty()) kept.push_back(name + "=" + rest);
        continue;
      }
      kept.push_back(o);
    }
    options = kept;
  };
  without_gpus(cpu_base.srun);
  without_gpus(cpu_base.extra_sbatch);
  cpu_base.gres = other_entries(cpu_base.gres);
  p.cpu = read_slurm(cpu, cpu_base);
  p.has_cpu_section = f.find("cpu") != nullptr;

  const SectionReader env(f, f.find("environment"), {"load", "modules", "spack_setup", "spack_env"});
  const std::string load = env.str("load", "none");
  if (load == "none") p.loader = EnvLoader::none;
  else if (load == "module") p.loader = EnvLoader::module;
  else if (load == "spack") p.loader = EnvLoader::spack;
  else env.fail("load", "'" + load + "' is unknown: use module, spack or none (dlperf already on PATH)");
  p.modules = env.list("modules", "");
  p.spack_setup = env.word("spack_setup", "");
  p.spack_env = env.word("spack_env", "");
  if (p.loader == EnvLoader::module && p.modules.empty()) env.fail("modules", "must list the modules to load when load = module (e.g. dlperf)");
  if (p.loader == EnvLoader::spack && p.spack_env.empty()) env.fail("spack_env", "must name the Spack environment (a path or name) when load = spack");

  const SectionReader fabric(f, f.find("fabric"), {"link_gbps", "intra_gbps", "warn_fraction"});
  p.link_gbps = fabric.real("link_gbps", 0, 0, 1e6, false);
  p.intra_gbps = fabric.real("intra_gbps", 0, 0, 1e6, false);
  for (const auto& [key, rate] : {std::pair{"link_gbps", p.link_gbps}, std::pair{"intra_gbps", p.intra_gbps}})
    if (rate > 0 && rate < 1e-3) fabric.fail(key, "must be 0 (none) or 0.001 Gbit/s or more, as dlperf-reduce takes it");
  p.link_warn = fabric.real("warn_fraction", p.link_warn, 0, 1, true);

  if (const IniSection* net = f.find("network")) {
    // Any portable variable name: Open MPI's MCA variables are mixed case (OMPI_MCA_btl_tcp_if_include).
    static const std::regex var("[A-Za-z_][A-Za-z0-9_]*");
    for (const auto& e : net->entries) {
      if (!std::regex_match(e.key, var))
        throw_bad_input(f.where(e.line) + ": [network] keys are environment variables like UCX_TLS or OMPI_MCA_btl (got '" + e.key + "')");
      if (e.value.find_first_of("'\n") != std::string::npos) throw_bad_input(f.where(e.line) + ": " + e.key + " must not contain a single quote");
      p.env.emplace_back(e.key, e.value);
    }
  }
  return p;
}

Matrix load_matrix(const IniFile& f) {
  std::vector<std::string> sections{"matrix", "comm"};
  for (const auto& k : kModels) sections.push_back(k.name);
  reject_unknown_sections(f, sections, "job matrix");
  Matrix m;
  m.source = f.path.substr(f.path.find_last_of('/') + 1);
  const SectionReader mx(f, f.find("matrix"), {"models", "configurations", "precision", "repeats", "iterations", "warmup",
                                               "cpu_configurations", "cpu_precision", "extra_args"});
  m.configurations = read_configurations(mx, "configurations", 'g', "1n1g 1n2g 1n4g 1n8g 2n8g 4n8g");
  m.cpu_configurations = read_configurations(mx, "cpu_configurations", 'r', "");
  m.precision = mx.str("precision", m.precision);
  if (m.precision != "fp32" && m.precision != "tf32" && m.precision != "bf16" && m.precision != "fp16")
    mx.fail("precision", "'" + m.precision + "' is unknown: use fp32, tf32, bf16 or fp16");
  m.cpu_precision = mx.str("cpu_precision", m.cpu_precision);
  if (m.cpu_precision != "fp32" && m.cpu_precision != "bf16") mx.fail("cpu_precision", "'" + m.cpu_precision + "' is unknown: use fp32 or bf16 (tf32 and fp16 are GPU only)");
  m.repeats = mx.integer("repeats", m.repeats, 1, 1000);
  m.iterations = mx.integer("iterations", m.iterations, 1, 100000000);
  m.warmup = mx.integer("warmup", m.warmup, 0, 100000000);
  if (m.warmup >= m.iterations) mx.fail("warmup", std::to_string(m.warmup) + " leaves no measured iteration: use fewer than iterations = " + std::to_string(m.iterations));
  m.extra_args = mx.list("extra_args", "");

  const auto names = mx.list("models", "rn50 vgg16 bert_base");
  if (names.empty()) mx.fail("models", "must list at least one of rn50, vgg16, bert_base, llama3_8b, llama3_2_1b");
  for (const auto& n : names) {
    const KnownModel* k = nullptr;
    for (const auto& km : kModels)
      if (n == km.name) k = &km;
    if (!k) mx.fail("models", "'" + n + "' is unknown: use rn50, vgg16, bert_base, llama3_8b, llama3_2_1b");
    for (const auto& have : m.models)
      if (have.name == n) mx.fail("models", "lists '" + n + "' twice");
    const IniSection* sec = f.find(n);
    if (!sec) throw_bad_input(f.where(0) + ": model " + n + " is in [matrix] models but has no [" + n + "] section with batch_per_device");
    const SectionReader r(f, sec, {"batch_per_device", "cpu_batch_per_device", "extra_args", "cpu_extra_args", "time", "cpu_time", "real_data",
                                   "precision", "configurations", "cpu_configurations"});
    ModelSettings s{n, k->train_model, k->title};
    s.llm = is_llm(n);
    s.precision = r.str("precision", "");
    if (!s.precision.empty() && s.precision != "fp32" && s.precision != "tf32" && s.precision != "bf16" && s.precision != "fp16")
      r.fail("precision", "'" + s.precision + "' is unknown: use fp32, tf32, bf16 or fp16");
    s.own_configurations = r.has("configurations");
    s.own_cpu_configurations = r.has("cpu_configurations");
    s.configurations = s.own_configurations ? read_configurations(r, "configurations", 'g', "") : m.configurations;
    s.cpu_configurations = s.own_cpu_configurations ? read_configurations(r, "cpu_configurations", 'r', "") : m.cpu_configurations;
    if (!r.has("batch_per_device")) r.fail("batch_per_device", "is missing in [" + n + "]: samples per device per iteration, e.g. 128");
    s.batch_per_device = r.integer("batch_per_device", 0, 1, 1 << 20);
    s.cpu_batch_per_device = r.integer("cpu_batch_per_device", s.batch_per_device, 1, 1 << 20);
    s.extra_args = r.list("extra_args", "");
    s.cpu_extra_args = r.has("cpu_extra_args") ? r.list("cpu_extra_args", "") : s.extra_args;
    s.time = r.time("time", "");
    s.cpu_time = r.time("cpu_time", "");
    const std::string real = r.str("real_data", "no");
    if (real != "yes" && real != "no") r.fail("real_data", "must be yes or no (got '" + real + "')");
    if (real == "yes" && (n == "bert_base" || s.llm)) r.fail("real_data", "is for the image models (rn50, vgg16)");
    s.real_data = real == "yes";
    // Every script this model gets passes dlperf-train exactly the arguments checked here, by
    // dlperf-train's own parser: extra_args with what the job adds itself (--variant
    // real_data, --threads, ...), on either backend, with and without real data.
    for (const bool gpu : {true, false})
      for (const bool real_job : {false, true}) {
        if ((gpu ? s.configurations : s.cpu_configurations).empty() || (real_job && !s.real_data)) continue;
        JobSpec j;
        j.model = &s;
        j.config.backend = gpu ? Backend::cuda : Backend::cpu;
        j.precision = gpu ? (s.precision.empty() ? m.precision : s.precision) : m.cpu_precision;
        j.batch_per_device = gpu ? s.batch_per_device : s.cpu_batch_per_device;
        j.iterations = m.iterations;
        j.warmup = m.warmup;
        j.real_data = real_job;
        j.extra_args = m.extra_args;
        const auto& own = gpu ? s.extra_args : s.cpu_extra_args;
        j.extra_args.insert(j.extra_args.end(), own.begin(), own.end());
        const std::string why = train_arguments_error(job_train_arguments(j));
        if (!why.empty())
          (own.empty() ? mx : r)
              .fail(own.empty() || gpu || !r.has("cpu_extra_args") ? "extra_args" : "cpu_extra_args", "is refused by dlperf-train for " + n + (real_job ? " with real_data = yes" : "") + (gpu ? "" : " (CPU backend)") +
                                      ": " + why);
      }
    m.models.push_back(std::move(s));
  }
  // A model's section kept while the model is out of [matrix] models generates nothing, but is
  // still checked: its keys and values are the ones it will have when the model is listed again.
  for (const auto& km : kModels) {
    const IniSection* sec = f.find(km.name);
    if (!sec || std::find(names.begin(), names.end(), km.name) != names.end()) continue;
    const SectionReader r(f, sec, {"batch_per_device", "cpu_batch_per_device", "extra_args", "cpu_extra_args", "time", "cpu_time", "real_data",
                                   "precision", "configurations", "cpu_configurations"});
    (void)r.integer("batch_per_device", 1, 1, 1 << 20);
    (void)r.integer("cpu_batch_per_device", 1, 1, 1 << 20);
    (void)read_configurations(r, "configurations", 'g', "");
    (void)read_configurations(r, "cpu_configurations", 'r', "");
    (void)r.time("time", "");
    (void)r.time("cpu_time", "");
    const std::string precision = r.str("precision", "fp32"), real = r.str("real_data", "no");
    if (precision != "fp32" && precision != "tf32" && precision != "bf16" && precision != "fp16")
      r.fail("precision", "'" + precision + "' is unknown: use fp32, tf32, bf16 or fp16");
    if (real != "yes" && real != "no") r.fail("real_data", "must be yes or no (got '" + real + "')");
  }
  const SectionReader comm(f, f.find("comm"), {"configurations", "cpu_configurations", "min_bytes", "max_bytes", "factor", "iters", "warmup", "time", "ops"});
  m.comm.configurations = read_configurations(comm, "configurations", 'g', "");
  m.comm.cpu_configurations = read_configurations(comm, "cpu_configurations", 'r', "");
  static const std::regex size_re("[1-9][0-9]{0,8}[KMG]?");
  for (const char* key : {"min_bytes", "max_bytes"}) {
    std::string& v = std::string(key) == "min_bytes" ? m.comm.min_bytes : m.comm.max_bytes;
    v = comm.str(key, v);
    if (!std::regex_match(v, size_re)) comm.fail(key, "'" + v + "' is not a message size such as 8, 64K, 32M or 1G (dlperf-comm -b/-e)");
  }
  // What dlperf-comm would refuse when the job ran, refused now: at least one float, an
  // ascending range, and no more than any node holds (the job's buffers are a few times this).
  const auto bytes = [](const std::string& v) {
    const char unit = v.back();
    const double scale = unit == 'K' ? 1024.0 : unit == 'M' ? 1048576.0 : unit == 'G' ? 1073741824.0 : 1.0;
    return std::stod(unit >= '0' && unit <= '9' ? v : v.substr(0, v.size() - 1)) * scale;
  };
  if (bytes(m.comm.min_bytes) < 4) comm.fail("min_bytes", "'" + m.comm.min_bytes + "' is less than one float (4 bytes), what dlperf-comm measures");
  if (bytes(m.comm.max_bytes) < bytes(m.comm.min_bytes))
    comm.fail("max_bytes", "'" + m.comm.max_bytes + "' is less than min_bytes '" + m.comm.min_bytes + "'");
  if (bytes(m.comm.max_bytes) > 64.0 * 1073741824.0) comm.fail("max_bytes", "'" + m.comm.max_bytes + "' is more than 64G");
  // One rank in all crosses no link: its job could only ever end in status NO_PEERS.
  for (const auto* list : {&m.comm.configurations, &m.comm.cpu_configurations})
    for (const auto& c : *list)
      if (c.nodes * c.per_node < 2)
        comm.fail(list == &m.comm.configurations ? "configurations" : "cpu_configurations",
                  "'" + c.tag() + "' is one rank: it crosses no link (a fabric-health job needs 2 or more)");
  m.comm.factor = comm.integer("factor", m.comm.factor, 2, 1024);
  m.comm.iters = comm.integer("iters", m.comm.iters, 1, 100000);
  m.comm.warmup = comm.integer("warmup", m.comm.warmup, 0, 100000);
  m.comm.time = comm.time("time", m.comm.time);
  if (m.comm.time.empty()) comm.fail("time", "must be a Slurm time limit such as 00:15:00");
  if (comm.has("ops")) {
    const std::vector<std::string> known = m.comm.ops;
    m.comm.ops = comm.list("ops", "");
    if (m.comm.ops.empty()) comm.fail("ops", "is empty: name one or more of allreduce, reduce_scatter, all_gather");
    for (const auto& op : m.comm.ops) {
      if (std::find(known.begin(), known.end(), op) == known.end())
        comm.fail("ops", "'" + op + "' is not a collective dlperf-comm measures: allreduce, reduce_scatter or all_gather");
      if (std::count(m.comm.ops.begin(), m.comm.ops.end(), op) > 1) comm.fail("ops", "names '" + op + "' twice");
    }
  }
  if (std::all_of(m.models.begin(), m.models.end(), [](const ModelSettings& s) { return s.configurations.empty() && s.cpu_configurations.empty(); }))
    mx.fail("configurations", "and cpu_configurations are both empty: nothing to generate");
  return m;
}

std::vector<JobSpec> expand_jobs(const Profile& p, const Matrix& m) {
  std::vector<JobSpec> jobs;
  for (Backend b : {Backend::cuda, Backend::cpu}) {
    const bool gpu = b == Backend::cuda;
    for (const auto& model : m.models)
      for (bool real : {false, true})
      for (const auto& c : gpu ? model.configurations : model.cpu_configurations) {
        if (real && !model.real_data) continue;
        JobSpec j;
        j.real_data = real;
        j.name = model.name + (real ? "_data" : "") + (gpu ? "_" : "_cpu_") + c.tag();
        j.model = &model;
        j.config = c;
        j.slurm = gpu ? p.gpu : p.cpu;
        const std::string& t = gpu ? model.time : model.cpu_time;
        if (!t.empty()) j.slurm.time = t;
        j.precision = gpu ? (model.precision.empty() ? m.precision : model.precision) : m.cpu_precision;
        j.batch_per_device = gpu ? model.batch_per_device : model.cpu_batch_per_device;
        j.repeats = m.repeats;
        j.iterations = m.iterations;
        j.warmup = m.warmup;
        j.extra_args = m.extra_args;
        const auto& own = gpu ? model.extra_args : model.cpu_extra_args;
        j.extra_args.insert(j.extra_args.end(), own.begin(), own.end());
        if (p.signal_seconds >= parse_slurm_time(j.slurm.time))
          throw_bad_input(p.source + ": signal_seconds " + std::to_string(p.signal_seconds) + " is not less than the time limit " + j.slurm.time +
                          " of " + j.name + ": lower [slurm] signal_seconds or raise the time limit");
        jobs.push_back(std::move(j));
      }
  }
  return jobs;
}

std::vector<CommJob> expand_comm_jobs(const Profile& p, const Matrix& m) {
  std::vector<CommJob> jobs;
  std::vector<Configuration> all = m.comm.configurations;
  all.insert(all.end(), m.comm.cpu_configurations.begin(), m.comm.cpu_configurations.end());
  for (const auto& c : all) {
    const bool gpu = c.backend == Backend::cuda;
    CommJob j{(gpu ? "comm_" : "comm_cpu_") + c.tag(), c, gpu ? p.gpu : p.cpu};
    j.slurm.time = m.comm.time;
    if (p.signal_seconds >= parse_slurm_time(j.slurm.time))
      throw_bad_input(m.source + ": [comm] time " + j.slurm.time + " is not above the profile's signal_seconds " +
                      std::to_string(p.signal_seconds) + ": raise it");
    jobs.push_back(std::move(j));
  }
  return jobs;
}

std::vector<std::string> profile_notes(const Profile& p, const std::vector<JobSpec>& jobs) {
  std::vector<std::string> notes;
  size_t cpu_jobs = 0;
  for (const auto& j : jobs) cpu_jobs += j.config.backend == Backend::cpu ? 1 : 0;
  if (cpu_jobs > 0 && !p.has_cpu_section)
    notes.push_back("the profile has no [cpu] section: its " + std::to_string(cpu_jobs) + " CPU-backend job(s) take [slurm]'s settings" +
                    (p.gpu.partition.empty() ? std::string() : " (partition " + p.gpu.partition + ")") +
                    ", less the GPU options: add [cpu] with the CPU nodes' partition, or drop cpu_configurations from the matrix");
  return notes;
}

}  // namespace dlperf::jobs
