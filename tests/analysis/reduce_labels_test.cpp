// Labels that cannot mislead (issue 27 item 5): a setting that differs from the benchmark its
// model names (image size, sequence length, network sizes, data source) is in the group
// heading, the CSV settings column, the JSON key and the plot legend even when it is the only
// configuration; reduced networks and reference kernels get a note; --reference sets the
// published DLPerf figures only beside the same workload, and says why otherwise.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis_test_util.h"
#include "comparable.h"
#include "reduce.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

using test::run_at;

RunRecord resnet(int64_t image_size, std::vector<std::string> settings = {}) {
  RunRecord r = run_at("resnet50", 1, 1, 0.1);
  r.info.image_size = image_size;
  r.info.num_classes = 1000;
  r.info.data_source = "synthetic";
  r.info.settings = std::move(settings);
  return r;
}

struct Outputs {
  std::string md, csv, json, svg;
};
Outputs outputs(const std::vector<RunRecord>& runs, const ReferenceTable* reference = nullptr) {
  const Reduction r = reduce_runs(runs, MethodOptions{});
  ReportOptions opt;
  opt.reference = reference;
  std::ostringstream md, csv, json, svg;
  write_markdown(md, r, MethodOptions{}, opt);
  write_csv(csv, r);
  write_json(json, r);
  write_svg(svg, r);
  return {md.str(), csv.str(), json.str(), svg.str()};
}

ReferenceTable v100() { return {{"V100 (DLPerf)", "resnet50", "fp32", "", 32, 1, 1, 400.0, std::nullopt}}; }

TEST(ReduceLabels, ANonStandardImageSizeIsShownEvenAlone) {
  const Outputs o = outputs({resnet(128)});
  EXPECT_NE(o.md.find("## resnet50 · fp32 · batch 32/device · cpu · image-size 128\n"), std::string::npos) << o.md;
  EXPECT_NE(o.csv.find("resnet50_fp32_b32_cpu_image-size=128,"), std::string::npos) << o.csv;
  EXPECT_NE(o.csv.find(",image-size=128,"), std::string::npos) << o.csv;  // the settings column
  EXPECT_NE(o.json.find("\"resnet50_fp32_b32_cpu_image-size=128\""), std::string::npos) << o.json;
  EXPECT_NE(o.svg.find("image-size 128"), std::string::npos) << o.svg;  // the legend
  // The benchmark's own settings add nothing to the label.
  const Outputs s = outputs({resnet(224)});
  EXPECT_NE(s.md.find("## resnet50 · fp32 · batch 32/device · cpu\n"), std::string::npos) << s.md;
  EXPECT_NE(s.json.find("\"resnet50_fp32_b32_cpu\""), std::string::npos) << s.json;
}

TEST(ReduceLabels, ReducedNetworksAndDataSourcesAreShownAndNoted) {
  RunRecord tiny = resnet(224, {"resnet-width=8", "resnet-blocks=1,1,1,1", "threads=1"});
  RunRecord real = resnet(224, {"threads=1"});
  real.info.data_source = "tar";
  const Outputs o = outputs({tiny, real});
  EXPECT_NE(o.md.find("## resnet50 · fp32 · batch 32/device · cpu · data synthetic · resnet-blocks 1,1,1,1 · resnet-width 8\n"),
            std::string::npos)
      << o.md;
  EXPECT_NE(o.md.find("## resnet50 · fp32 · batch 32/device · cpu · data tar"), std::string::npos) << o.md;
  EXPECT_NE(o.md.find("trains a reduced network (resnet-blocks 1,1,1,1 (benchmark: 3,4,6,3), resnet-width 8 (benchmark: 64))"),
            std::string::npos)
      << o.md;
  EXPECT_EQ(o.md.find("threads 1"), std::string::npos) << o.md;  // not a workload difference, and not differing here
}

TEST(ReduceLabels, ReferenceKernelsAreNoted) {
  RunRecord r = resnet(224);
  r.kernels = {{"conv1", "forward", "(32, 3, 224, 224) f32", "brg_conv_fwd:avx512_core"},
               {"layer1.0.conv2", "forward", "(32, 64, 56, 56) f32", "ref:any"}};
  const Outputs o = outputs({r, resnet(224)});
  EXPECT_NE(o.md.find("warning: resnet50_fp32_b32_cpu: 1 measured run(s) planned reference kernels (first: layer1.0.conv2 forward "
                      "(32, 64, 56, 56) f32 ref:any)"),
            std::string::npos)
      << o.md;
  EXPECT_TRUE(is_reference_kernel({"c", "forward", "", "cudnn engine 3 [no tensor cores]"}, "fp16"));
  EXPECT_FALSE(is_reference_kernel({"c", "forward", "", "cudnn engine 3 [no tensor cores]"}, "fp32"));
}

TEST(ReduceLabels, PublishedFiguresOnlyBesideTheSameWorkload) {
  const ReferenceTable t = v100();
  const Outputs same = outputs({resnet(224)}, &t);
  EXPECT_NE(same.md.find("| 1 | 1 | 32 | 320.00 | 1.00 | 100.0% | 400.00 (V100 (DLPerf)) |  | 0.80 |"), std::string::npos) << same.md;
  const Outputs small = outputs({resnet(128)}, &t);
  EXPECT_EQ(small.md.find("V100 samples/s"), std::string::npos) << small.md;
  EXPECT_EQ(small.md.find("measured/V100"), std::string::npos) << small.md;
  EXPECT_NE(small.md.find("note: --reference: no published DLPerf figure beside resnet50_fp32_b32_cpu_image-size=128: not the "
                          "published workload (image-size 128 (benchmark: 224))"),
            std::string::npos)
      << small.md;
}

}  // namespace
}  // namespace dlperf::analysis
