// Reports that misled before these were fixed (a probe of 2026-11-28): a baseline of another
// workload compared, one-GPU runs cut off from their scaling row by the NCCL transport, two
// datasets averaged as one, an uneven placement counted as a point, MFU against another run's
// peak. Step times are hand-picked as in analysis_test_util.h: throughput = 32 x world / step.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "analysis_test_util.h"
#include "compare.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

using test::run_at;

RunRecord with_setting(RunRecord r, const std::string& setting) {
  r.info.settings.push_back(setting);
  return r;
}

std::string markdown(const Reduction& r) {
  std::ostringstream os;
  write_markdown(os, r, MethodOptions{}, ReportOptions{});
  return os.str();
}

// The baseline holds the benchmark at 224 px (320/s) and a 96 px run (1,600/s): a measured 224 px
// run was compared with the 96 px one (the last that matched by model) and failed at 0.2.
TEST(ReduceMisleading, CompareMatchesTheSameWorkNotTheModelName) {
  RunRecord b224 = run_at("resnet50", 1, 1, 0.1), b96 = run_at("resnet50", 1, 1, 0.02);
  b224.info.image_size = 224;
  b96.info.image_size = 96;
  const auto baseline = baseline_from_reduction(reduce_runs({b224, b96}, MethodOptions{}));
  RunRecord m = run_at("resnet50", 1, 1, 0.1);
  m.info.image_size = 224;
  auto rows = compare(reduce_runs({m}, MethodOptions{}), baseline, 0.95);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].matched);
  EXPECT_NEAR(rows[0].baseline, 320, 1e-9);
  EXPECT_FALSE(rows[0].regression);
  // Another precision is another workload: not compared, whatever the baseline's speed.
  RunRecord bf16 = m;
  bf16.info.precision = "bf16";
  rows = compare(reduce_runs({bf16}, MethodOptions{}), baseline, 0.95);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].matched);
  EXPECT_EQ(rows[0].why_not, "not in the baseline");
  // Another machine or build is what --compare is for: it matches.
  RunRecord other_cpu = m;
  other_cpu.info.cpu_model = "Some Other CPU";
  other_cpu.info.git_revision = "abc123";
  rows = compare(reduce_runs({other_cpu}, MethodOptions{}), baseline, 0.95);
  ASSERT_TRUE(rows[0].matched);
  EXPECT_NEAR(rows[0].ratio, 1.0, 1e-9);
}

// The thread count follows the machine (the launcher's CPUs per rank), and an older baseline lacks
// settings a newer dlperf records: neither keeps the same work from being compared.
TEST(ReduceMisleading, CompareIgnoresThreadsAndSettingsTheBaselineLacks) {
  RunRecord b = run_at("resnet50", 1, 1, 0.1);
  b.info.threads_per_rank = 1;
  const auto baseline = baseline_from_reduction(reduce_runs({b}, MethodOptions{}));
  RunRecord m = with_setting(run_at("resnet50", 1, 1, 0.1), "deterministic=false");
  m.info.threads_per_rank = 2;
  auto rows = compare(reduce_runs({m}, MethodOptions{}), baseline, 0.95);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].matched);
  // A setting both record and that differs is another workload.
  RunRecord other = with_setting(run_at("resnet50", 1, 1, 0.1), "resnet-width=8");
  const auto wide = baseline_from_reduction(reduce_runs({with_setting(run_at("resnet50", 1, 1, 0.1), "resnet-width=64")}, MethodOptions{}));
  EXPECT_FALSE(compare(reduce_runs({other}, MethodOptions{}), wide, 0.95)[0].matched);
}

TEST(ReduceMisleading, CompareRefusesToChooseBetweenMachines) {
  RunRecord a = run_at("resnet50", 1, 1, 0.1), b = run_at("resnet50", 1, 1, 0.2);
  a.info.cpu_model = "CPU A";
  b.info.cpu_model = "CPU B";
  const auto baseline = baseline_from_reduction(reduce_runs({a, b}, MethodOptions{}));
  RunRecord m = run_at("resnet50", 1, 1, 0.1);
  m.info.cpu_model = "CPU C";
  auto rows = compare(reduce_runs({m}, MethodOptions{}), baseline, 0.95);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].matched);
  EXPECT_EQ(rows[0].why_not, "2 baseline configurations match (they differ in cpu)");
  m.info.cpu_model = "CPU B";  // the same machine as one of them: that one
  rows = compare(reduce_runs({m}, MethodOptions{}), baseline, 0.95);
  ASSERT_TRUE(rows[0].matched);
  EXPECT_NEAR(rows[0].baseline, 160, 1e-9);
}

// dlperf-reduce --json carries each point's configuration; a label alone named only what
// differed within its own file set, and "resnet50_fp32_b32_cpu_image-size=96" matched any
// ResNet-50 by its model family.
TEST(ReduceMisleading, JsonBaselineKeepsTheConfiguration) {
  test::TempDir dir;
  RunRecord b224 = run_at("resnet50", 1, 1, 0.1), b96 = run_at("resnet50", 1, 1, 0.02);
  b224.info.image_size = 224;
  b96.info.image_size = 96;
  {
    std::ofstream out(dir.file("base.json"));
    write_json(out, reduce_runs({b224, b96}, MethodOptions{}));
  }
  const auto baseline = baseline_from_json(dir.file("base.json"));
  ASSERT_EQ(baseline.size(), 2u);
  ASSERT_TRUE(baseline[0].config.has_value());
  RunRecord m = run_at("resnet50", 1, 1, 0.1);
  m.info.image_size = 224;
  auto rows = compare(reduce_runs({m}, MethodOptions{}), baseline, 0.95);
  ASSERT_TRUE(rows[0].matched);
  EXPECT_NEAR(rows[0].baseline, 320, 1e-9);
  // A dlperf label without its configuration (an older JSON) matches only itself.
  const std::vector<BaselinePoint> labels = {{"resnet50_fp32_b32_cpu_image-size=96", "1n1r", 1600, 32, std::nullopt}};
  RunRecord plain = run_at("resnet50", 1, 1, 0.1);
  rows = compare(reduce_runs({plain}, MethodOptions{}), labels, 0.95);
  EXPECT_FALSE(rows[0].matched);
  // DLPerf's own names still match by family.
  const std::vector<BaselinePoint> dlperf = {{"rn50", "1n1r", 300, 32, std::nullopt}};
  rows = compare(reduce_runs({plain}, MethodOptions{}), dlperf, 0.95);
  EXPECT_TRUE(rows[0].matched);
}

// A one-GPU run creates no NCCL communicator, so it records no transport: as part of the key,
// the transport split 1n1g, 1n8g and the multi-node points into three tables with no speedup.
TEST(ReduceMisleading, NcclTransportDoesNotSplitTheScalingRow) {
  RunRecord one = run_at("resnet50", 1, 1, 0.1), eight = run_at("resnet50", 1, 8, 0.1), sixteen = run_at("resnet50", 2, 8, 0.1);
  for (RunRecord* r : {&one, &eight, &sixteen}) r->info.backend = "cuda";
  eight.info.nccl_transport = "P2P";
  sixteen.info.nccl_transport = "P2P, IB";
  const Reduction r = reduce_runs({one, eight, sixteen}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 1u);
  ASSERT_EQ(r.configs[0].points.size(), 3u);
  ASSERT_TRUE(r.configs[0].points[2].speedup.has_value());
  EXPECT_NEAR(*r.configs[0].points[2].speedup, 16, 1e-9);
  EXPECT_NE(markdown(r).find("NCCL transport: 1n8g P2P; 2n8g P2P, IB"), std::string::npos) << markdown(r);
}

// data_source is the layout (folder, tar, ...): two image folders were one configuration.
TEST(ReduceMisleading, TwoDatasetsAreTwoConfigurations) {
  RunRecord small = with_setting(run_at("resnet50", 1, 1, 0.1), "data=/data/small"),
            big = with_setting(run_at("resnet50", 1, 2, 0.1), "data=/data/big");
  small.info.data_source = big.info.data_source = "folder";
  const Reduction r = reduce_runs({small, big}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 2u);
  EXPECT_EQ(r.configs[0].key.details.at("data"), "folder");
  EXPECT_EQ(r.configs[0].key.details.at("data-path"), "/data/big");
  EXPECT_FALSE(r.configs[0].has_single_device_baseline);  // no speedup across datasets
}

// A site stages the dataset per job (node-local /tmp/<job id>): by path, every job was its own
// configuration with no speedup; by fingerprint the copies pool and other data stays apart.
TEST(ReduceMisleading, AStagedCopyOfTheDatasetIsTheSameDataset) {
  RunRecord one = with_setting(run_at("resnet50", 1, 1, 0.1), "data=/tmp/job_101/imagenet"),
            two = with_setting(run_at("resnet50", 1, 2, 0.1), "data=/tmp/job_102/imagenet"),
            other = with_setting(run_at("resnet50", 1, 2, 0.1), "data=/tmp/job_103/imagenet");
  for (RunRecord* r : {&one, &two, &other}) r->info.data_source = "folder";
  one.info.data_fingerprint = two.info.data_fingerprint = "00112233445566aa";
  other.info.data_fingerprint = "00112233445566bb";
  const Reduction r = reduce_runs({one, two, other}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 2u);
  const ConfigResult& pooled = r.configs[0].points.size() == 2 ? r.configs[0] : r.configs[1];
  ASSERT_EQ(pooled.points.size(), 2u);
  EXPECT_EQ(pooled.key.details.at("dataset"), "00112233445566aa");
  EXPECT_EQ(pooled.key.details.count("data-path"), 0u);
  ASSERT_TRUE(pooled.points[1].speedup.has_value());
  EXPECT_NEAR(*pooled.points[1].speedup, 2, 1e-9);
  // --compare: another dataset is another workload.
  EXPECT_FALSE(is_identity_detail("dataset"));
}

// 12 ranks as 4 + 8 on two nodes: rank 0's node gave devices_per_node 4, a "2n4" point of 8
// devices, and an efficiency of 125% once merged with a true one.
TEST(ReduceMisleading, AnUnevenPlacementIsLeftOutAndSaid) {
  RunRecord even = run_at("resnet50", 2, 4, 0.1), uneven = run_at("resnet50", 2, 4, 0.1);
  uneven.info.world_size = 12;
  uneven.info.hosts = {"a", "a", "a", "a", "b", "b", "b", "b", "b", "b", "b", "b"};
  const Reduction r = reduce_runs({run_at("resnet50", 1, 1, 0.1), even, uneven}, MethodOptions{});
  EXPECT_EQ(r.excluded_uneven, 1);
  ASSERT_EQ(r.configs.size(), 1u);
  EXPECT_EQ(r.configs[0].points.back().stats.runs, 1u);
  EXPECT_NE(markdown(r).find("their nodes held different numbers of ranks"), std::string::npos);
  EXPECT_NE(markdown(r).find("12 ranks on 2 hosts: 4 8"), std::string::npos) << markdown(r);
}

// Llama: MFU against each point's own runs' peak (a CPU's estimate follows its clock); above
// 100% is said; a reduced network is named as one.
TEST(ReduceMisleading, MfuUsesEachPointsPeakAndSaysWhenItIsImpossible) {
  auto llama = [](int64_t per_node, double peak) {
    RunRecord r = run_at("llama3_2_1b", 1, per_node, 0.1);
    r.info.seq_len = 8192;
    r.info.model_flops_per_token = 1e6;  // 32 seq x 8192 tokens / 0.1 s per device x 1e6: 2.62 TFLOP/s
    r.info.peak_tflops_per_device = peak;
    r.info.peak_source = "--peak-tflops";
    return r;
  };
  const Reduction r = reduce_runs({llama(1, 5.24288), llama(2, 2.0), with_setting(llama(1, 1.0), "llama-layers=2")}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 2u);
  const ConfigResult& full = r.configs[0].key.details.count("llama-layers") ? r.configs[1] : r.configs[0];
  ASSERT_EQ(full.points.size(), 2u);
  EXPECT_NEAR(*llm_point(full, full.points[0])->mfu, 0.5, 1e-9);
  EXPECT_NEAR(*llm_point(full, full.points[1])->mfu, 2.62144 / 2.0, 1e-9);
  const std::string md = markdown(r);
  EXPECT_NE(md.find("MFU 131.07% is above 100%"), std::string::npos) << md;
  EXPECT_NE(md.find("2.000-5.243 TFLOP/s (--peak-tflops); each point's MFU uses the median of its own runs' peaks"), std::string::npos) << md;
  EXPECT_NE(md.find("trains a reduced network (llama-layers 2 (benchmark: the model's))"), std::string::npos) << md;
}

// Three ways a table read wrong: a Llama step of a minute on a CPU (0.5 samples/s) printed as
// 0.00; a 2-rank point at 200% efficiency (1-device runs slowed) passed without a word; an
// absurd FLOP count per token wrote "inf" into the JSON, which no reader accepts.
TEST(ReduceMisleading, SlowRatesSuperlinearPointsAndInfiniteFlops) {
  const Reduction r = reduce_runs({run_at("resnet50", 1, 1, 64.0), run_at("resnet50", 1, 2, 32.0)}, MethodOptions{});
  const std::string md = markdown(r);
  EXPECT_NE(md.find("| 1 | 1 | 32 | 0.5 | 1.00 | 100.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("warning: superlinear resnet50_fp32_b32_cpu 1n2r: scaling efficiency 200.0% is above 100%"), std::string::npos) << md;
  RunRecord llama = run_at("llama3_2_1b", 1, 1, 0.1);
  llama.info.seq_len = 8192;
  llama.info.model_flops_per_token = 1e308;
  llama.info.peak_tflops_per_device = 989;
  std::ostringstream json;
  write_json(json, reduce_runs({llama}, MethodOptions{}));
  EXPECT_EQ(json.str().find("inf"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"tflops_per_device\": null"), std::string::npos) << json.str();
}

// fp16 whose loss scale overflowed every step: no update ran, yet its samples/s were averaged in
// as training. A few skipped steps (the scale settling) are normal and not named.
TEST(ReduceMisleading, RunsThatSkippedTheirUpdatesAreNamed) {
  RunRecord settled = run_at("resnet50", 1, 1, 0.1), stuck = run_at("resnet50", 1, 1, 0.1);
  for (RunRecord* r : {&settled, &stuck}) r->info.precision = "fp16";
  for (int64_t k = 20; k < 25; ++k) settled.ranks[0].iterations[static_cast<size_t>(k)].skipped = true;  // 5%
  for (auto& it : stuck.ranks[0].iterations) it.skipped = true;
  Reduction r = reduce_runs({settled}, MethodOptions{});
  EXPECT_EQ(r.configs[0].runs_mostly_skipped, 0);
  r = reduce_runs({settled, stuck}, MethodOptions{});
  EXPECT_EQ(r.configs[0].runs_mostly_skipped, 1);
  EXPECT_NE(markdown(r).find("1 measured run(s) skipped the optimizer update in more than 10% of their measured iterations (up to 100.0%"),
            std::string::npos)
      << markdown(r);
}

// --include-partial measured a SIGTERM-ended 1x1 run as the baseline and said nothing.
TEST(ReduceMisleading, IncludedPartialRunsAreNamed) {
  MethodOptions opt;
  opt.include_partial = true;
  const Reduction r = reduce_runs({run_at("resnet50", 1, 1, 0.1, RunStatus::partial), run_at("resnet50", 1, 2, 0.1)}, opt);
  ASSERT_EQ(r.configs[0].points[0].included_partial, 1);
  EXPECT_NE(markdown(r).find("1n1r: 1 of its 1 measured run(s) stopped early (partial, --include-partial), and the speedups"),
            std::string::npos)
      << markdown(r);
}

// A DLPerf result file names no configuration: its ResNet-50 figures were compared with a
// reduced network's and with another precision's (the key or file name says fp16) without a word.
TEST(ReduceMisleading, DlperfFiguresOnlyBesideTheirPrecisionAndWorkload) {
  test::TempDir dir;
  const auto dlperf_file = [&](const std::string& name, const std::string& key) {
    std::ofstream(dir.file(name)) << "{\"" << key << "\": {\"1n1r\": {\"median_speed\": 300, \"batch_size_per_device\": 32}}}";
    return baseline_from_json(dir.file(name));
  };
  RunRecord fp32 = run_at("resnet50", 1, 1, 0.1), bf16 = run_at("resnet50", 1, 1, 0.1);
  bf16.info.precision = "bf16";
  const RunRecord narrow = with_setting(run_at("resnet50", 1, 1, 0.1), "resnet-width=8");
  auto rows = compare(reduce_runs({fp32}, MethodOptions{}), dlperf_file("resnet50_fp16_result.json", "rn50"), 0.95);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].matched);
  EXPECT_EQ(rows[0].why_not, "the baseline's rn50 is fp16 (its name says), this is fp32");
  rows = compare(reduce_runs({bf16}, MethodOptions{}), dlperf_file("a.json", "rn50_amp"), 0.95);
  EXPECT_TRUE(rows[0].matched);  // both mixed precision
  EXPECT_EQ(rows[0].why_not, "");
  rows = compare(reduce_runs({narrow}, MethodOptions{}), dlperf_file("b.json", "rn50_fp32"), 0.95);
  EXPECT_FALSE(rows[0].matched);
  EXPECT_EQ(rows[0].why_not, "not the published workload (resnet-width 8 (benchmark: 64)), which the baseline's rn50_fp32 figures are");
  rows = compare(reduce_runs({fp32}, MethodOptions{}), dlperf_file("c.json", "resnet50"), 0.95);
  EXPECT_TRUE(rows[0].matched);
  EXPECT_EQ(rows[0].why_not, "the baseline names no precision: compared as fp32");
  // Two precisions of different classes in one name say nothing.
  rows = compare(reduce_runs({fp32}, MethodOptions{}), dlperf_file("fp16_vs_fp32.json", "rn50"), 0.95);
  EXPECT_EQ(rows[0].why_not, "the baseline names no precision: compared as fp32");
}

// One run at --warmup 0 beside runs at the default: their median mixed warm-up into steady state,
// and the only sign was the global list of windows.
TEST(ReduceMisleading, RunsOfDifferentWindowsAreNamed) {
  const Reduction same = reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 2, 0.1)}, MethodOptions{});
  EXPECT_EQ(markdown(same).find("different windows"), std::string::npos) << markdown(same);
  RunRecord cold = run_at("resnet50", 1, 2, 0.1);
  cold.info.warmup = 0;
  const Reduction mixed = reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 2, 0.1), cold}, MethodOptions{});
  EXPECT_NE(markdown(mixed).find("warning: resnet50_fp32_b32_cpu: its runs were measured over different windows (1n1r iterations "
                                 "21-120; 1n2r iterations 1-120, 21-120)"),
            std::string::npos)
      << markdown(mixed);
}

// Two runs' median passed for the method's (5-7 repeats) without a word.
TEST(ReduceMisleading, PointsWithFewerRepeatsThanTheMethodAreNamed) {
  std::vector<RunRecord> runs;
  for (int k = 0; k < 5; ++k) runs.push_back(run_at("resnet50", 1, 1, 0.1));
  EXPECT_EQ(markdown(reduce_runs(runs, MethodOptions{})).find("fewer than 5 measured runs"), std::string::npos);
  runs.push_back(run_at("resnet50", 1, 2, 0.1));
  runs.push_back(run_at("resnet50", 1, 2, 0.1));
  const std::string md = markdown(reduce_runs(runs, MethodOptions{}));
  EXPECT_NE(md.find("note: 1 point(s) have fewer than 5 measured runs, where DLPerf's method takes the median of 5-7 repeats: "
                    "resnet50_fp32_b32_cpu 1n2r (2)"),
            std::string::npos)
      << md;
}

// A single run has no spread: its cv showed 0.00%, as if perfectly repeatable.
TEST(ReduceMisleading, OneRunHasNoCoefficientOfVariation) {
  const Reduction r = reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 2, 0.1), run_at("resnet50", 1, 2, 0.1)},
                                  MethodOptions{});
  EXPECT_NE(markdown(r).find("| 1 | 1 | 1 | 320.00 | 320.00 | 320.00 | 320.00 | n/a | 0 |"), std::string::npos) << markdown(r);
  EXPECT_NE(markdown(r).find("| 1 | 2 | 2 | 640.00 | 640.00 | 640.00 | 640.00 | 0.00% | 0 |"), std::string::npos) << markdown(r);
  std::ostringstream json, csv;
  write_json(json, r);
  write_csv(csv, r);
  EXPECT_NE(json.str().find("\"runs\": 1, \"cv\": null"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"runs\": 2, \"cv\": 0,"), std::string::npos) << json.str();
  EXPECT_NE(csv.str().find(",320,320,320,320,,1,"), std::string::npos) << csv.str();
}

// Two older traces' data paths "run 1" and "run-1" fold to one label: the JSON held one key twice.
// A '|' in --variant split the comparison table's rows.
TEST(ReduceMisleading, LabelsAreUniqueAndTablesKeepTheirColumns) {
  RunRecord a = with_setting(run_at("resnet50", 1, 1, 0.1), "data=run 1"), b = with_setting(run_at("resnet50", 1, 1, 0.2), "data=run-1");
  const Reduction r = reduce_runs({a, b}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 2u);
  EXPECT_NE(r.configs[0].label, r.configs[1].label);
  std::ostringstream json;
  write_json(json, r);
  EXPECT_NE(json.str().find("\"resnet50_fp32_b32_cpu_data-path=run-1\": {"), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"resnet50_fp32_b32_cpu_data-path=run-1_2\": {"), std::string::npos) << json.str();
  RunRecord v = run_at("resnet50", 1, 1, 0.1);
  v.info.variant = "a|b";
  const Reduction rv = reduce_runs({v}, MethodOptions{});
  std::ostringstream table;
  write_comparison(table, compare(rv, {}, 0.95), 0.95);
  EXPECT_NE(table.str().find("| resnet50_fp32_b32_cpu_a\\|b | 1n1r | 320.00 | n/a | n/a | not in the baseline |"), std::string::npos)
      << table.str();
}

// A tag from a trace dlperf-train did not check: "<ib" opened an HTML tag that a markdown
// renderer hid with the rest of the heading, and "=cmd" ran as a formula in a spreadsheet.
TEST(ReduceMisleading, TagsStayTextInMarkdownAndSpreadsheets) {
  RunRecord v = run_at("resnet50", 1, 1, 0.1);
  v.info.variant = "=1+2 <ib & eth>";
  const Reduction r = reduce_runs({v}, MethodOptions{});
  std::ostringstream md, csv;
  write_markdown(md, r, MethodOptions{}, ReportOptions{});
  write_csv(csv, r);
  EXPECT_NE(md.str().find("## resnet50 · fp32 · batch 32/device · cpu · =1+2 &lt;ib &amp; eth>\n"), std::string::npos) << md.str();
  EXPECT_EQ(md.str().find("<ib"), std::string::npos) << md.str();
  EXPECT_NE(csv.str().find(",cpu,'=1+2 <ib & eth>,32,"), std::string::npos) << csv.str();
}

}  // namespace
}  // namespace dlperf::analysis
