// The DLPerf method against hand-computed numbers. Lockstep synthetic runs with batch 32:
//   1n1g steps 0.1, 0.1, 0.125  -> 320, 320, 256 samples/s  (odd count: median 320)
//   1n2g steps 64/600, 64/640, 64/560, 64/620 -> 600, 640, 560, 620 (even: median 610)
//   speedup 1n2g = 610 / 320 = 1.90625, efficiency = 0.953125
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "analysis_test_util.h"
#include "reduce.h"

namespace dlperf::analysis {
namespace {

using test::run_at;

std::vector<RunRecord> hand_runs() {
  return {run_at("resnet50", 1, 1, 0.1),        run_at("resnet50", 1, 2, 64.0 / 600),
          run_at("resnet50", 1, 1, 0.1),        run_at("resnet50", 1, 2, 64.0 / 640),
          run_at("resnet50", 1, 1, 0.125),      run_at("resnet50", 1, 2, 64.0 / 560),
          run_at("resnet50", 1, 2, 64.0 / 620), run_at("resnet50", 1, 1, 0.05, RunStatus::partial),
          run_at("resnet50", 1, 1, 0.05, RunStatus::failed), run_at("resnet50", 1, 2, 0.05, RunStatus::complete, 60),
          run_at("resnet50", 1, 1, 0.05, RunStatus::running)};
}

TEST(ReduceMethod, RunThroughputIsWindowSamplesOverSlowestRank) {
  RunRecord r = run_at("resnet50", 1, 4, 0.1);
  // Rank 2 ends its window 1 s later than the others: the window lasts 11 s on it.
  for (size_t i = 20; i < 120; ++i) r.ranks[2].iterations[i].end += 1.0;
  auto t = run_throughput(r, MethodOptions{});
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_EQ(t.slowest_rank, 2);
  EXPECT_NEAR(t.window_seconds, 11.0, 1e-9);
  EXPECT_NEAR(*t.samples_per_s, 100.0 * 32 * 4 / 11.0, 1e-9);
}

TEST(ReduceMethod, WarmupZeroStartsAtFirstIteration) {
  MethodOptions opt;
  opt.warmup = 0;
  opt.window = 10;
  auto t = run_throughput(run_at("vgg16", 1, 1, 0.2), opt);
  ASSERT_TRUE(t.samples_per_s);
  EXPECT_NEAR(*t.samples_per_s, 10 * 32 / 2.0, 1e-9);
}

TEST(ReduceMethod, TooShortRunHasNoThroughput) {
  auto t = run_throughput(run_at("vgg16", 1, 1, 0.2, RunStatus::complete, 119), MethodOptions{});
  EXPECT_FALSE(t.samples_per_s);
  EXPECT_FALSE(t.why_not.empty());
}

// Issue 27 item 4: each run is measured by its own recorded warm-up and length, so runs shorter
// than DLPerf's 120 iterations are measured, and two lengths in one group each use their own.
TEST(ReduceMethod, EachRunIsMeasuredByItsOwnRecordedWindow) {
  RunRecord short_run = test::run_of_length(10, 2, 0.1);
  // Its warm-up is slow (0.5 s per iteration): dropping its own 2 iterations leaves 8 at 0.1 s.
  for (auto& rank : short_run.ranks)
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      const double d = static_cast<double>(i);
      rank.iterations[i].start = i < 2 ? 0.5 * d : 1.0 + 0.1 * (d - 2);
      rank.iterations[i].end = rank.iterations[i].start + (i < 2 ? 0.5 : 0.1);
    }
  const RunWindow w = run_window(short_run, MethodOptions{});
  EXPECT_EQ(w.warmup, 2);
  EXPECT_EQ(w.window, 8);
  auto t = run_throughput(short_run, MethodOptions{});
  ASSERT_TRUE(t.samples_per_s) << t.why_not;
  EXPECT_NEAR(t.window_seconds, 0.8, 1e-9);
  EXPECT_NEAR(*t.samples_per_s, 8 * 32 / 0.8, 1e-9);
  // A longer run of the same configuration at another speed: both in one median.
  Reduction r = reduce_runs({short_run, test::run_of_length(30, 5, 0.2)}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 1u);
  EXPECT_EQ(r.measured_runs, 2);
  EXPECT_NEAR(r.configs[0].points[0].stats.median, 0.5 * (320 + 160), 1e-9);
  EXPECT_EQ(r.windows, (std::set<RunWindow>{{2, 8}, {5, 25}}));
}

TEST(ReduceMethod, WarmupAndWindowOverrideEveryRun) {
  MethodOptions opt;
  opt.window = 4;  // the run's own warm-up (2), then 4 iterations
  EXPECT_EQ(run_window(test::run_of_length(10, 2, 0.1), opt), (RunWindow{2, 4}));
  opt.warmup = 7;  // 7 + 4 > 10: too short
  auto t = run_throughput(test::run_of_length(10, 2, 0.1), opt);
  EXPECT_FALSE(t.samples_per_s);
  MethodOptions warm_only;
  warm_only.warmup = 6;  // the window is the rest of the run's planned length
  EXPECT_EQ(run_window(test::run_of_length(10, 2, 0.1), warm_only), (RunWindow{6, 4}));
  warm_only.warmup = 10;  // nothing left
  t = run_throughput(test::run_of_length(10, 2, 0.1), warm_only);
  EXPECT_FALSE(t.samples_per_s);
  EXPECT_NE(t.why_not.find("leaves no iteration"), std::string::npos) << t.why_not;
  // A trace that recorded no plan: DLPerf's 20 + 100.
  RunRecord old = test::run_of_length(120, 0, 0.1);
  old.info.iterations = 0;
  EXPECT_EQ(run_window(old, MethodOptions{}), (RunWindow{kDefaultWarmup, kDefaultWindow}));
}

TEST(ReduceMethod, RepeatStatsOddAndEven) {
  auto odd = repeat_stats({320, 256, 320});
  EXPECT_DOUBLE_EQ(odd.median, 320);
  EXPECT_NEAR(odd.mean, 896.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(odd.min, 256);
  EXPECT_DOUBLE_EQ(odd.max, 320);
  // sample sd: deviations 64/3, 64/3, -128/3 -> ss = 24576/9, /2 -> sd = sqrt(1365.33) = 36.950
  EXPECT_NEAR(odd.cv, std::sqrt(24576.0 / 18) / (896.0 / 3), 1e-12);
  auto even = repeat_stats({600, 640, 560, 620});
  EXPECT_DOUBLE_EQ(even.median, 610);
  EXPECT_DOUBLE_EQ(even.mean, 605);
  auto one = repeat_stats({42});
  EXPECT_DOUBLE_EQ(one.median, 42);
  EXPECT_DOUBLE_EQ(one.cv, 0);
}

TEST(ReduceMethod, HandComputedTable) {
  Reduction r = reduce_runs(hand_runs(), MethodOptions{});
  ASSERT_EQ(r.configs.size(), 1u);
  const ConfigResult& c = r.configs[0];
  EXPECT_TRUE(c.has_single_device_baseline);
  ASSERT_EQ(c.points.size(), 2u);
  const ScalePoint &p1 = c.points[0], &p2 = c.points[1];
  EXPECT_EQ(p1.devices(), 1);
  EXPECT_EQ(p1.stats.runs, 3u);
  EXPECT_NEAR(p1.stats.median, 320, 1e-6);
  EXPECT_NEAR(p1.stats.min, 256, 1e-6);
  EXPECT_NEAR(*p1.speedup, 1.0, 1e-12);
  EXPECT_NEAR(*p1.efficiency, 1.0, 1e-12);
  EXPECT_EQ(p1.excluded_partial, 2);  // partial + running
  EXPECT_EQ(p1.excluded_failed, 1);
  EXPECT_EQ(p2.devices(), 2);
  EXPECT_EQ(p2.stats.runs, 4u);
  EXPECT_NEAR(p2.stats.median, 610, 1e-6);
  EXPECT_NEAR(p2.stats.mean, 605, 1e-6);
  EXPECT_NEAR(*p2.speedup, 1.90625, 1e-9);
  EXPECT_NEAR(*p2.efficiency, 0.953125, 1e-9);
  EXPECT_EQ(p2.excluded_short, 1);
  EXPECT_EQ(r.excluded_partial + r.excluded_failed + r.excluded_short, 4);
  // Phases of the synthetic step: data 5%, forward 30%, backward 45%, comm 10%, optimizer 10%.
  EXPECT_NEAR(p1.phases.phase_seconds[1] / p1.phases.step_seconds, 0.30, 1e-6);
}

TEST(ReduceMethod, MissingSingleDeviceBaselineLeavesSpeedupEmpty) {
  Reduction r = reduce_runs({run_at("bert_base", 1, 2, 0.1), run_at("bert_base", 1, 1, 0.1, RunStatus::partial)},
                            MethodOptions{});
  ASSERT_EQ(r.configs.size(), 1u);
  EXPECT_FALSE(r.configs[0].has_single_device_baseline);
  for (const auto& p : r.configs[0].points) EXPECT_FALSE(p.speedup);
}

TEST(ReduceMethod, IncludePartialMeasuresPartialRunsWithAFullWindow) {
  MethodOptions opt;
  opt.include_partial = true;
  Reduction r = reduce_runs({run_at("vgg16", 1, 1, 0.1, RunStatus::partial)}, opt);
  EXPECT_EQ(r.configs[0].points[0].stats.runs, 1u);
}

TEST(ReduceMethod, GroupsByConfiguration) {
  RunRecord a = run_at("resnet50", 1, 1, 0.1), b = a, c = a;
  b.info.precision = "bf16";
  c.info.variant = "static_loss_scale";
  Reduction r = reduce_runs({a, b, c}, MethodOptions{});
  EXPECT_EQ(r.configs.size(), 3u);
}

TEST(ReduceMethod, PersistentStragglerIsReported) {
  SyntheticRunSpec spec;
  spec.info = run_at("resnet50", 1, 4, 0.1).info;
  spec.step_seconds = 0.11;
  spec.slow_rank = 1;
  spec.slow_extra = 0.01;
  RunRecord run = make_synthetic_run(spec);
  run.location = "x.h5:/runs/run_000001";
  Reduction r = reduce_runs({run}, MethodOptions{});
  ASSERT_EQ(r.stragglers.size(), 1u);
  EXPECT_EQ(r.stragglers[0].rank, 1);
  EXPECT_DOUBLE_EQ(r.stragglers[0].slow_fraction, 1.0);
  // Fast ranks compute 0.9 * 0.1 = 0.09 s; the slow one 0.10 s: 11.1% over the median.
  EXPECT_NEAR(r.stragglers[0].excess, 0.01 / 0.09, 1e-5);
}

}  // namespace
}  // namespace dlperf::analysis
