// The DLPerf measurement method (see reduce.h for the definitions and their sources).
#include "reduce.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "comparable.h"

namespace dlperf::analysis {
namespace {

double compute_seconds(const IterationTiming& it) {
  // Everything but exposed communication: a rank that computes slowly makes the others wait
  // in allreduce, so in lockstep training only its compute time shows who is slow.
  double s = 0;
  for (int p = 0; p < kPhaseCount; ++p)
    if (p != static_cast<int>(Phase::comm_exposed)) s += it.phase_seconds[p];
  return s;
}

void find_stragglers(const RunRecord& run, const RunWindow& w, const MethodOptions& opt, std::vector<Straggler>& out) {
  const size_t R = run.ranks.size();
  if (R < 3) return;  // a median of two says nothing about which one is slow
  const auto first = static_cast<size_t>(w.warmup), last = static_cast<size_t>(w.warmup + w.window);
  std::vector<int64_t> slow_count(R, 0);
  std::vector<double> excess(R, 0), compute(R), sorted(R);
  for (size_t i = first; i < last; ++i) {
    for (size_t r = 0; r < R; ++r) compute[r] = compute_seconds(run.ranks[r].iterations[i]);
    sorted = compute;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(R / 2), sorted.end());
    const double median = sorted[R / 2];
    if (median <= 0) continue;
    for (size_t r = 0; r < R; ++r) {
      excess[r] += compute[r] / median - 1;
      if (compute[r] > median * (1 + opt.straggler_threshold)) ++slow_count[r];
    }
  }
  const double n = static_cast<double>(last - first);
  for (size_t r = 0; r < R; ++r) {
    const double fraction = static_cast<double>(slow_count[r]) / n;
    if (fraction >= 0.5)  // persistently: in at least half of the measured iterations
      out.push_back({run.location, static_cast<int64_t>(r), run.ranks[r].host, fraction, excess[r] / n});
  }
}

void add_phases(const RunRecord& run, const RunWindow& w, PhaseBreakdown& sum, double& count) {
  for (const auto& rank : run.ranks)
    for (int64_t i = w.warmup; i < w.warmup + w.window; ++i) {
      const IterationTiming& it = rank.iterations[static_cast<size_t>(i)];
      sum.step_seconds += it.end - it.start;
      for (int p = 0; p < kPhaseCount; ++p) sum.phase_seconds[p] += it.phase_seconds[p];
      sum.comm_seconds += it.comm_seconds;
      count += 1;
    }
}

// dlperf-train settings that change neither the work of an iteration nor its speed (the
// run's bookkeeping; iterations and warm-up, which --warmup/--window cut), and those the key
// holds in its own fields.
constexpr const char* kNotWork[] = {"model",  "backend",      "precision",   "batch-size", "variant",
                                    "output", "repeat-index", "print-every", "flush-every", "timeout",
                                    "lock-timeout", "iterations", "warmup", "seed", "max-loss-growth",
                                    "help", "version"};

bool is_work_setting(const std::string& name) {
  for (const char* n : kNotWork)
    if (name == n) return false;
  return true;
}

// A label part: the value with blanks and separators made safe for a CSV field and a file name.
std::string label_value(const std::string& v) {
  std::string out;
  for (char ch : v) out += (std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("._+-/", ch)) ? ch : '-';
  return out.empty() ? "none" : out;
}

// Fills shown/label/title: within each family of configurations that share model, precision,
// backend, variant and batch, the details whose values differ.
void name_configs(std::vector<ConfigResult>& configs) {
  const auto family = [](const ConfigKey& k) { return std::tie(k.model, k.precision, k.backend, k.variant, k.batch_per_device); };
  for (auto& c : configs) {
    std::map<std::string, std::set<std::string>> values;  // detail -> values seen in the family
    size_t members = 0;
    for (const auto& o : configs)
      if (family(o.key) == family(c.key)) {
        ++members;
        for (const auto& [name, v] : o.key.details) values[name].insert(v);
      }
    c.shown.clear();
    c.nonstandard = nonstandard_settings(c.key);
    for (const auto& [name, seen] : values) {
      const auto it = c.key.details.find(name);
      if (it == c.key.details.end()) continue;  // not recorded here (an older trace): nothing to show
      // Differs when two members have different values, or one lacks it.
      size_t holders = 0;
      for (const auto& o : configs)
        if (family(o.key) == family(c.key) && o.key.details.count(name)) ++holders;
      const bool differs = members > 1 && (seen.size() > 1 || holders != members);
      bool nonstandard = false;
      for (const auto& n : c.nonstandard) nonstandard = nonstandard || n.first == name;
      if (differs || nonstandard) c.shown.emplace_back(name, it->second);
    }
    c.label = c.key.label();
    c.title = c.key.title();
    for (const auto& [name, v] : c.shown) {
      c.label += "_" + name + "=" + label_value(v);
      c.title += " · " + name + " " + v;
    }
  }
  // Folding (label_value) can give two configurations one label (older traces' data paths "run 1"
  // and "run-1"): the JSON would hold a key twice and the CSV two configurations under one name.
  // A later one gets the first free "_2", "_3", ...
  std::set<std::string> taken, originals;
  for (const auto& c : configs) originals.insert(c.label);
  for (auto& c : configs) {
    if (taken.count(c.label)) {
      int n = 2;
      while (taken.count(c.label + "_" + std::to_string(n)) || originals.count(c.label + "_" + std::to_string(n))) ++n;
      c.label += "_" + std::to_string(n);
      c.title += " · (" + std::to_string(n) + ")";
    }
    taken.insert(c.label);
  }
}

}  // namespace

ConfigKey config_key(const RunInfo& i) {
  ConfigKey k{i.model, i.precision, i.backend, i.variant, i.batch_per_device, {}};
  auto& d = k.details;
  const auto count = [&](const char* name, int64_t v) {
    if (v > 0) d.emplace(name, std::to_string(v));
  };
  const auto text = [&](const std::string& name, const std::string& v) {
    if (!v.empty()) d.emplace(name, v);
  };
  // The explicit attributes first: their canonical values win over a setting of the same name.
  count("image-size", i.image_size);
  count("seq-len", i.seq_len);
  count("max-predictions", i.max_predictions);
  count("num-classes", i.num_classes);
  text("optimizer", i.optimizer);
  text("data", i.data_source);
  count("parameters", i.parameter_count);
  for (const auto& s : i.settings) {
    const auto eq = s.find('=');
    const std::string name = s.substr(0, eq);
    if (!is_work_setting(name)) continue;
    const std::string value = eq == std::string::npos ? "" : s.substr(eq + 1);
    // "data" is the layout above (folder, tar, ...). What tells two datasets apart is their
    // fingerprint, the same for a copy staged per job under another path; files without one
    // (before it was recorded) have only the path.
    if (name == "data") {
      if (!i.data_fingerprint.empty())
        d.emplace("dataset", i.data_fingerprint);
      else if (!value.empty())
        d.emplace("data-path", value);
    } else {
      d.emplace(name, value);
    }
  }
  count("threads", i.threads_per_rank);
  text("cpu", i.cpu_model);
  text("cpu_isa", i.cpu_isa);  // the kernels oneDNN dispatches to (ONEDNN_MAX_CPU_ISA can lower it)
  text("gpu", i.gpu_model);
  for (const auto& [lib, v] : i.versions) text("version_" + lib, v);
  text("git_revision", i.git_revision);
  return k;
}

bool is_identity_detail(const std::string& name) {
  // threads: the launcher's CPUs per rank by default (srun -c), so it follows the machine.
  return name == "cpu" || name == "cpu_isa" || name == "gpu" || name.rfind("version_", 0) == 0 || name == "git_revision" ||
         name == "data-path" || name == "threads" || name == "loader-threads";
}

std::string point_name(const std::string& backend, int64_t nodes, int64_t devices_per_node) {
  return std::to_string(nodes) + "n" + std::to_string(devices_per_node) + (backend == "cpu" ? "r" : "g");
}

std::string ConfigKey::label() const {
  std::string s = model + "_" + precision + "_b" + std::to_string(batch_per_device) + "_" + backend;
  if (!variant.empty()) s += "_" + variant;
  return s;
}

std::string ConfigKey::title() const {
  std::string s = model + " · " + precision + " · batch " + std::to_string(batch_per_device) + "/device · " + backend;
  if (!variant.empty()) s += " · " + variant;
  return s;
}

RunWindow run_window(const RunRecord& run, const MethodOptions& opt) {
  const RunInfo& i = run.info;
  // A run that recorded its plan (every trace dlperf-train writes) is measured by it: the
  // iterations after its own warm-up, up to its planned length.
  const bool recorded = i.iterations > 0 && i.warmup >= 0 && i.warmup < i.iterations;
  RunWindow w;
  w.warmup = opt.warmup.value_or(recorded ? i.warmup : kDefaultWarmup);
  w.window = opt.window.value_or(recorded ? i.iterations - w.warmup : kDefaultWindow);
  if (w.window < 1) w.window = 0;  // --warmup at or past the run's length: nothing to measure
  return w;
}

RunThroughput run_throughput(const RunRecord& run, const MethodOptions& opt) {
  RunThroughput out;
  const RunWindow w = run_window(run, opt);
  const int64_t need = w.warmup + w.window;
  if (run.ranks.empty()) {
    out.why_not = "no iterations recorded";
    return out;
  }
  if (w.window < 1) {
    out.why_not = "warm-up " + std::to_string(w.warmup) + " leaves no iteration of its " + std::to_string(run.info.iterations) + " to measure";
    return out;
  }
  for (const auto& rank : run.ranks)
    if (static_cast<int64_t>(rank.iterations.size()) < need) {
      out.why_not = "fewer than warm-up + window = " + std::to_string(need) + " iterations";
      return out;
    }
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& its = run.ranks[r].iterations;
    const double t0 = w.warmup > 0 ? its[static_cast<size_t>(w.warmup - 1)].end : its[0].start;
    const double t1 = its[static_cast<size_t>(need - 1)].end;
    if (t1 - t0 > out.window_seconds) {
      out.window_seconds = t1 - t0;
      out.slowest_rank = static_cast<int64_t>(r);
    }
  }
  if (!(out.window_seconds > 0)) {
    out.why_not = "window has no positive duration";
    return out;
  }
  const int64_t world = run.info.world_size > 0 ? run.info.world_size : static_cast<int64_t>(run.ranks.size());
  const double samples = static_cast<double>(w.window * run.samples_per_iteration_per_rank() * world);
  out.samples_per_s = samples / out.window_seconds;
  return out;
}

RepeatStats repeat_stats(std::vector<double> v) {
  RepeatStats s;
  s.runs = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
  s.min = v.front();
  s.max = v.back();
  if (n > 1 && s.mean > 0) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.cv = std::sqrt(ss / static_cast<double>(n - 1)) / s.mean;
  }
  return s;
}

namespace {

// What a measured run held, for finding runs that shared a machine: its wall-clock span
// (start_time_utc to end_time_utc, whole seconds) and, per host, the CPUs and GPUs its ranks
// were bound to (rank_binding: "cpus 0-7 (numa 0); gpu 0000:17:00.0 (numa 0); ...").
struct Footprint {
  std::string location;
  int64_t start = 0, end = 0;
  std::map<std::string, std::pair<std::set<int>, std::set<std::string>>> held;  // host -> cpus, gpus
};

std::optional<int64_t> utc_seconds(const std::string& iso) {
  std::tm t{};
  char z = 0;
  if (std::sscanf(iso.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec, &z) != 7 ||
      z != 'Z')
    return std::nullopt;
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&t));
}

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; empty on anything else.
std::set<int> cpu_set(const std::string& list) {
  std::set<int> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    int a = 0, b = 0;
    char dash = 0;
    if (std::sscanf(item.c_str(), "%d%c%d", &a, &dash, &b) == 3 && dash == '-' && a <= b && b - a < (1 << 16)) {
      for (int c = a; c <= b; ++c) out.insert(c);
    } else if (std::sscanf(item.c_str(), "%d", &a) == 1) {
      out.insert(a);
    } else {
      return {};
    }
  }
  return out;
}

std::optional<Footprint> footprint(const RunRecord& run) {
  const auto start = utc_seconds(run.info.start_time_utc), end = utc_seconds(run.info.end_time_utc);
  if (!start || !end || *end < *start) return std::nullopt;
  Footprint f{run.location, *start, *end, {}};
  for (const RankTrace& rank : run.ranks) {
    const std::string& b = rank.binding;
    if (rank.host.empty() || b.rfind("cpus ", 0) != 0) continue;  // not recorded (older files)
    auto& [cpus, gpus] = f.held[rank.host];
    const std::set<int> mine = cpu_set(b.substr(5, b.find(' ', 5) - 5));
    cpus.insert(mine.begin(), mine.end());
    if (const size_t g = b.find("; gpu "); g != std::string::npos) gpus.insert(b.substr(g + 6, b.find(' ', g + 6) - g - 6));
  }
  return f;
}

// What two footprints share on a host ("host h1 (cpus 0-1)"), "" when they never ran at the same
// time on the same CPUs or GPU. Start and end are whole seconds: an overlap of 2 s or more.
std::string shared_machine(const Footprint& a, const Footprint& b) {
  if (std::min(a.end, b.end) - std::max(a.start, b.start) < 2) return "";
  for (const auto& [host, held] : a.held) {
    const auto other = b.held.find(host);
    if (other == b.held.end()) continue;
    for (const std::string& g : held.second)
      if (other->second.second.count(g)) return "host " + host + " (gpu " + g + ")";
    // GPU runs on GPUs of their own: their ranks mostly wait on the GPU, and an unbound launch
    // lists every CPU of the node; not named for the CPUs alone.
    if (!held.second.empty() && !other->second.second.empty()) continue;
    std::vector<int> both;
    std::set_intersection(held.first.begin(), held.first.end(), other->second.first.begin(), other->second.first.end(),
                          std::back_inserter(both));
    if (!both.empty()) return "host " + host + " (" + std::to_string(both.size()) + " CPU(s), first " + std::to_string(both.front()) + ")";
  }
  return "";
}

void find_overlaps(std::vector<Footprint> runs, Reduction& out) {
  std::sort(runs.begin(), runs.end(), [](const Footprint& a, const Footprint& b) { return a.start < b.start; });
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = i + 1; j < runs.size() && runs[j].start < runs[i].end; ++j)
      if (const std::string where = shared_machine(runs[i], runs[j]); !where.empty())
        if (out.overlapping_pairs++ == 0) out.first_overlap = runs[i].location + " and " + runs[j].location + " on " + where;
}

}  // namespace

Reduction reduce_runs(const std::vector<RunRecord>& runs, const MethodOptions& opt) {
  struct Acc {
    ScalePoint point;
    PhaseBreakdown phase_sum;
    double phase_count = 0;
  };
  std::map<ConfigKey, std::map<std::pair<int64_t, int64_t>, Acc>> groups;  // key -> (devices, nodes)
  std::map<ConfigKey, std::pair<int64_t, std::string>> fallbacks;  // runs with a reference kernel, the first one
  std::map<ConfigKey, LlmFacts> llm;
  std::map<ConfigKey, std::pair<int64_t, double>> skipping;  // runs mostly skipping their update, the highest share
  std::vector<Footprint> footprints;                         // of the measured runs
  Reduction out;
  for (const RunRecord& run : runs) {
    const RunInfo& i = run.info;
    // Ranks per host: a point is nodes x devices per node, and the trace's devices per node is
    // rank 0's node's; 12 ranks as 4 + 8 would count as 2 x 4 = 8 devices.
    std::map<std::string, int64_t> per_host;
    for (const auto& h : i.hosts) ++per_host[h];
    bool uneven = i.world_size > 0 && i.nodes * i.devices_per_node != i.world_size;
    for (const auto& [host, n] : per_host) uneven = uneven || n != per_host.begin()->second;
    if (uneven) {
      if (out.excluded_uneven++ == 0) {
        out.first_uneven = run.location + " (" + std::to_string(i.world_size) + " ranks on " + std::to_string(per_host.size()) + " hosts:";
        for (const auto& [host, n] : per_host) out.first_uneven += " " + std::to_string(n);
        out.first_uneven += ")";
      }
      continue;
    }
    if (i.model_flops_per_token > 0) {
      LlmFacts& f = llm[config_key(i)];
      if (f.flops_per_token == 0) f = {i.seq_len, i.model_flops_per_token, 0, 0, ""};
    }
    Acc& acc = groups[config_key(i)][{i.nodes * i.devices_per_node, i.nodes}];
    acc.point.nodes = i.nodes;
    acc.point.devices_per_node = i.devices_per_node;
    const bool unfinished = i.status == RunStatus::partial || i.status == RunStatus::running;
    if (i.status == RunStatus::failed) {
      ++acc.point.excluded_failed;
      continue;
    }
    if (unfinished && !opt.include_partial) {
      ++acc.point.excluded_partial;
      continue;
    }
    RunThroughput t = run_throughput(run, opt);
    if (!t.samples_per_s) {
      ++acc.point.excluded_short;
      int64_t shortest = run.ranks.empty() ? 0 : INT64_MAX;
      for (const auto& rank : run.ranks) shortest = std::min<int64_t>(shortest, static_cast<int64_t>(rank.iterations.size()));
      if (shortest >= out.longest_short_run) {
        out.longest_short_run = shortest;
        const RunWindow w = run_window(run, opt);
        out.longest_short_need = w.warmup + w.window;
      }
      continue;
    }
    ++out.measured_runs;
    if (auto f = footprint(run)) footprints.push_back(std::move(*f));
    for (const KernelRecord& k : run.kernels)
      if (is_reference_kernel(k, i.precision)) {
        auto& [count, first] = fallbacks[config_key(i)];
        if (count++ == 0) first = k.op + " " + k.pass + " " + k.shape + " " + k.impl;
        break;
      }
    const RunWindow w = run_window(run, opt);
    out.windows.insert(w);
    acc.point.windows.insert(w);
    {
      int64_t skipped = 0;  // rank 0's record: every rank takes the same gated step
      for (int64_t k = w.warmup; k < w.warmup + w.window; ++k) skipped += run.ranks[0].iterations[static_cast<size_t>(k)].skipped ? 1 : 0;
      const double share = static_cast<double>(skipped) / static_cast<double>(w.window);
      if (share > kSkippedShare) {
        auto& [runs_skipping, most] = skipping[config_key(i)];
        ++runs_skipping;
        most = std::max(most, share);
      }
    }
    acc.point.throughputs.push_back(*t.samples_per_s);
    if (unfinished) ++acc.point.included_partial;
    if (i.model_flops_per_token > 0 && i.peak_tflops_per_device > 0) {  // 0: unknown, not a peak
      acc.point.peaks.push_back(i.peak_tflops_per_device);
      LlmFacts& f = llm[config_key(i)];
      f.peak_min = f.peak_min > 0 ? std::min(f.peak_min, i.peak_tflops_per_device) : i.peak_tflops_per_device;
      f.peak_max = std::max(f.peak_max, i.peak_tflops_per_device);
      if (f.peak_source.empty()) f.peak_source = i.peak_source;
    }
    if (!i.nccl_transport.empty()) acc.point.transports.insert(i.nccl_transport);
    add_phases(run, w, acc.phase_sum, acc.phase_count);
    ScalePoint& mem = acc.point;
    mem.memory_plan_bytes = std::max(mem.memory_plan_bytes, run.info.memory_plan_bytes);
    for (const RankTrace& rank : run.ranks) {
      mem.allocated_peak_bytes = std::max(mem.allocated_peak_bytes, rank.allocated_peak_bytes);
      mem.peak_memory_bytes = std::max(mem.peak_memory_bytes, rank.peak_memory_bytes);
      mem.device_peak_bytes = std::max(mem.device_peak_bytes, rank.device_memory_peak_bytes);
    }
    find_stragglers(run, w, opt, out.stragglers);
  }
  for (auto& [key, points] : groups) {
    ConfigResult cfg;
    cfg.key = key;
    if (auto f = fallbacks.find(key); f != fallbacks.end()) std::tie(cfg.runs_with_reference_kernels, cfg.reference_kernel) = f->second;
    if (const auto it = llm.find(key); it != llm.end()) cfg.llm = it->second;
    if (const auto it = skipping.find(key); it != skipping.end()) std::tie(cfg.runs_mostly_skipped, cfg.most_skipped) = it->second;
    for (auto& [where, acc] : points) {
      ScalePoint& p = acc.point;
      p.stats = repeat_stats(p.throughputs);
      p.peak_tflops = repeat_stats(p.peaks).median;
      if (acc.phase_count > 0) {
        p.phases.step_seconds = acc.phase_sum.step_seconds / acc.phase_count;
        for (int k = 0; k < kPhaseCount; ++k) p.phases.phase_seconds[k] = acc.phase_sum.phase_seconds[k] / acc.phase_count;
        p.phases.comm_seconds = acc.phase_sum.comm_seconds / acc.phase_count;
      }
      out.excluded_partial += p.excluded_partial;
      out.excluded_failed += p.excluded_failed;
      out.excluded_short += p.excluded_short;
      cfg.points.push_back(std::move(p));
    }
    const ScalePoint* base = nullptr;
    for (const auto& p : cfg.points)
      if (p.nodes == 1 && p.devices_per_node == 1 && p.stats.runs > 0) base = &p;
    cfg.has_single_device_baseline = base != nullptr;
    if (base)
      for (auto& p : cfg.points)
        if (p.stats.runs > 0) {
          p.speedup = p.stats.median / base->stats.median;
          p.efficiency = *p.speedup / static_cast<double>(p.devices());
        }
    out.configs.push_back(std::move(cfg));
  }
  name_configs(out.configs);
  find_overlaps(std::move(footprints), out);
  return out;
}

std::optional<LlmPoint> llm_point(const ConfigResult& c, const ScalePoint& p) {
  if (c.llm.flops_per_token <= 0 || p.stats.runs == 0) return std::nullopt;
  LlmPoint l;
  l.tokens_per_s = p.stats.median * static_cast<double>(c.llm.seq_len);
  l.tflops_per_device = l.tokens_per_s / static_cast<double>(p.devices()) * c.llm.flops_per_token / 1e12;
  if (p.peak_tflops > 0) l.mfu = l.tflops_per_device / p.peak_tflops;
  return l;
}

}  // namespace dlperf::analysis
