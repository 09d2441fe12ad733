// Hand-written SVG scaling plot: left panel throughput (samples/s) against devices, right
// panel speedup against devices. Both axes of both panels are logarithmic (issue 27 item 7):
// devices in powers of two (log2), throughput in decades with 1-2-5 ticks, speedup in powers
// of two. So configurations of very different speeds (VGG16 beside ResNet-50) each keep their
// shape instead of one lying flat under the other, and ideal linear scaling (y = a * devices)
// is a straight line at 45 degrees of decades, easy to read against. Each configuration has one
// colour, its measured line solid and its ideal line, from its 1-device median, dashed in the
// same colour; the speedup panel's one ideal (y = devices) is grey. Every axis says its scale.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>
#include <ostream>

#include "format.h"
#include "report.h"

namespace dlperf::analysis {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr double kPanelW = 420, kPanelH = 300, kMarginL = 70, kMarginT = 40, kGap = 90, kLegendH = 22;
constexpr int kIdealPointsPerDoubling = 16;

std::string xml_text(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else out += ch;
  }
  return out;
}

// A logarithmic value axis: base 10 with ticks at 1, 2 and 5 x 10^k, or base 2 with ticks at
// powers of two; from the tick at or below the smallest value to the one at or above the
// largest.
struct ValueAxis {
  bool base2 = false;
  double lo = 1, hi = 10;
  std::vector<double> ticks;
  ValueAxis(double smallest, double largest, bool two) : base2(two) {
    smallest = std::max(smallest, 1e-9);
    largest = std::max(largest, smallest * (two ? 2 : 10));
    std::vector<double> candidates;
    if (two) {
      for (int e = static_cast<int>(std::floor(std::log2(smallest))) - 1; e <= static_cast<int>(std::ceil(std::log2(largest))) + 1; ++e)
        candidates.push_back(std::exp2(e));
    } else {
      for (int e = static_cast<int>(std::floor(std::log10(smallest))) - 1; e <= static_cast<int>(std::ceil(std::log10(largest))) + 1; ++e)
        for (double m : {1.0, 2.0, 5.0}) candidates.push_back(m * std::pow(10.0, e));
    }
    std::sort(candidates.begin(), candidates.end());
    lo = candidates.front();
    hi = candidates.back();
    for (double c : candidates)
      if (c <= smallest * (1 + 1e-9)) lo = c;
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it)
      if (*it >= largest * (1 - 1e-9)) hi = *it;
    for (double c : candidates)
      if (c >= lo * (1 - 1e-9) && c <= hi * (1 + 1e-9)) ticks.push_back(c);
  }
  double fraction(double y) const { return (std::log(std::max(y, 1e-12)) - std::log(lo)) / (std::log(hi) - std::log(lo)); }
};

// Digits that show a tick value exactly (500 -> 0, 0.5 -> 1, 0.25 -> 2).
int value_digits(double v) {
  for (int d = 0; d < 10; ++d) {
    const double scaled = v * std::pow(10.0, d);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
  }
  return 10;
}

struct Panel {
  double x0, max_devices;
  ValueAxis y;
  Panel(double x, double devices, ValueAxis axis) : x0(x), max_devices(devices), y(std::move(axis)) {}
  double px(double devices) const {
    const double span = std::max(1.0, std::log2(max_devices));
    return x0 + kPanelW * std::log2(std::max(1.0, devices)) / span;
  }
  double py(double v) const { return kMarginT + kPanelH * (1 - y.fraction(v)); }
};

void axes(std::ostream& os, const Panel& p, const std::string& title, const std::string& xlabel, const std::string& ylabel) {
  os << "<rect x='" << p.x0 << "' y='" << kMarginT << "' width='" << kPanelW << "' height='" << kPanelH
     << "' fill='none' stroke='#444'/>\n";
  os << "<text x='" << p.x0 + kPanelW / 2 << "' y='" << kMarginT - 14 << "' text-anchor='middle' font-size='15' font-weight='bold'>"
     << title << "</text>\n";
  for (double d = 1; d <= p.max_devices; d *= 2)
    os << "<line x1='" << p.px(d) << "' y1='" << kMarginT + kPanelH << "' x2='" << p.px(d) << "' y2='"
       << kMarginT + kPanelH + 5 << "' stroke='#444'/><text x='" << p.px(d) << "' y='" << kMarginT + kPanelH + 18
       << "' text-anchor='middle' font-size='11'>" << d << "</text>\n";
  for (double v : p.y.ticks)
    os << "<line x1='" << p.x0 << "' y1='" << fixed(p.py(v), 2) << "' x2='" << p.x0 + kPanelW << "' y2='" << fixed(p.py(v), 2)
       << "' stroke='#ddd'/><text x='" << p.x0 - 6 << "' y='" << fixed(p.py(v) + 4, 2) << "' text-anchor='end' font-size='11'>"
       << fixed(v, value_digits(v)) << "</text>\n";
  os << "<text x='" << p.x0 + kPanelW / 2 << "' y='" << kMarginT + kPanelH + 36 << "' text-anchor='middle' font-size='12'>"
     << xlabel << "</text>\n";
  os << "<text transform='translate(" << p.x0 - 52 << ',' << kMarginT + kPanelH / 2
     << ") rotate(-90)' text-anchor='middle' font-size='12'>" << ylabel << "</text>\n";
}

// One point's marker: a circle, a square or a diamond (shape 0, 1, 2: the colours' first, second
// and third rounds, so that a ninth configuration is not drawn as the first).
void marker(std::ostream& os, double x, double y, double r, const char* fill, const char* colour, int shape) {
  if (shape == 0) {
    os << "<circle cx='" << fixed(x, 1) << "' cy='" << fixed(y, 1) << "' r='" << r << "'";
  } else if (shape == 1) {
    os << "<rect x='" << fixed(x - r, 1) << "' y='" << fixed(y - r, 1) << "' width='" << 2 * r << "' height='" << 2 * r << "'";
  } else {
    const double d = r * 1.3;
    os << "<polygon points='" << fixed(x, 1) << ',' << fixed(y - d, 1) << ' ' << fixed(x + d, 1) << ',' << fixed(y, 1) << ' ' << fixed(x, 1)
       << ',' << fixed(y + d, 1) << ' ' << fixed(x - d, 1) << ',' << fixed(y, 1) << "'";
  }
  os << " fill='" << fill << "' stroke='" << colour << "' stroke-width='1.5'/>\n";
}

void polyline(std::ostream& os, const std::vector<std::pair<double, double>>& pts, const Panel& p, const char* colour,
              bool dashed, int shape = 0) {
  if (pts.empty()) return;
  os << "<polyline fill='none' stroke='" << colour << "' stroke-width='" << (dashed ? 1.2 : 2) << "'"
     << (dashed ? " stroke-dasharray='6,4'" : "") << " points='";
  for (const auto& [d, y] : pts) os << fixed(p.px(d), 2) << ',' << fixed(p.py(y), 2) << ' ';
  os << "'/>\n";
  if (!dashed)
    for (const auto& [d, y] : pts) marker(os, p.px(d), p.py(y), 3.5, colour, colour, shape);
}

// Points off the line: hollow markers.
void markers(std::ostream& os, const std::vector<std::pair<double, double>>& pts, const Panel& p, const char* colour, int shape) {
  for (const auto& [d, y] : pts) marker(os, p.px(d), p.py(y), 4, "white", colour, shape);
}

// y = one * devices from 1 to max_devices, sampled evenly on the log2 axis.
std::vector<std::pair<double, double>> ideal(double one, double max_devices) {
  std::vector<std::pair<double, double>> pts;
  const int n = static_cast<int>(std::lround(std::log2(max_devices))) * kIdealPointsPerDoubling;
  for (int k = 0; k <= n; ++k) {
    const double d = std::exp2(static_cast<double>(k) / kIdealPointsPerDoubling);
    pts.emplace_back(d, one * d);
  }
  return pts;
}

}  // namespace

void write_svg(std::ostream& os, const Reduction& r) {
  double max_devices = 1, min_tp = 0, max_tp = 1, min_speedup = 1, max_speedup = 1;
  bool gpu = false, cpu = false;
  for (const auto& c : r.configs)
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      (c.key.backend == "cpu" ? cpu : gpu) = true;
      max_devices = std::max(max_devices, static_cast<double>(p.devices()));
      min_tp = min_tp == 0 ? p.stats.median : std::min(min_tp, p.stats.median);
      max_tp = std::max(max_tp, p.stats.median);
      if (p.speedup) max_speedup = std::max(max_speedup, *p.speedup), min_speedup = std::min(min_speedup, *p.speedup);
    }
  max_devices = std::exp2(std::ceil(std::log2(max_devices)));
  max_speedup = std::max(max_speedup, max_devices);  // the ideal line must fit
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.speedup && p.stats.runs > 0) max_tp = std::max(max_tp, p.stats.median / *p.speedup * max_devices);
  const Panel left(kMarginL, max_devices, ValueAxis(min_tp > 0 ? min_tp : 1, max_tp, false));
  const Panel right(kMarginL + kPanelW + kGap, max_devices, ValueAxis(min_speedup, max_speedup, true));
  const double width = 2 * kMarginL + 2 * kPanelW + kGap;
  const double height = kMarginT + kPanelH + 50 + kLegendH * (static_cast<double>(r.configs.size()) + 2);  // + the ideal's and hollow markers' lines
  const std::string devices = gpu && cpu ? "devices (GPUs or CPU-backend ranks)" : cpu ? "CPU-backend ranks" : "GPUs";
  const std::string xlabel = devices + ", log2 scale";
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
     << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  axes(os, left, "Throughput", xlabel, "samples/s (median), log scale");
  axes(os, right, "Speedup vs 1 device", xlabel, "speedup, log2 scale");
  polyline(os, ideal(1, max_devices), right, "#888", true);
  size_t k = 0;
  bool alternate_layouts = false;
  for (const auto& c : r.configs) {
    const char* colour = kColours[k % std::size(kColours)];
    const int shape = static_cast<int>(k / std::size(kColours) % 3);
    // The line runs through one point per device count, the one on the fewest nodes (points are
    // ordered by devices, then nodes); the same devices over more nodes (2n4 beside 1n8) are
    // hollow markers, not a vertical jog of the line.
    std::vector<std::pair<double, double>> tp, sp, tp_off, sp_off;
    double one = 0;
    int64_t last_devices = 0;
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      const bool on_line = p.devices() != last_devices;
      last_devices = p.devices();
      (on_line ? tp : tp_off).emplace_back(static_cast<double>(p.devices()), p.stats.median);
      if (p.speedup) {
        (on_line ? sp : sp_off).emplace_back(static_cast<double>(p.devices()), *p.speedup);
        if (one == 0) one = p.stats.median / *p.speedup;
      }
    }
    alternate_layouts = alternate_layouts || !tp_off.empty();
    if (one > 0) polyline(os, ideal(one, max_devices), left, colour, true);
    polyline(os, tp, left, colour, false, shape);
    polyline(os, sp, right, colour, false, shape);
    markers(os, tp_off, left, colour, shape);
    markers(os, sp_off, right, colour, shape);
    // The legend shows both of the configuration's lines, in its colour.
    const double ly = kMarginT + kPanelH + 50 + kLegendH * static_cast<double>(k);
    os << "<line x1='" << kMarginL << "' y1='" << ly + 2 << "' x2='" << kMarginL + 14 << "' y2='" << ly + 2 << "' stroke='" << colour
       << "' stroke-width='3'/><line x1='" << kMarginL + 18 << "' y1='" << ly + 2 << "' x2='" << kMarginL + 32 << "' y2='" << ly + 2
       << "' stroke='" << colour << "' stroke-dasharray='4,3'/><text x='" << kMarginL + 38 << "' y='" << ly + 6
       << "' font-size='12'>" << xml_text(c.title) << "</text>\n";
    marker(os, kMarginL + 7, ly + 2, 3.5, colour, colour, shape);  // the legend shows the point's shape too
    ++k;
  }
  const double ly = kMarginT + kPanelH + 50 + kLegendH * static_cast<double>(k);
  os << "<line x1='" << kMarginL + 18 << "' y1='" << ly + 2 << "' x2='" << kMarginL + 32 << "' y2='" << ly + 2
     << "' stroke='#888' stroke-dasharray='4,3'/><text x='" << kMarginL + 38 << "' y='" << ly + 6
     << "' font-size='12'>dashed: ideal linear scaling from the 1-device median (in each configuration's colour; grey: "
        "speedup = devices)</text>\n";
  if (alternate_layouts)
    os << "<circle cx='" << kMarginL + 25 << "' cy='" << ly + 2 + kLegendH << "' r='4' fill='white' stroke='#888' stroke-width='1.5'/><text x='"
       << kMarginL + 38 << "' y='" << ly + 6 + kLegendH
       << "' font-size='12'>hollow: the same devices over more nodes (off the line, which takes the fewest nodes)</text>\n";
  os << "</svg>\n";
}

}  // namespace dlperf::analysis
