// Exact configurations and honest plots (issue 18 row 3, issue 15 item 5):
//  * runs that differ in any setting that changes the work (image size, sequence length,
//    reduced-network sizes, the machine, ...) are separate groups, each titled with what
//    tells it apart, never one median of unlike runs;
//  * CPU-backend ranks are not called GPUs;
//  * the SVG's ideal line is linear scaling on the log2 device axis (a curve there, not a
//    straight line), and value axes have round ticks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "analysis_test_util.h"
#include "reduce.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

using test::run_at;

std::string markdown(const std::vector<RunRecord>& runs) {
  std::ostringstream os;
  write_markdown(os, reduce_runs(runs, MethodOptions{}), MethodOptions{}, ReportOptions{});
  return os.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReduceGroups, DifferentImageSizesAreDifferentConfigurations) {
  RunRecord small = run_at("resnet50", 1, 1, 0.1), large = run_at("resnet50", 1, 1, 0.3);
  small.info.image_size = 32;
  large.info.image_size = 96;
  const std::string md = markdown({small, large, small});
  EXPECT_EQ(count(md, "\n## resnet50"), 2u) << md;  // two tables, not one median of unlike runs
  EXPECT_NE(md.find("## resnet50 · fp32 · batch 32/device · cpu · image-size 32\n"), std::string::npos) << md;
  EXPECT_NE(md.find("## resnet50 · fp32 · batch 32/device · cpu · image-size 96\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 1 | 32 | 320.00 |"), std::string::npos) << md;   // 2 runs at 32x32, step 0.1
  EXPECT_NE(md.find("| 1 | 1 | 32 | 106.67 |"), std::string::npos) << md;   // 1 run at 96x96, step 0.3
  EXPECT_EQ(md.find("noisy group"), std::string::npos) << md;
}

TEST(ReduceGroups, SequenceLengthSettingsAndMachineSplitGroups) {
  RunRecord a = run_at("bert_base", 1, 1, 0.1);
  a.info.seq_len = 128;
  RunRecord b = a, c = a, d = a, e = a;
  b.info.seq_len = 512;
  c.info.settings = {"bert-layers=2"};  // a reduced network, recorded only among the settings
  d.info.cpu_model = "another CPU";
  RunRecord f = a;
  f.info.cpu_isa = "avx2";              // ONEDNN_MAX_CPU_ISA lowered: other kernels, other speed
  e.info.hosts = {"other-node"};        // where a run ran does not change what it measured
  e.info.repeat_index = 3;
  Reduction r = reduce_runs({a, b, c, d, e, f}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 5u);
  std::set<std::string> labels;
  for (const auto& cfg : r.configs) labels.insert(cfg.label);
  EXPECT_EQ(labels.size(), 5u);  // labels key the JSON and CSV: they must differ too
  EXPECT_TRUE(labels.count("bert_base_fp32_b32_cpu_cpu=another-CPU_seq-len=128")) << *labels.begin();
  EXPECT_TRUE(labels.count("bert_base_fp32_b32_cpu_cpu_isa=avx2_seq-len=128"));
  EXPECT_TRUE(labels.count("bert_base_fp32_b32_cpu_bert-layers=2_seq-len=128"));
  size_t two_runs = 0;
  for (const auto& cfg : r.configs) two_runs += cfg.points[0].stats.runs == 2;
  EXPECT_EQ(two_runs, 1u);  // a and e
}

TEST(ReduceGroups, BookkeepingSettingsDoNotSplitGroups) {
  RunRecord a = run_at("resnet50", 1, 1, 0.1), b = a;
  a.info.settings = {"image-size=224", "output=a.h5", "repeat-index=0", "seed=1", "iterations=120"};
  b.info.settings = {"image-size=224", "output=b.h5", "repeat-index=1", "seed=2", "iterations=200"};
  Reduction r = reduce_runs({a, b}, MethodOptions{});
  ASSERT_EQ(r.configs.size(), 1u);
  EXPECT_EQ(r.configs[0].points[0].stats.runs, 2u);
  EXPECT_EQ(r.configs[0].label, "resnet50_fp32_b32_cpu");  // nothing to tell apart: the plain label
}

TEST(ReduceLabels, CpuRanksAreNotGpus) {
  const std::string cpu = markdown({run_at("resnet50", 1, 2, 0.1)});
  EXPECT_NE(cpu.find("| node_num | rank_num | batch_size_per_device |"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("gpu_num"), std::string::npos) << cpu;
  RunRecord gpu = run_at("resnet50", 1, 2, 0.1);
  gpu.info.backend = "cuda";
  const std::string md = markdown({gpu});
  EXPECT_NE(md.find("| node_num | gpu_num | batch_size_per_device |"), std::string::npos) << md;
}

// ---- the SVG plot ----------------------------------------------------------------------------

struct Tick {
  double pos, value;
};

// Ticks of the plot: (x, label) under the device axes and (y, label) beside the value axes,
// each list in document order (left panel first).
void ticks(const std::string& svg, std::vector<Tick>& x, std::vector<Tick>& y) {
  static const std::regex xt("<text x='([0-9.]+)' y='[0-9.]+' text-anchor='middle' font-size='11'>([0-9.]+)</text>");
  static const std::regex yt("<text x='[0-9.]+' y='([0-9.]+)' text-anchor='end' font-size='11'>([0-9.]+)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), xt), end; it != end; ++it) x.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  for (std::sregex_iterator it(svg.begin(), svg.end(), yt), end; it != end; ++it)
    y.push_back({std::stod((*it)[1]) - 4, std::stod((*it)[2])});  // labels sit 4 px below their grid line
}

// The points of every dashed polyline (the ideal lines), in document order.
std::vector<std::vector<std::pair<double, double>>> dashed_lines(const std::string& svg) {
  static const std::regex line("<polyline [^>]*stroke-dasharray[^>]* points='([^']*)'");
  std::vector<std::vector<std::pair<double, double>>> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), end; it != end; ++it) {
    std::istringstream pts((*it)[1]);
    std::vector<std::pair<double, double>> v;
    double px = 0, py = 0;
    char comma = 0;
    while (pts >> px >> comma >> py) v.emplace_back(px, py);
    out.push_back(v);
  }
  return out;
}

// y of the drawn polyline at x (linear between its vertices, as the SVG renders it).
double drawn_at(const std::vector<std::pair<double, double>>& pts, double x) {
  for (size_t i = 1; i < pts.size(); ++i)
    if (pts[i - 1].first <= x + 1e-6 && x <= pts[i].first + 1e-6) {
      const double f = (x - pts[i - 1].first) / std::max(1e-9, pts[i].first - pts[i - 1].first);
      return pts[i - 1].second + f * (pts[i].second - pts[i - 1].second);
    }
  ADD_FAILURE() << "x " << x << " outside the line";
  return 0;
}

std::string svg_1_to_4_devices() {
  std::ostringstream os;
  write_svg(os, reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 4, 0.1)}, MethodOptions{}));
  return os.str();
}

// Right panel (speedup): device ticks are the last x ticks, value ticks the y ticks whose label
// x is the largest (the right panel's axis).
std::vector<Tick> right_value_ticks(const std::string& svg) {
  static const std::regex yt("<text x='([0-9.]+)' y='([0-9.]+)' text-anchor='end' font-size='11'>([0-9.]+)</text>");
  std::vector<std::pair<double, Tick>> all;
  for (std::sregex_iterator it(svg.begin(), svg.end(), yt), end; it != end; ++it)
    all.push_back({std::stod((*it)[1]), {std::stod((*it)[2]) - 4, std::stod((*it)[3])}});
  double right_x = 0;
  for (const auto& [x, t] : all) right_x = std::max(right_x, x);
  std::vector<Tick> out;
  for (const auto& [x, t] : all)
    if (x == right_x) out.push_back(t);
  return out;
}

// Issue 27 item 7: log2 device axis and log value axes, so ideal scaling is a straight line,
// drawn through its true values: speedup 2 at 2 devices, sqrt(2) half-way on the log axis.
TEST(ReduceSvg, IdealLineIsLinearScalingOnLogAxes) {
  const std::string svg = svg_1_to_4_devices();
  std::vector<Tick> x, y;
  ticks(svg, x, y);
  ASSERT_GE(x.size(), 6u) << svg;
  const Tick one = x[x.size() - 3], two = x[x.size() - 2], four = x.back();
  ASSERT_EQ(one.value, 1);
  ASSERT_EQ(two.value, 2);
  ASSERT_EQ(four.value, 4);
  EXPECT_NEAR(two.pos - one.pos, four.pos - two.pos, 0.5);  // log2 axis: equal steps per doubling
  const std::vector<Tick> right = right_value_ticks(svg);
  ASSERT_GE(right.size(), 3u) << svg;
  // Powers of two, equally spaced: a log2 value axis.
  for (size_t i = 1; i < right.size(); ++i) {
    EXPECT_DOUBLE_EQ(right[i].value, 2 * right[i - 1].value);
    EXPECT_NEAR(right[i - 1].pos - right[i].pos, right[0].pos - right[1].pos, 0.05);
  }
  const double px_per_doubling = right[0].pos - right[1].pos;
  const auto value_of = [&](double py) { return right[0].value * std::exp2((right[0].pos - py) / px_per_doubling); };
  const auto lines = dashed_lines(svg);
  ASSERT_GE(lines.size(), 2u) << svg;
  const auto& ideal_speedup = lines[0];  // drawn first, before the configurations' lines
  EXPECT_NEAR(value_of(drawn_at(ideal_speedup, one.pos)), 1, 0.02);
  EXPECT_NEAR(value_of(drawn_at(ideal_speedup, two.pos)), 2, 0.02);
  EXPECT_NEAR(value_of(drawn_at(ideal_speedup, four.pos)), 4, 0.04);
  EXPECT_NEAR(value_of(drawn_at(ideal_speedup, (one.pos + two.pos) / 2)), std::sqrt(2.0), 0.02);
  // Every axis says its scale.
  EXPECT_NE(svg.find("CPU-backend ranks, log2 scale"), std::string::npos);
  EXPECT_NE(svg.find("samples/s (median), log scale"), std::string::npos);
  EXPECT_NE(svg.find("speedup, log2 scale"), std::string::npos);
}

// 8 devices as 1n8 and as 2n4: the line went 1n8 -> 2n4 -> 2n8, a vertical jog at 8. It now
// takes the fewest nodes per device count; 2n4 is a hollow marker, and the legend says so.
TEST(ReduceSvg, TheSameDevicesOverMoreNodesAreOffTheLine) {
  std::ostringstream os;
  write_svg(os, reduce_runs({run_at("resnet50", 1, 1, 0.1), run_at("resnet50", 1, 8, 0.1), run_at("resnet50", 2, 4, 0.12),
                             run_at("resnet50", 2, 8, 0.1)},
                            MethodOptions{}));
  const std::string svg = os.str();
  static const std::regex solid("<polyline fill='none' stroke='#1f77b4' stroke-width='2' points='([^']*)'");
  std::vector<size_t> vertices;
  for (std::sregex_iterator it(svg.begin(), svg.end(), solid), end; it != end; ++it) {
    std::istringstream pts((*it)[1]);
    double px = 0, py = 0;
    char comma = 0;
    size_t n = 0;
    while (pts >> px >> comma >> py) ++n;
    vertices.push_back(n);
  }
  EXPECT_EQ(vertices, (std::vector<size_t>{3, 3})) << svg;  // throughput and speedup: 1, 8, 16 devices
  static const std::regex hollow("<circle [^>]*fill='white' stroke='#1f77b4'");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), hollow), std::sregex_iterator()), 2) << svg;
  EXPECT_NE(svg.find("hollow: the same devices over more nodes"), std::string::npos);
  EXPECT_EQ(svg_1_to_4_devices().find("hollow:"), std::string::npos);
}

// Eight colours: the ninth configuration takes the first colour again, with square markers (in
// the plot and its legend entry), so it is not drawn as the first one.
TEST(ReduceSvg, ANinthConfigurationHasItsOwnMarker) {
  std::vector<RunRecord> runs;
  for (int v = 0; v < 9; ++v)
    for (int n : {1, 2}) {
      RunRecord r = run_at("resnet50", 1, n, 0.1);
      r.info.variant = "v" + std::to_string(v);
      runs.push_back(r);
    }
  std::ostringstream os;
  write_svg(os, reduce_runs(runs, MethodOptions{}));
  const std::string svg = os.str();
  const auto count = [&](const char* pattern) {
    const std::regex re(pattern);
    return std::distance(std::sregex_iterator(svg.begin(), svg.end(), re), std::sregex_iterator());
  };
  // 2 points x 2 panels + 1 legend marker each: circles for the first, squares for the ninth.
  EXPECT_EQ(count("<circle [^>]*fill='#1f77b4'"), 5) << svg;
  EXPECT_EQ(count("<rect [^>]*fill='#1f77b4' stroke='#1f77b4'"), 5) << svg;
  EXPECT_EQ(count("<rect [^>]*fill='#d62728'"), 0) << svg;
}

TEST(ReduceSvg, ValueTicksAreOneTwoFiveDecadesAndTheIdealIsInTheSeriesColour) {
  // ResNet-50 at 320 samples/s per rank and VGG16 ten times slower: on a log axis both keep
  // their shape (VGG16 no longer lies flat under ResNet-50).
  std::vector<RunRecord> runs;
  for (int n : {1, 2, 4, 8}) {
    runs.push_back(run_at("resnet50", 1, n, 0.1));
    runs.push_back(run_at("vgg16", 1, n, 1.0 + 0.05 * n));
  }
  std::ostringstream os;
  write_svg(os, reduce_runs(runs, MethodOptions{}));
  const std::string svg = os.str();
  std::vector<Tick> x, y;
  ticks(svg, x, y);
  const std::vector<Tick> right = right_value_ticks(svg);
  std::vector<Tick> left(y.begin(), y.end() - static_cast<long>(right.size()));
  ASSERT_GE(left.size(), 4u) << svg;
  for (const Tick& t : left) {
    const double mantissa = t.value / std::pow(10.0, std::floor(std::log10(t.value) + 1e-12));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9) << t.value;
  }
  EXPECT_LE(left.front().value, 32 / 1.05);   // VGG16 at 1 rank is inside the axis
  EXPECT_GE(left.back().value, 320 * 8);      // ResNet-50's ideal at 8 ranks too
  // A decade takes the same height wherever it is (1 -> 10 as 100 -> 1000).
  std::map<double, double> pos;
  for (const Tick& t : left) pos[t.value] = t.pos;
  ASSERT_TRUE(pos.count(100) && pos.count(1000) && pos.count(50) && pos.count(500)) << svg;
  EXPECT_NEAR(pos[50] - pos[500], pos[100] - pos[1000], 0.05);
  // Each configuration's ideal line is dashed in its own colour, as its legend entry shows.
  static const std::regex dashed("<polyline fill='none' stroke='(#[0-9a-f]{6})'[^>]*stroke-dasharray");
  std::set<std::string> colours;
  for (std::sregex_iterator it(svg.begin(), svg.end(), dashed), end; it != end; ++it) colours.insert((*it)[1]);
  EXPECT_TRUE(colours.count("#1f77b4") && colours.count("#d62728")) << svg;
  EXPECT_NE(svg.find("<line x1='88' y1='392' x2='102' y2='392' stroke='#1f77b4' stroke-dasharray='4,3'/>"), std::string::npos) << svg;
  // Rendered as a PNG by librsvg (rsvg-convert; Debian librsvg2-bin) when it is installed: the
  // file must be an SVG a real renderer draws. DLPERF_PLOT_OUT keeps it for a look.
  const char* keep = std::getenv("DLPERF_PLOT_OUT");
  const std::string base = keep ? keep : test::TempDir().path() + "-plot";
  { std::ofstream(base + ".svg") << svg; }
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") == 0) {
    const std::string cmd = "rsvg-convert -o '" + base + ".png' '" + base + ".svg'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream png(base + ".png", std::ios::binary);
    char magic[8] = {};
    png.read(magic, 8);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  }
  if (!keep) {
    std::remove((base + ".svg").c_str());
    std::remove((base + ".png").c_str());
  }
}

}  // namespace
}  // namespace dlperf::analysis
