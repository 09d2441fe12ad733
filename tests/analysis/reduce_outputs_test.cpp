// Outputs of a reduction: the DLPerf markdown table rows, CSV, DLPerf-shaped JSON, SVG,
// reference matching and the baseline comparison (hand-computed numbers as in
// reduce_method_test.cpp: 1n1g median 320, 1n2g median 610, speedup 1.90625).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "analysis_test_util.h"
#include "compare.h"
#include "core/error.h"
#include "json_strict.h"
#include "reference.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

using test::run_at;

Reduction hand_reduction() {
  return reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 1, 0.125),
                      run_at("resnet50", 1, 2, 64.0 / 600), run_at("resnet50", 1, 2, 64.0 / 640),
                      run_at("resnet50", 1, 2, 64.0 / 560), run_at("resnet50", 1, 2, 64.0 / 620),
                      run_at("resnet50", 1, 1, 0.05, RunStatus::partial)},
                     MethodOptions{});
}

TEST(ReduceOutputs, MarkdownHasTheDlperfTable) {
  std::ostringstream os;
  write_markdown(os, hand_reduction(), MethodOptions{}, ReportOptions{});
  const std::string md = os.str();
  EXPECT_NE(md.find("| node_num | rank_num | batch_size_per_device | samples/s | speedup | efficiency |"), std::string::npos);
  EXPECT_NE(md.find("| 1 | 1 | 32 | 320.00 | 1.00 | 100.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 2 | 32 | 610.00 | 1.91 | 95.3% |"), std::string::npos) << md;
  EXPECT_NE(md.find("1 run(s) excluded: 1 partial"), std::string::npos) << md;
  // cv of {320, 320, 256} = 12.37% > 5%: a noisy-group warning.
  EXPECT_NE(md.find("warning: noisy group resnet50_fp32_b32_cpu 1n1r"), std::string::npos) << md;
}

// Two runs at the same time on the same CPUs or GPU of a host (jobs sharing a node unbound)
// competed for them: both figures are suspect, and the report says which. Runs on other CPUs, or one
// after the other, are not named.
TEST(ReduceOutputs, RunsThatSharedAMachineAtOnceAreNamed) {
  const auto at = [](const char* start, const char* end, const char* host, const char* binding) {
    RunRecord r = run_at("resnet50", 1, 1, 0.1);
    r.info.start_time_utc = start;
    r.info.end_time_utc = end;
    r.location = std::string("r.h5:/runs/") + start;
    r.ranks[0].host = host;
    r.ranks[0].binding = binding;
    return r;
  };
  const auto report = [](const std::vector<RunRecord>& runs) {
    const Reduction r = reduce_runs(runs, MethodOptions{});
    std::ostringstream os;
    write_markdown(os, r, MethodOptions{}, ReportOptions{});
    return std::pair{r.overlapping_pairs, os.str()};
  };
  const auto [pairs, md] = report({at("2026-11-25T12:00:00Z", "2026-11-25T12:01:00Z", "h1", "cpus 0-3 (numa 0)"),
                                   at("2026-11-25T12:00:30Z", "2026-11-25T12:01:30Z", "h1", "cpus 2-5 (numa 0)"),
                                   at("2026-11-25T12:00:30Z", "2026-11-25T12:01:30Z", "h1", "cpus 8-9 (numa 0)"),
                                   at("2026-11-25T12:00:30Z", "2026-11-25T12:01:30Z", "h2", "cpus 0-3 (numa 0)"),
                                   at("2026-11-25T12:01:31Z", "2026-11-25T12:02:00Z", "h1", "cpus 0-3 (numa 0)")});
  EXPECT_EQ(pairs, 1);
  EXPECT_NE(md.find("warning: 1 pair(s) of measured runs ran at the same time on the same CPUs or GPU (first: "
                    "r.h5:/runs/2026-11-25T12:00:00Z and r.h5:/runs/2026-11-25T12:00:30Z on host h1 (2 CPU(s), first 2))"),
            std::string::npos)
      << md;
  // One GPU, other cores: shared all the same.
  EXPECT_EQ(report({at("2026-11-25T12:00:00Z", "2026-11-25T12:01:00Z", "g", "cpus 0-3 (numa 0); gpu 0000:17:00.0 (numa 0)"),
                    at("2026-11-25T12:00:10Z", "2026-11-25T12:00:50Z", "g", "cpus 4-7 (numa 0); gpu 0000:17:00.0 (numa 0)")})
                .first,
            1);
  // GPUs of their own, the node's CPUs listed for both (an unbound launch): not named.
  EXPECT_EQ(report({at("2026-11-25T12:00:00Z", "2026-11-25T12:01:00Z", "g", "cpus 0-7 (numa 0); gpu 0000:17:00.0 (numa 0)"),
                    at("2026-11-25T12:00:10Z", "2026-11-25T12:00:50Z", "g", "cpus 0-7 (numa 0); gpu 0000:18:00.0 (numa 0)")})
                .first,
            0);
  // Older files (no binding) and runs that only touch at a second's boundary: nothing said.
  const auto [none, quiet] = report({at("2026-11-25T12:00:00Z", "2026-11-25T12:01:00Z", "h1", ""),
                                     at("2026-11-25T12:00:30Z", "2026-11-25T12:01:30Z", "h1", ""),
                                     at("2026-11-25T12:01:30Z", "2026-11-25T12:02:00Z", "h1", "cpus 0-3 (numa 0)"),
                                     at("2026-11-25T12:02:00Z", "2026-11-25T12:03:00Z", "h1", "cpus 0-3 (numa 0)")});
  EXPECT_EQ(none, 0);
  EXPECT_EQ(quiet.find("at the same time"), std::string::npos) << quiet;
}

// Issue 25: a run with --zero 1 --grad-accum 2 says so, and its throughput counts both
// micro-batches (2 x 32 samples per 0.1 s step = 640/s on one rank).
TEST(ReduceOutputs, ZeroAndAccumulationAreShownAndCounted) {
  RunRecord r = run_at("resnet50", 1, 1, 0.1);
  r.info.grad_accum = 2;
  r.info.settings = {"zero=1", "grad-accum=2", "zero-gather=forward", "recompute=block"};
  std::ostringstream os;
  write_markdown(os, reduce_runs({r}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  // Its one point is 1 device: sharded over one rank, nothing is (the line says so).
  EXPECT_NE(os.str().find("Data parallelism: zero stage 1 (all-gathers waited for in the next forward); its 1-device point shards "
                          "nothing (one rank holds every shard), grad-accum 2 micro-batch(es) "
                          "per step (throughput counts every one), recompute block"),
            std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("| 1 | 1 | 32 | 640.00 |"), std::string::npos) << os.str();
  // The machine-read files say it too: 640 samples/s of 32 per micro-batch, two per step.
  std::ostringstream csv, json;
  write_csv(csv, reduce_runs({r}, MethodOptions{}));
  write_json(json, reduce_runs({r}, MethodOptions{}));
  EXPECT_NE(csv.str().find(",tflops_per_device,mfu,grad_accum,zero\n"), std::string::npos) << csv.str();
  EXPECT_NE(csv.str().find(",,,,2,1\n"), std::string::npos) << csv.str();
  EXPECT_NE(json.str().find("\"batch_size_per_device\": 32, \"grad_accum\": 2, \"zero\": 1,"), std::string::npos) << json.str();
  // A trace from before --zero-gather waited at the step's end; --zero 0 all-gathers nothing.
  r.info.settings = {"zero=2", "grad-accum=1"};
  std::ostringstream older;
  write_markdown(older, reduce_runs({r}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  EXPECT_NE(older.str().find("Data parallelism: zero stage 2 (all-gathers waited for at the step's end); its 1-device point shards nothing"),
            std::string::npos)
      << older.str();
  r.info.settings = {"zero=0", "grad-accum=2", "zero-gather=forward"};
  std::ostringstream replicated;
  write_markdown(replicated, reduce_runs({r}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  EXPECT_NE(replicated.str().find("Data parallelism: zero stage 0, grad-accum 2"), std::string::npos) << replicated.str();
  // Two ranks only: no 1-device point to describe.
  r = run_at("resnet50", 1, 2, 0.1);
  r.info.settings = {"zero=1"};
  std::ostringstream two;
  write_markdown(two, reduce_runs({r}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  EXPECT_NE(two.str().find("Data parallelism: zero stage 1 (all-gathers waited for at the step's end), grad-accum 1"), std::string::npos)
      << two.str();
}

// Issue 25: the plan beside the measured peaks, the highest over runs and ranks.
TEST(ReduceOutputs, MemoryPlanIsShownBesideTheMeasuredPeak) {
  RunRecord a = run_at("resnet50", 1, 2, 0.1), b = run_at("resnet50", 1, 2, 0.1);
  for (RunRecord* r : {&a, &b}) {
    r->info.memory_plan_bytes = 100 << 20;
    for (RankTrace& rank : r->ranks) rank.peak_memory_bytes = 300 << 20;
  }
  a.ranks[0].allocated_peak_bytes = 96 << 20;
  b.ranks[1].allocated_peak_bytes = 104 << 20;  // the higher: the table's
  std::ostringstream os;
  write_markdown(os, reduce_runs({a, b}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  EXPECT_NE(os.str().find("| node_num | rank_num | plan | allocated peak | plan / allocated | resident peak |"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("| 1 | 2 | 100.0 | 104.0 | 0.962 | 300.0 |"), std::string::npos) << os.str();
  std::ostringstream js;
  write_json(js, reduce_runs({a, b}, MethodOptions{}));
  EXPECT_NE(js.str().find("\"allocated_peak_bytes\": 109051904"), std::string::npos) << js.str();
}

TEST(ReduceOutputs, MissingBaselineNote) {
  std::ostringstream os;
  write_markdown(os, reduce_runs({run_at("vgg16", 1, 2, 0.1)}, MethodOptions{}), MethodOptions{}, ReportOptions{});
  EXPECT_NE(os.str().find("| 1 | 2 | 32 | 640.00 |  |  |"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("no complete 1 node x 1 device run"), std::string::npos);
}

TEST(ReduceOutputs, CsvAndJson) {
  Reduction r = hand_reduction();
  std::ostringstream csv;
  write_csv(csv, r);
  EXPECT_NE(csv.str().find("resnet50_fp32_b32_cpu,resnet50,fp32,cpu,,32,1,2,2,cpu_rank,4,0,610"), std::string::npos) << csv.str();
  std::ostringstream js;
  write_json(js, r);
  const nlohmann::json v = parse_json_strict(js.str(), "json");
  const nlohmann::json& p = v.at("resnet50_fp32_b32_cpu").at("1n2r");  // CPU-backend ranks: "r", not "g"
  EXPECT_NEAR(p.at("median_speed").get<double>(), 610, 1e-6);
  EXPECT_NEAR(p.at("average_speed").get<double>(), 605, 1e-6);
  EXPECT_NEAR(p.at("speedup").get<double>(), 1.90625, 1e-9);
  EXPECT_EQ(p.at("batch_size_per_device").get<int>(), 32);
}

TEST(ReduceOutputs, SvgIsWellFormedEnough) {
  std::ostringstream os;
  write_svg(os, hand_reduction());
  const std::string svg = os.str();
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the ideal line
  EXPECT_NE(svg.find("Speedup"), std::string::npos);
}

TEST(ReduceOutputs, CompareFlagsRegressionsBelowTolerance) {
  Reduction r = hand_reduction();
  std::vector<BaselinePoint> base = {{"resnet50_fp32_b32_cpu", "1n1r", 320, 32}, {"resnet50", "1n2r", 700, 32}};
  auto rows = compare(r, base, 0.95);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[0].regression);
  EXPECT_NEAR(rows[1].ratio, 610.0 / 700, 1e-9);  // 0.871 < 0.95
  EXPECT_TRUE(rows[1].regression);
  EXPECT_FALSE(compare(r, base, 0.8)[1].regression);
  // A point the baseline lacks keeps its row, marked, never passed silently.
  base.pop_back();
  rows = compare(r, base, 0.95);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].matched);
  EXPECT_FALSE(rows[1].matched);
  EXPECT_FALSE(rows[1].regression);
  std::ostringstream os;
  write_comparison(os, rows, 0.95);
  EXPECT_NE(os.str().find("| 1n2r | 610.00 | n/a | n/a | not in the baseline |"), std::string::npos) << os.str();
  // A point whose runs all failed, which the baseline measured, is a regression: a CI gate
  // passed (exit 0) while that scale point crashed.
  base.push_back({"resnet50", "1n2r", 700, 32});
  r.configs[0].points[1].stats = {};
  rows = compare(r, base, 0.95);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[1].matched);
  EXPECT_TRUE(rows[1].regression);
  std::ostringstream failed;
  write_comparison(failed, rows, 0.95);
  EXPECT_NE(failed.str().find("| 1n2r | 0.00 | 700.00 | 0.000 | REGRESSION: no measured run (failed or partial) |"), std::string::npos)
      << failed.str();
  // A ratio just under the tolerance is not shown rounded up to it beside REGRESSION.
  const std::vector<Comparison> near = {{"c", "1n1r", 640, 673.72, 640 / 673.72, true, true, ""}};
  std::ostringstream near_text;
  write_comparison(near_text, near, 0.95);
  EXPECT_NE(near_text.str().find("| 640.00 | 673.72 | 0.9499 | REGRESSION |"), std::string::npos) << near_text.str();
  // Without the point in the baseline it is no row (a sweep may be re-run in part).
  base.pop_back();
  EXPECT_EQ(compare(r, base, 0.95).size(), 1u);
}

TEST(ReduceOutputs, ABaselineThroughputThatIsNoneIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("base.json");
  for (const char* bad : {"-5", "0", "1e300"}) {
    std::ofstream(path, std::ios::trunc) << R"({"resnet50": {"1n1g": {"median_speed": )" << bad << "}}}";
    try {
      (void)baseline_from_json(path);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("resnet50 1n1g: median_speed"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not a throughput"), std::string::npos) << e.what();
    }
  }
}

TEST(ReduceOutputs, DlperfJsonBaselineAndBadJson) {
  test::TempDir dir;
  const std::string path = dir.file("base.json");
  std::ofstream(path) << R"({"resnet50": {"1n1g": {"average_speed": 330, "median_speed": 330.5,
                            "batch_size_per_device": 32, "speedup": 1}}})";
  auto base = baseline_from_json(path);
  ASSERT_EQ(base.size(), 1u);
  EXPECT_DOUBLE_EQ(base[0].median, 330.5);
  std::ofstream(path, std::ios::trunc) << "{\"resnet50\": [1, 2";
  EXPECT_THROW(baseline_from_json(path), Error);
}

TEST(ReduceOutputs, ReferenceMatchesFamilyPrecisionAndScale) {
  ReferenceTable t = load_reference(DLPERF_SOURCE_DIR "/analysis/reference/dlperf_v100_published.csv");
  ASSERT_GT(t.size(), 100u);
  ConfigKey key{"resnet50", "fp32", "cuda", "", 128};
  auto m = match_reference(t, key, 4, 8);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->system, "mxnet-gluoncv");  // first equal-batch, variant-less resnet50 fp32 4n8g row
  EXPECT_DOUBLE_EQ(m->samples_per_s, 9579.74);
  EXPECT_FALSE(match_reference(t, ConfigKey{"gpt2", "fp32", "cuda", "", 8}, 1, 1));
  // TF32 is fp32 training on Ampere and later: DLPerf's FP32 row, not its AMP one.
  auto tf32 = match_reference(t, ConfigKey{"resnet50", "tf32", "cuda", "", 128}, 4, 8);
  ASSERT_TRUE(tf32);
  EXPECT_DOUBLE_EQ(tf32->samples_per_s, 9579.74);
}

}  // namespace
}  // namespace dlperf::analysis
