// Markdown report: per configuration, the DLPerf table (node_num | gpu_num |
// batch_size_per_device | samples/s | speedup | efficiency; rank_num for CPU-backend ranks),
// then repeat statistics and the phase breakdown; after all configurations, stragglers and
// notes on excluded runs.
#include <algorithm>
#include <ostream>
#include <set>

#include "comparable.h"
#include "format.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

void table_header(std::ostream& os, const std::vector<std::string>& cols) {
  os << '|';
  for (const auto& c : cols) os << ' ' << c << " |";
  os << "\n|";
  for (size_t i = 0; i < cols.size(); ++i) os << "---|";
  os << '\n';
}

// DLPerf's column name for the device count: GPUs, or ranks on the CPU backend.
std::string device_column(const ConfigResult& c) { return c.key.backend == "cpu" ? "rank_num" : "gpu_num"; }

std::string point_of(const ConfigResult& c, const ScalePoint& p) { return point_name(c.key.backend, p.nodes, p.devices_per_node); }

void main_table(std::ostream& os, const ConfigResult& c, const ReportOptions& opt, std::vector<std::string>& notes) {
  std::vector<std::string> cols = {"node_num", device_column(c), "batch_size_per_device", "samples/s", "speedup", "efficiency"};
  const bool reference = opt.reference && is_published_workload(c);
  if (opt.reference && !reference)
    notes.push_back("note: --reference: no published DLPerf figure beside " + c.label + ": not the published workload (" +
                    differences(c) + ")");
  if (reference) cols.insert(cols.end(), {"V100 samples/s (DLPerf)", "V100 speedup", "measured/V100"});
  const bool llm = c.llm.flops_per_token > 0;  // LLM runs: tokens/s and MFU too (docs/llm.md)
  if (llm) cols.insert(cols.end(), {"tokens/s", "TFLOP/s/device", "MFU"});
  table_header(os, cols);
  for (const auto& p : c.points) {
    if (p.stats.runs == 0) continue;
    // Above 100% is no scaling result: the 1-device runs were slowed (a warm-up left in the
    // window, another window) or the point was not the same work.
    if (p.efficiency && *p.efficiency > 1.05)
      notes.push_back("warning: superlinear " + c.label + " " + point_of(c, p) + ": scaling efficiency " + percent(*p.efficiency) +
                      " is above 100%: check the 1-device runs (warm-up, window) before reading it as a speedup");
    os << "| " << p.nodes << " | " << p.devices() << " | " << c.key.batch_per_device << " | " << rate(p.stats.median)
       << " | " << fixed_or(p.speedup, 2, "") << " | " << (p.efficiency ? percent(*p.efficiency) : "") << " |";
    if (reference) {
      auto ref = match_reference(*opt.reference, c.key, p.nodes, p.devices_per_node);
      if (ref) {
        std::string source = ref->system;
        if (ref->batch_per_device != c.key.batch_per_device)
          source += ref->batch_per_device ? ", bs " + std::to_string(ref->batch_per_device) : ", bs n/a";
        if (!ref->variant.empty()) source += ", " + ref->variant;
        os << ' ' << fixed(ref->samples_per_s, 2) << " (" << cell(source) << ") | " << fixed_or(ref->speedup, 2, "") << " | "
           << fixed(p.stats.median / ref->samples_per_s, 2) << " |";
      } else {
        os << "  |  |  |";
      }
    }
    if (const auto l = llm ? llm_point(c, p) : std::nullopt)
      os << ' ' << fixed(l->tokens_per_s, 1) << " | " << fixed(l->tflops_per_device, 3) << " | " << (l->mfu ? percent(*l->mfu, 2) : "")
         << " |";
    os << '\n';
  }
  std::string transports;
  for (const auto& p : c.points)
    if (p.stats.runs > 0 && !p.transports.empty()) {
      std::string t;
      for (const auto& v : p.transports) t += (t.empty() ? "" : " / ") + v;
      transports += (transports.empty() ? "" : "; ") + point_of(c, p) + " " + t;
    }
  if (!transports.empty()) os << "\nNCCL transport: " << transports << '\n';
  if (llm) {
    if (c.llm.peak_max > 0)
      os << "\nMFU = TFLOP/s/device / the peak per device the runs recorded: " << fixed(c.llm.peak_min, 3)
         << (c.llm.peak_max > c.llm.peak_min ? "-" + fixed(c.llm.peak_max, 3) : std::string()) << " TFLOP/s ("
         << (c.llm.peak_source.empty() ? "source not recorded" : c.llm.peak_source) << ")"
         << (c.llm.peak_max > c.llm.peak_min * 1.01 ? "; each point's MFU uses the median of its own runs' peaks" : "") << ".\n";
    for (const auto& p : c.points)
      if (const auto l = llm_point(c, p); l && l->mfu && *l->mfu > 1)
        notes.push_back("warning: " + c.label + " " + point_of(c, p) + ": MFU " + percent(*l->mfu, 2) +
                        " is above 100%: the recorded peak (" + fixed(p.peak_tflops, 3) +
                        " TFLOP/s per device) is below what the run computed; check dlperf-train --peak-tflops");
  }
}

void repeat_table(std::ostream& os, const ConfigResult& c, const ReportOptions& opt, std::vector<std::string>& notes) {
  table_header(os, {"node_num", device_column(c), "runs", "median", "mean", "min", "max", "cv", "excluded"});
  for (const auto& p : c.points) {
    const int excluded = p.excluded_partial + p.excluded_failed + p.excluded_short;
    os << "| " << p.nodes << " | " << p.devices() << " | " << p.stats.runs << " | ";
    if (p.stats.runs > 0)  // one run has no spread to show: n/a, not 0.00%
      os << rate(p.stats.median) << " | " << rate(p.stats.mean) << " | " << rate(p.stats.min) << " | " << rate(p.stats.max) << " | "
         << (p.stats.runs > 1 ? percent(p.stats.cv, 2) : "n/a");
    else
      os << " |  |  |  | ";
    os << " | " << excluded << " |\n";
    if (p.stats.runs > 1 && p.stats.cv > opt.cv_warning)
      notes.push_back("warning: noisy group " + c.label + " " + point_of(c, p) + ": coefficient of variation " +
                      percent(p.stats.cv, 2) + " over " + std::to_string(p.stats.runs) + " runs exceeds " +
                      percent(opt.cv_warning, 2));
    if (p.included_partial > 0)
      notes.push_back("note: " + c.label + " " + point_of(c, p) + ": " + std::to_string(p.included_partial) + " of its " +
                      std::to_string(p.stats.runs) + " measured run(s) stopped early (partial, --include-partial)" +
                      (p.nodes == 1 && p.devices_per_node == 1 ? ", and the speedups of its configuration are against them" : ""));
    if (p.stats.runs == 0)
      notes.push_back("warning: " + c.label + " " + point_of(c, p) + " has no measured run: " +
                      std::to_string(p.excluded_partial) + " partial or unfinished, " + std::to_string(p.excluded_failed) +
                      " failed, " + std::to_string(p.excluded_short) + " shorter than warm-up + window");
  }
}

void phase_table(std::ostream& os, const ConfigResult& c) {
  table_header(os, {"node_num", device_column(c), "step ms", "data", "forward", "backward", "comm exposed", "optimizer", "other",
                    "comm total ms", "comm hidden"});
  for (const auto& p : c.points) {
    if (p.stats.runs == 0) continue;
    const PhaseBreakdown& b = p.phases;
    double accounted = 0;
    os << "| " << p.nodes << " | " << p.devices() << " | " << fixed(1e3 * b.step_seconds, 2) << " |";
    for (int k = 0; k < kPhaseCount; ++k) {
      accounted += b.phase_seconds[k];
      os << ' ' << percent(b.step_seconds > 0 ? b.phase_seconds[k] / b.step_seconds : 0) << " |";
    }
    const double other = b.step_seconds > 0 ? (b.step_seconds - accounted) / b.step_seconds : 0;
    const double exposed = b.phase_seconds[static_cast<int>(Phase::comm_exposed)];
    // Hidden share: the part of allreduce time overlapped with backward (1 - exposed / total).
    const std::string hidden = b.comm_seconds > 0 ? percent(1 - exposed / b.comm_seconds) : "";
    os << ' ' << percent(other) << " | " << fixed(1e3 * b.comm_seconds, 2) << " | " << hidden << " |\n";
  }
}

// Memory per rank (issue 25): the plan against what was measured; only where a run recorded them.
void memory_table(std::ostream& os, const ConfigResult& c) {
  bool any = false, allocated = false, device = false;
  for (const auto& p : c.points) {
    if (p.stats.runs == 0) continue;
    any = any || p.memory_plan_bytes > 0 || p.peak_memory_bytes > 0;
    allocated = allocated || p.allocated_peak_bytes > 0;
    device = device || p.device_peak_bytes > 0;
  }
  if (!any) return;
  const auto mib = [](int64_t b) { return b > 0 ? fixed(static_cast<double>(b) / (1024.0 * 1024.0), 1) : std::string(); };
  os << "\nMemory per rank, MiB (the highest over runs and ranks; the plan is dlperf-train's before the first step):\n\n";
  std::vector<std::string> cols = {"node_num", device_column(c), "plan"};
  if (allocated) cols.insert(cols.end(), {"allocated peak", "plan / allocated"});
  cols.push_back(c.key.backend == "cpu" ? "resident peak" : "dlperf's device peak");
  if (device) cols.push_back("device peak (cudaMemGetInfo)");
  table_header(os, cols);
  for (const auto& p : c.points) {
    if (p.stats.runs == 0) continue;
    os << "| " << p.nodes << " | " << p.devices() << " | " << mib(p.memory_plan_bytes) << " |";
    if (allocated)
      os << ' ' << mib(p.allocated_peak_bytes) << " | "
         << (p.memory_plan_bytes > 0 && p.allocated_peak_bytes > 0
                 ? fixed(static_cast<double>(p.memory_plan_bytes) / static_cast<double>(p.allocated_peak_bytes), 3)
                 : std::string())
         << " |";
    os << ' ' << mib(p.peak_memory_bytes) << " |";
    if (device) os << ' ' << mib(p.device_peak_bytes) << " |";
    os << '\n';
  }
}

}  // namespace

void write_markdown(std::ostream& os, const Reduction& r, const MethodOptions& method, const ReportOptions& opt) {
  std::vector<std::string> notes;
  // The windows the runs were measured by: each run's own recorded warm-up and length unless
  // --warmup/--window set them (iterations counted from 1, as dlperf-train prints them).
  std::string windows;
  for (const RunWindow& w : r.windows)
    windows += (windows.empty() ? "" : ", ") + std::to_string(w.warmup + 1) + "-" + std::to_string(w.warmup + w.window);
  const bool overridden = method.warmup || method.window;
  os << "# dlperf results\n\nMethod: per run, samples in iterations " << (windows.empty() ? "?" : windows) << " ("
     << (overridden ? "set by --warmup/--window" : "each run's own recorded warm-up and length") << ")"
     << " / their wall time on the slowest rank; median over repeats; "
     << "speedup vs the median of 1 node x 1 device; efficiency = speedup / devices.\n";
  for (const auto& c : r.configs) {
    os << "\n## " << md_text(c.title) << "\n\n";
    // How the data parallelism ran (issue 25): the optimizer's sharding, where its all-gathers
    // were waited for, the accumulation and the recompute; the exposed communication is the
    // phase table's "comm exposed" column. Older traces lack some: their defaults.
    const auto detail = [&](const char* name, const char* otherwise) { return c.key.detail(name, otherwise); };
    if (!detail("zero", "").empty() || !detail("grad-accum", "").empty()) {
      const std::string zero = detail("zero", "0"), gather = detail("zero-gather", "step");
      os << "Data parallelism: zero stage " << zero;
      if (zero != "0") {
        os << (gather == "forward" ? " (all-gathers waited for in the next forward)" : " (all-gathers waited for at the step's end)");
        const bool one_device = std::any_of(c.points.begin(), c.points.end(), [](const ScalePoint& p) { return p.nodes * p.devices_per_node == 1; });
        if (one_device) os << "; its 1-device point shards nothing (one rank holds every shard)";
      }
      os << ", grad-accum " << detail("grad-accum", "1") << " micro-batch(es) per step (throughput counts every one), recompute "
         << detail("recompute", "none") << "\n\n";
    }
    main_table(os, c, opt, notes);
    os << "\nRepeats (samples/s):\n\n";
    repeat_table(os, c, opt, notes);
    os << "\nWhere the step time goes (measured window, mean over ranks and runs):\n\n";
    phase_table(os, c);
    memory_table(os, c);
    if (const std::string net = differences(c, true); !net.empty())
      notes.push_back("note: " + c.label + " trains a reduced network (" + net + "): its samples/s are not " + c.key.model +
                      "'s and compare only with runs of the same sizes");
    if (c.runs_with_reference_kernels > 0)
      notes.push_back("warning: " + c.label + ": " + std::to_string(c.runs_with_reference_kernels) +
                      " measured run(s) planned reference kernels (first: " + c.reference_kernel +
                      "): they measure a library's fallback, not the machine (dlperf-train --plan-only lists them)");
    if (c.runs_mostly_skipped > 0)
      notes.push_back("warning: " + c.label + ": " + std::to_string(c.runs_mostly_skipped) + " measured run(s) skipped the optimizer update in more than " +
                      percent(kSkippedShare, 0) + " of their measured iterations (up to " + percent(c.most_skipped) +
                      "; fp16 loss scaling found inf/nan gradients): a skipped step trains nothing, so their samples/s flatter the machine");
    // Runs measured over different windows (a --warmup 0 run beside a --warmup 20 one, a short
    // trial run) pooled into one median, or one point's runs against another's in a speedup.
    std::set<RunWindow> config_windows;
    std::string by_point;
    for (const auto& p : c.points) {
      if (p.windows.empty()) continue;
      config_windows.insert(p.windows.begin(), p.windows.end());
      by_point += (by_point.empty() ? "" : "; ") + point_of(c, p) + " iterations";
      std::string sep = " ";
      for (const RunWindow& w : p.windows) {
        by_point += sep + std::to_string(w.warmup + 1) + "-" + std::to_string(w.warmup + w.window);
        sep = ", ";
      }
    }
    if (config_windows.size() > 1)
      notes.push_back("warning: " + c.label + ": its runs were measured over different windows (" + by_point +
                      "): a median or speedup over them mixes warm-up with steady state or short runs with long ones; "
                      "dlperf-reduce --warmup N --window M measures every run alike");
    if (!c.has_single_device_baseline)
      notes.push_back("note: " + c.label + " has no complete 1 node x 1 device run; speedup and efficiency left empty");
  }
  // DLPerf's method takes the median of 5 to 7 repeats; fewer is still a figure, but a median of
  // one or two runs is not the method's, and the report says so once.
  std::string few;
  size_t few_points = 0;
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.stats.runs > 0 && p.stats.runs < kMethodRepeats) {
        if (++few_points <= 4) few += (few.empty() ? "" : ", ") + c.label + " " + point_of(c, p) + " (" + std::to_string(p.stats.runs) + ")";
      }
  if (few_points > 4) few += ", and " + std::to_string(few_points - 4) + " more";
  if (few_points > 0)
    notes.push_back("note: " + std::to_string(few_points) + " point(s) have fewer than " + std::to_string(kMethodRepeats) +
                    " measured runs, where DLPerf's method takes the median of 5-7 repeats: " + few);
  os << "\n## Stragglers\n\n";
  if (r.stragglers.empty()) {
    os << "No rank's compute time exceeded its iteration's median by more than "
       << percent(method.straggler_threshold) << " in half of the measured iterations.\n";
  } else {
    table_header(os, {"run", "rank", "host", "slow iterations", "mean excess compute"});
    for (const auto& s : r.stragglers)
      os << "| " << cell(s.run) << " | " << s.rank << " | " << cell(s.host) << " | " << percent(s.slow_fraction) << " | "
         << percent(s.excess) << " |\n";
  }
  if (r.overlapping_pairs > 0)
    notes.push_back("warning: " + std::to_string(r.overlapping_pairs) + " pair(s) of measured runs ran at the same time on the same CPUs or "
                    "GPU (first: " + r.first_overlap + "): they competed for them (and for the caches and memory bandwidth), so their "
                    "figures are suspect; run them one after the other or bind them apart");
  if (r.excluded_uneven > 0)
    notes.push_back("warning: " + std::to_string(r.excluded_uneven) + " run(s) left out: their nodes held different numbers of ranks, "
                    "which no nodes x devices point describes (first: " + r.first_uneven + ")");
  const int excluded = r.excluded_partial + r.excluded_failed + r.excluded_short;
  if (excluded > 0)
    notes.push_back("note: " + std::to_string(excluded) + " run(s) excluded: " + std::to_string(r.excluded_partial) +
                    " partial or unfinished, " + std::to_string(r.excluded_failed) + " failed, " +
                    std::to_string(r.excluded_short) + " shorter than warm-up + window");
  if (!notes.empty()) {
    os << "\n## Notes\n\n";
    for (const auto& n : notes) os << "- " << md_text(n) << '\n';
  }
}

}  // namespace dlperf::analysis
