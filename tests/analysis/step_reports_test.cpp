// dlperf-reduce --ops and --timeline on hand-made runs: the top-ops table's order, totals and
// shares of the step; the timeline is valid Chrome trace-event JSON whose spans are the run's
// phases (contiguous, in order, summing to each iteration), op calls and allreduce buckets;
// bad selections are usage errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "step_reports.h"

namespace dlperf::analysis {
namespace {

// Two ranks, four iterations of 10 ms each (phases 1, 3, 4, 0.5, 1.5 ms), two buckets per
// iteration on rank 1, a profile of iterations 1-2 on rank 0.
RunRecord profiled_run() {
  RunRecord r;
  r.info.model = "resnet50";
  r.info.precision = "fp32";
  r.info.backend = "cpu";
  r.info.batch_per_device = 8;
  r.location = "results.h5:/runs/run_000002";
  for (int k = 0; k < 2; ++k) {
    RankTrace rank;
    rank.host = "node" + std::to_string(k);
    for (int i = 0; i < 4; ++i) {
      IterationTiming it;
      it.start = 100.0 + 0.010 * i;
      it.end = it.start + 0.010;
      const float phases[kPhaseCount] = {0.001f, 0.003f, 0.004f, 0.0005f, 0.0015f};
      std::copy(phases, phases + kPhaseCount, it.phase_seconds);
      it.loss = 2.0f - 0.1f * static_cast<float>(i);
      if (k == 1) it.buckets = {{it.start + 0.005, it.start + 0.006}, {it.start + 0.007, it.start + 0.0085}};
      rank.iterations.push_back(it);
    }
    r.ranks.push_back(rank);
  }
  OpProfile& p = r.ops;
  p.rank = 0;
  p.first_iteration = 1;
  p.steps = 2;
  p.rows = {{"conv1", "conv2d", "(8, 3, 32, 32) f32", 2.0, 3.0, 2},
            {"bn1", "batch_norm", "(8, 8, 16, 16) f32", 0.5, 0.5, 2},
            {"fc", "linear", "(8, 64) f32", 0.25, 0.25, 2},
            {"add#0", "add", "(8, 8, 8, 8) f32", 0.0, 1.0, 1}};
  for (int i = 1; i <= 2; ++i) {
    const double t = 100.0 + 0.010 * i + 0.001;
    p.events.push_back({0, i, t, t + 0.002});
    p.events.push_back({1, i, t + 0.002, t + 0.0025});
  }
  return r;
}

TEST(OpsReport, TopOpsWithShareOfTheStep) {
  std::ostringstream out;
  write_ops_report(out, {profiled_run()}, OpsOptions{2});
  const std::string s = out.str();
  // step 10 ms; ops 5 + 1 + 0.5 + 1 = 7.5 ms
  EXPECT_NE(s.find("step 10.000 ms, ops 7.500 ms (75.0% of the step)"), std::string::npos) << s;
  const auto conv = s.find("| conv1 | conv2d |"), bn = s.find("| bn1 |"), more = s.find("(2 more ops)");
  ASSERT_NE(conv, std::string::npos) << s;
  EXPECT_NE(s.find("| 2.000 | 3.000 | 5.000 | 50.0% | 2 |"), std::string::npos) << s;
  // the top two by total are conv1 (5 ms) then bn1 or add#0 (1 ms each, stable: bn1 first)
  ASSERT_NE(bn, std::string::npos);
  EXPECT_LT(conv, bn);
  ASSERT_NE(more, std::string::npos);
  EXPECT_NE(s.find("| (2 more ops) | | | | | 1.500 | 15.0% | |"), std::string::npos) << s;
  EXPECT_NE(s.find("| conv2d | 1 | 5.000 | 50.0% |"), std::string::npos) << s;
}

// The profile and the run's kernel records are one view: each op's row names what the library
// chose to run it with (distinct implementations over its passes, in plan order).
TEST(OpsReport, RowsNameThePlannedKernels) {
  RunRecord r = profiled_run();
  r.kernels = {{"conv1", "forward", "(2, 3, 8, 8) f32", "brgconv:avx512_core"},
               {"conv1", "backward_data", "(2, 3, 8, 8) f32", "ref:any"},
               {"conv1", "backward_weights", "(2, 3, 8, 8) f32", "brgconv:avx512_core"}};
  std::ostringstream out;
  write_ops_report(out, {r}, OpsOptions{2});
  const std::string s = out.str();
  EXPECT_NE(s.find("| 50.0% | 2 | brgconv:avx512_core; ref:any |"), std::string::npos) << s;
  EXPECT_NE(s.find("| bn1 |"), std::string::npos) << s;
}

TEST(OpsReport, NoProfileIsAUsageError) {
  RunRecord r = profiled_run();
  r.ops = {};
  std::ostringstream out;
  try {
    write_ops_report(out, {r}, {});
    FAIL() << "expected a usage error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_NE(std::string(e.what()).find("--profile-ops"), std::string::npos);
  }
}

nlohmann::json timeline(const RunRecord& r, TimelineOptions opt) {
  std::ostringstream out;
  write_timeline(out, {r}, opt);
  return nlohmann::json::parse(out.str());
}

TEST(Timeline, DefaultsToTheProfiledIterationsOfRankZero) {
  const auto doc = timeline(profiled_run(), {});
  ASSERT_TRUE(doc.contains("traceEvents"));
  int iterations = 0, phases = 0, ops = 0, buckets = 0;
  double last_phase_end = -1;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") continue;
    ASSERT_EQ(e["ph"], "X");
    ASSERT_GE(e["dur"].get<double>(), 0.0);
    const std::string cat = e["cat"];
    if (cat == "iteration") ++iterations;
    if (cat == "phase") {
      ++phases;
      const double ts = e["ts"];
      if (last_phase_end >= 0 && e["name"] != "data") {
        EXPECT_NEAR(ts, last_phase_end, 1e-6) << "phases are contiguous";
      }
      last_phase_end = ts + e["dur"].get<double>();
    }
    if (cat == "conv2d" || cat == "batch_norm") ++ops;
    if (cat == "allreduce") ++buckets;
  }
  EXPECT_EQ(iterations, 2);  // the profiled 1-2
  EXPECT_EQ(phases, 10);
  EXPECT_EQ(ops, 4);
  EXPECT_EQ(buckets, 0);  // rank 0 exchanged nothing in this run
  EXPECT_EQ(doc["otherData"]["iterations"], "1-2");
  // times in microseconds from the first iteration shown: the first op call at 1000 us
  bool found = false;
  for (const auto& e : doc["traceEvents"])
    if (e.value("name", "") == "conv1" && e["args"]["iteration"] == 1) {
      EXPECT_NEAR(e["ts"].get<double>(), 1000.0, 1e-6);
      EXPECT_NEAR(e["dur"].get<double>(), 2000.0, 1e-6);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(Timeline, AnotherRankShowsItsBuckets) {
  TimelineOptions opt;
  opt.rank = 1;
  parse_step_range("0-3", opt);
  const auto doc = timeline(profiled_run(), opt);
  int buckets = 0, ops = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "allreduce") {
      ++buckets;
      EXPECT_GT(e["dur"].get<double>(), 900.0);
    }
    ops += e["cat"] == "conv2d";
  }
  EXPECT_EQ(buckets, 8);
  EXPECT_EQ(ops, 0);  // the profile is rank 0's
}

// The trace-event format's rules as Perfetto applies them (issue 27 item 6): every event has
// name, ph, pid, tid, and ts (metadata aside); 'X' slices have a non-negative dur; on one
// (pid, tid) track, each slice lies wholly inside the open one or starts after it ends
// (overlapping slices on one track are dropped or drawn wrong); every track is named.
void expect_valid_trace_events(const nlohmann::json& doc) {
  ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::set<std::pair<int, int>> named;
  for (const auto& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("name")) << e.dump();
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") named.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    ASSERT_TRUE(e.contains("tid") && e.contains("ts") && e.contains("dur")) << e.dump();
    ASSERT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    const double ts = e["ts"].get<double>();
    tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
  }
  const double eps = 1e-6;  // microseconds
  for (auto& [track, slices] : tracks) {
    EXPECT_TRUE(named.count(track)) << "track " << track.second << " has no thread_name";
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> open;  // ends of the enclosing slices
    for (const auto& [start, end] : slices) {
      while (!open.empty() && open.back() <= start + eps) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(end, open.back() + eps) << "track " << track.second << ": [" << start << ", " << end << ") overlaps a slice ending at "
                                          << open.back();
      }
      open.push_back(end);
    }
  }
}

TEST(Timeline, OverlappingBucketsGetTracksOfTheirOwnAndTheFileFollowsTheFormat) {
  RunRecord r = profiled_run();
  // Rank 1's buckets now overlap: three in flight at once at the end of each iteration.
  for (auto& it : r.ranks[1].iterations)
    it.buckets = {{it.start + 0.004, it.start + 0.008},
                  {it.start + 0.005, it.start + 0.009},
                  {it.start + 0.006, it.start + 0.0095},
                  {it.start + 0.0085, it.start + 0.0099}};
  TimelineOptions opt;
  opt.rank = 1;
  parse_step_range("0-3", opt);
  const auto doc = timeline(r, opt);
  expect_valid_trace_events(doc);
  std::set<int> lanes;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "allreduce") lanes.insert(e["tid"].get<int>());
  EXPECT_EQ(lanes.size(), 3u);  // at most three in flight at once: bucket 3 reuses bucket 0's lane
  expect_valid_trace_events(timeline(profiled_run(), {}));
}

TEST(Timeline, BadSelectionsAreUsageErrors) {
  const RunRecord r = profiled_run();
  TimelineOptions rank;
  rank.rank = 2;
  TimelineOptions run;
  run.run = "run_000009";
  TimelineOptions steps;
  parse_step_range("7-9", steps);
  for (const auto& opt : {rank, run, steps}) {
    std::ostringstream out;
    EXPECT_THROW(write_timeline(out, {r}, opt), Error);
  }
  TimelineOptions parsed;
  EXPECT_THROW(parse_step_range("3-1", parsed), Error);
  EXPECT_THROW(parse_step_range("a-b", parsed), Error);
  EXPECT_THROW(parse_step_range("-2", parsed), Error);
  TimelineOptions named;
  named.run = "run_000002";
  std::ostringstream out;
  EXPECT_NO_THROW(write_timeline(out, {r}, named));
}

}  // namespace
}  // namespace dlperf::analysis
