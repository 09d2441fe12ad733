// --ops and --timeline (see step_reports.h).
#include "step_reports.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "core/error.h"

namespace dlperf::analysis {
namespace {

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}
std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

// Mean wall time of the profiled iterations on the profiled rank, ms (0 when unknown).
double profiled_step_ms(const RunRecord& r) {
  const OpProfile& p = r.ops;
  if (p.rank < 0 || static_cast<size_t>(p.rank) >= r.ranks.size()) return 0.0;
  const auto& its = r.ranks[static_cast<size_t>(p.rank)].iterations;
  double sum = 0;
  int64_t n = 0;
  for (int64_t i = p.first_iteration; i < p.first_iteration + p.steps && i < static_cast<int64_t>(its.size()); ++i, ++n)
    sum += its[static_cast<size_t>(i)].end - its[static_cast<size_t>(i)].start;
  return n > 0 ? 1e3 * sum / static_cast<double>(n) : 0.0;
}

std::string run_title(const RunRecord& r) {
  const RunInfo& i = r.info;
  std::string t = i.model + " " + i.precision + " batch " + std::to_string(i.batch_per_device) + " " + i.backend;
  if (!i.gpu_model.empty()) t += " (" + i.gpu_model + ")";
  return t;
}

}  // namespace

void write_ops_report(std::ostream& out, const std::vector<RunRecord>& runs, const OpsOptions& opt) {
  bool any = false;
  for (const RunRecord& r : runs) {
    const OpProfile& p = r.ops;
    if (p.steps <= 0 || p.rows.empty()) continue;
    any = true;
    const double step = profiled_step_ms(r);
    std::vector<size_t> order(p.rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto total = [&](size_t i) { return p.rows[i].forward_ms + p.rows[i].backward_ms; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return total(a) > total(b); });
    double ops = 0;
    for (size_t i = 0; i < order.size(); ++i) ops += total(i);
    // The profile times each op; the run's kernel records (Backend::planned_kernels) say what
    // the library chose to run it with. One table joins them by op name, so a slow op shows
    // whether it runs a reference kernel or misses the tensor cores.
    std::map<std::string, std::string> impls;  // op -> its distinct implementations, in plan order
    for (const KernelRecord& k : r.kernels) {
      std::string& v = impls[k.op];
      if (("; " + v + ";").find("; " + k.impl + ";") == std::string::npos) v += (v.empty() ? "" : "; ") + k.impl;
    }
    const auto kernels_of = [&](const std::string& op) {
      auto it = impls.find(op);
      return it == impls.end() ? std::string() : it->second;
    };
    out << "\n## Per-op profile: " << run_title(r) << " (" << r.location << ")\n\n"
        << "rank " << p.rank << ", " << p.steps << " iterations from " << p.first_iteration << "; step " << ms(step) << " ms, ops "
        << ms(ops) << " ms (" << (step > 0 ? percent(ops / step) : std::string("?")) << " of the step)\n\n"
        << "| op | kind | input | forward ms | backward ms | total ms | share of step | calls | kernels |\n"
        << "|---|---|---|---:|---:|---:|---:|---:|---|\n";
    const size_t shown = std::min(order.size(), static_cast<size_t>(std::max(opt.top, 1)));
    for (size_t k = 0; k < shown; ++k) {
      const OpProfileRow& row = p.rows[order[k]];
      out << "| " << row.name << " | " << row.kind << " | " << row.shape << " | " << ms(row.forward_ms) << " | " << ms(row.backward_ms)
          << " | " << ms(total(order[k])) << " | " << (step > 0 ? percent(total(order[k]) / step) : "?") << " | " << row.calls << " | "
          << kernels_of(row.name) << " |\n";
    }
    if (shown < order.size()) {
      double rest = 0;
      for (size_t k = shown; k < order.size(); ++k) rest += total(order[k]);
      out << "| (" << order.size() - shown << " more ops) | | | | | " << ms(rest) << " | " << (step > 0 ? percent(rest / step) : "?")
          << " | | |\n";
    }
    std::map<std::string, std::pair<double, int>> kinds;  // total ms, ops
    for (size_t i = 0; i < p.rows.size(); ++i) {
      auto& k = kinds[p.rows[i].kind];
      k.first += total(i);
      k.second += 1;
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> by_kind(kinds.begin(), kinds.end());
    std::stable_sort(by_kind.begin(), by_kind.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    out << "\n| kind | ops | total ms | share of step |\n|---|---:|---:|---:|\n";
    for (const auto& [kind, v] : by_kind)
      out << "| " << kind << " | " << v.second << " | " << ms(v.first) << " | " << (step > 0 ? percent(v.first / step) : "?") << " |\n";
  }
  if (!any) throw_usage_error("--ops: no run in the inputs has a per-op profile (run dlperf-train with --profile-ops N)");
}

void parse_step_range(const std::string& text, TimelineOptions& opt) {
  const auto bad = [&] { throw_usage_error("--timeline-steps takes A-B or A (iterations, from 0), got '" + text + "'"); };
  try {
    size_t used = 0;
    opt.first = std::stoll(text, &used);
    opt.last = opt.first;
    if (used < text.size()) {
      if (text[used] != '-') bad();
      const std::string rest = text.substr(used + 1);
      size_t used2 = 0;
      opt.last = std::stoll(rest, &used2);
      if (used2 != rest.size()) bad();
    }
  } catch (const std::logic_error&) {
    bad();
  }
  if (opt.first < 0 || opt.last < opt.first) bad();
}

void write_timeline(std::ostream& out, const std::vector<RunRecord>& runs, const TimelineOptions& opt) {
  if (runs.empty()) throw_usage_error("--timeline: no runs in the inputs");
  const RunRecord* run = &runs.back();
  if (!opt.run.empty()) {
    run = nullptr;
    for (const RunRecord& r : runs) {
      const auto slash = r.location.rfind('/');
      const std::string name = slash == std::string::npos ? r.location : r.location.substr(slash + 1);
      if (r.location == opt.run || name == opt.run) run = &r;
    }
    if (!run) throw_usage_error("--timeline-run " + opt.run + ": no such run in the inputs");
  }
  if (opt.rank < 0 || static_cast<size_t>(opt.rank) >= run->ranks.size())
    throw_usage_error("--timeline-rank " + std::to_string(opt.rank) + ": " + run->location + " has " + std::to_string(run->ranks.size()) +
                      " rank(s)");
  const auto& its = run->ranks[static_cast<size_t>(opt.rank)].iterations;
  if (its.empty()) throw_usage_error("--timeline: rank " + std::to_string(opt.rank) + " of " + run->location + " measured no iteration");
  const auto n = static_cast<int64_t>(its.size());
  int64_t first = opt.first, last = opt.last;
  const bool profiled = run->ops.steps > 0 && run->ops.rank == opt.rank;
  if (first < 0) {
    first = profiled ? run->ops.first_iteration : std::max<int64_t>(0, n - 5);
    last = profiled ? run->ops.first_iteration + run->ops.steps - 1 : n - 1;
  }
  if (first >= n) throw_usage_error("--timeline-steps: rank " + std::to_string(opt.rank) + " has iterations 0-" + std::to_string(n - 1));
  last = std::min(last, n - 1);

  using nlohmann::json;
  const double t0 = its[static_cast<size_t>(first)].start;
  const auto us = [t0](double s) { return (s - t0) * 1e6; };
  const int pid = opt.rank;
  json events = json::array();
  const auto meta = [&](const char* what, int tid, const std::string& name) {
    json m = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
    if (tid >= 0) m["tid"] = tid;
    events.push_back(m);
  };
  enum Track { kSteps = 0, kPhases = 1, kOps = 2, kAllreduce = 3 };
  const std::string host = run->ranks[static_cast<size_t>(opt.rank)].host;
  meta("process_name", -1, "rank " + std::to_string(opt.rank) + (host.empty() ? "" : " (" + host + ")"));
  meta("thread_name", kSteps, "iterations");
  meta("thread_name", kPhases, "phases");
  meta("thread_name", kOps, "ops (forward, backward)");
  // Buckets overlap one another (one starts as soon as backward finishes it, while earlier
  // ones are in flight), and Perfetto draws X slices on one track only when each lies inside
  // or wholly after the one before: each bucket goes on the first allreduce lane free at its
  // start (greedy interval partitioning: as few lanes as buckets ever in flight at once).
  std::vector<std::vector<int>> lane_of(static_cast<size_t>(last - first + 1));  // [iteration][bucket]
  std::vector<double> lane_end;  // per lane: end of its last bucket
  {
    struct Ref {
      double start, end;
      size_t it, b;
    };
    std::vector<Ref> all;
    for (int64_t i = first; i <= last; ++i) {
      const auto& bs = its[static_cast<size_t>(i)].buckets;
      lane_of[static_cast<size_t>(i - first)].assign(bs.size(), 0);
      for (size_t b = 0; b < bs.size(); ++b) all.push_back({bs[b].start, std::max(bs[b].start, bs[b].end), static_cast<size_t>(i - first), b});
    }
    std::stable_sort(all.begin(), all.end(), [](const Ref& a, const Ref& b) { return a.start < b.start; });
    for (const Ref& r : all) {
      size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > r.start) ++lane;
      if (lane == lane_end.size()) lane_end.push_back(r.end);
      lane_end[lane] = r.end;
      lane_of[r.it][r.b] = static_cast<int>(lane);
    }
  }
  for (size_t lane = 0; lane < std::max<size_t>(1, lane_end.size()); ++lane)
    meta("thread_name", kAllreduce + static_cast<int>(lane),
         lane == 0 ? std::string("gradient allreduce") : "gradient allreduce (in flight together, " + std::to_string(lane + 1) + ")");
  const auto span = [&](const std::string& name, const char* cat, int tid, double start, double end, json args) {
    json e = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"ts", us(start)}, {"dur", std::max(0.0, (end - start) * 1e6)},
              {"pid", pid}, {"tid", tid}};
    if (!args.empty()) e["args"] = std::move(args);
    events.push_back(std::move(e));
  };
  for (int64_t i = first; i <= last; ++i) {
    const IterationTiming& it = its[static_cast<size_t>(i)];
    span("iteration " + std::to_string(i), "iteration", kSteps, it.start, it.end,
         {{"loss", it.loss}, {"loss_scale", it.loss_scale}, {"skipped", it.skipped}});
    // The phases follow each other in their order (trainer.h), from the iteration's start;
    // clamped to its end, as float durations can sum past it and a slice reaching into the
    // next iteration's first phase would overlap it on the track.
    double at = it.start;
    for (int p = 0; p < kPhaseCount; ++p) {
      const double d = it.phase_seconds[p];
      const double begin = std::min(at, it.end), end = std::min(at + d, it.end);
      if (d > 0) span(to_string(static_cast<Phase>(p)), "phase", kPhases, begin, end, {});
      at += d;
    }
    for (size_t b = 0; b < it.buckets.size(); ++b)
      span("bucket " + std::to_string(b), "allreduce", kAllreduce + lane_of[static_cast<size_t>(i - first)][b], it.buckets[b].start,
           it.buckets[b].end, {{"iteration", i}});
  }
  if (profiled)
    for (const OpEvent& e : run->ops.events) {
      if (e.iteration < first || e.iteration > last) continue;
      const OpProfileRow& row = run->ops.rows.at(static_cast<size_t>(e.op));
      span(row.name, row.kind.c_str(), kOps, e.start, e.end, {{"input", row.shape}, {"iteration", e.iteration}});
    }
  json doc = {{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData",
               {{"run", run->location},
                {"title", run_title(*run)},
                {"rank", opt.rank},
                {"iterations", std::to_string(first) + "-" + std::to_string(last)},
                {"time_zero_s", t0}}}};
  out << doc.dump(1) << '\n';
}

}  // namespace dlperf::analysis
