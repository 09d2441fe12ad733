// Hand-written SVG scaling plot: left panel throughput (samples/s) against devices, right
// panel speedup against devices, both with the device axis in powers of two (log2) and a
// linear value axis, one colour per configuration, and ideal (linear) scaling from the
// 1-device median as a dashed line. On a log2 x axis with a linear y axis, y = a * devices
// is a curve, not a straight line: the ideal is drawn through many points (16 per doubling)
// so perfect scaling is not drawn as poor scaling. Value axes use round ticks (1, 2, 2.5
// or 5 x 10^k) from 0 to the first tick at or above the largest value.
#include <algorithm>
#include <cmath>
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

// A round step for an axis from 0 to `max` with about `intervals` intervals.
double nice_step(double max, int intervals) {
  const double raw = std::max(max, 1e-12) / intervals;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0})
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

// Digits after the point that show every multiple of `step` exactly (2.5 -> 1, 0.25 -> 2).
int step_digits(double step) {
  for (int d = 0; d < 10; ++d) {
    const double scaled = step * std::pow(10.0, d);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * scaled) return d;
  }
  return 10;
}

struct Panel {
  double x0, max_devices, step, max_y;
  Panel(double x, double devices, double largest) : x0(x), max_devices(devices), step(nice_step(largest, 5)) {
    max_y = std::max(step, std::ceil(largest / step - 1e-9) * step);
  }
  double px(double devices) const {
    const double span = std::max(1.0, std::log2(max_devices));
    return x0 + kPanelW * std::log2(std::max(1.0, devices)) / span;
  }
  double py(double y) const { return kMarginT + kPanelH * (1 - y / max_y); }
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
  const int digits = step_digits(p.step);
  const int ticks = static_cast<int>(std::lround(p.max_y / p.step));
  for (int k = 0; k <= ticks; ++k) {
    const double y = p.step * k;
    os << "<line x1='" << p.x0 << "' y1='" << p.py(y) << "' x2='" << p.x0 + kPanelW << "' y2='" << p.py(y)
       << "' stroke='#ddd'/><text x='" << p.x0 - 6 << "' y='" << p.py(y) + 4 << "' text-anchor='end' font-size='11'>"
       << fixed(y, digits) << "</text>\n";
  }
  os << "<text x='" << p.x0 + kPanelW / 2 << "' y='" << kMarginT + kPanelH + 36 << "' text-anchor='middle' font-size='12'>"
     << xlabel << "</text>\n";
  os << "<text transform='translate(" << p.x0 - 52 << ',' << kMarginT + kPanelH / 2
     << ") rotate(-90)' text-anchor='middle' font-size='12'>" << ylabel << "</text>\n";
}

void polyline(std::ostream& os, const std::vector<std::pair<double, double>>& pts, const Panel& p, const char* colour,
              bool dashed) {
  if (pts.empty()) return;
  os << "<polyline fill='none' stroke='" << colour << "' stroke-width='" << (dashed ? 1.2 : 2) << "'"
     << (dashed ? " stroke-dasharray='6,4'" : "") << " points='";
  for (const auto& [d, y] : pts) os << fixed(p.px(d), 2) << ',' << fixed(p.py(y), 2) << ' ';
  os << "'/>\n";
  if (!dashed)
    for (const auto& [d, y] : pts)
      os << "<circle cx='" << fixed(p.px(d), 1) << "' cy='" << fixed(p.py(y), 1) << "' r='3.5' fill='" << colour << "'/>\n";
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
  double max_devices = 1, max_tp = 1, max_speedup = 1;
  bool gpu = false, cpu = false;
  for (const auto& c : r.configs)
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      (c.key.backend == "cpu" ? cpu : gpu) = true;
      max_devices = std::max(max_devices, static_cast<double>(p.devices()));
      max_tp = std::max(max_tp, p.stats.median);
      if (p.speedup) max_speedup = std::max(max_speedup, *p.speedup);
    }
  max_devices = std::exp2(std::ceil(std::log2(max_devices)));
  max_speedup = std::max(max_speedup, max_devices);  // the ideal line must fit
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.speedup && p.stats.runs > 0) max_tp = std::max(max_tp, p.stats.median / *p.speedup * max_devices);
  const Panel left(kMarginL, max_devices, max_tp), right(kMarginL + kPanelW + kGap, max_devices, max_speedup);
  const double width = 2 * kMarginL + 2 * kPanelW + kGap;
  const double height = kMarginT + kPanelH + 50 + kLegendH * (static_cast<double>(r.configs.size()) + 1);
  const std::string xlabel = gpu && cpu ? "devices (GPUs or CPU-backend ranks)" : cpu ? "CPU-backend ranks" : "GPUs";
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
     << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  axes(os, left, "Throughput", xlabel, "samples/s (median)");
  axes(os, right, "Speedup vs 1 device", xlabel, "speedup");
  polyline(os, ideal(1, max_devices), right, "#888", true);
  size_t k = 0;
  for (const auto& c : r.configs) {
    const char* colour = kColours[k % std::size(kColours)];
    std::vector<std::pair<double, double>> tp, sp;
    double one = 0;
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      tp.emplace_back(static_cast<double>(p.devices()), p.stats.median);
      if (p.speedup) {
        sp.emplace_back(static_cast<double>(p.devices()), *p.speedup);
        if (one == 0) one = p.stats.median / *p.speedup;
      }
    }
    if (one > 0) polyline(os, ideal(one, max_devices), left, colour, true);
    polyline(os, tp, left, colour, false);
    polyline(os, sp, right, colour, false);
    const double ly = kMarginT + kPanelH + 50 + kLegendH * static_cast<double>(k);
    os << "<rect x='" << kMarginL << "' y='" << ly << "' width='14' height='4' fill='" << colour << "'/><text x='"
       << kMarginL + 20 << "' y='" << ly + 6 << "' font-size='12'>" << xml_text(c.title) << "</text>\n";
    ++k;
  }
  const double ly = kMarginT + kPanelH + 50 + kLegendH * static_cast<double>(k);
  os << "<line x1='" << kMarginL << "' y1='" << ly + 2 << "' x2='" << kMarginL + 14 << "' y2='" << ly + 2
     << "' stroke='#888' stroke-dasharray='4,3'/><text x='" << kMarginL + 20 << "' y='" << ly + 6
     << "' font-size='12'>ideal linear scaling from the 1-device median</text>\n</svg>\n";
}

}  // namespace dlperf::analysis
