// Baseline loading and matching for --compare (see compare.h).
#include "compare.h"

#include <fstream>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "format.h"
#include "json_lite.h"

namespace dlperf::analysis {
namespace {
std::string point_name(const ScalePoint& p) {
  return std::to_string(p.nodes) + "n" + std::to_string(p.devices_per_node) + "g";
}
}  // namespace

std::vector<BaselinePoint> baseline_from_reduction(const Reduction& r) {
  std::vector<BaselinePoint> out;
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.stats.runs > 0) out.push_back({c.key.label(), point_name(p), p.stats.median, c.key.batch_per_device});
  return out;
}

std::vector<BaselinePoint> baseline_from_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_usage_error(path + ": cannot read baseline");
  std::stringstream ss;
  ss << in.rdbuf();
  JsonValue root = parse_json(ss.str(), path);
  if (root.kind != JsonValue::Kind::object) throw_usage_error(path + ": baseline JSON is not an object of models");
  std::vector<BaselinePoint> out;
  for (const auto& [key, points] : root.object) {
    if (points.kind != JsonValue::Kind::object) continue;
    for (const auto& [name, v] : points.object) {
      if (v.kind != JsonValue::Kind::object) continue;
      auto median = v.object.find("median_speed");
      if (median == v.object.end()) median = v.object.find("average_speed");
      if (median == v.object.end() || median->second.kind != JsonValue::Kind::number) continue;
      BaselinePoint b{key, name, median->second.number, 0};
      auto batch = v.object.find("batch_size_per_device");
      if (batch != v.object.end() && batch->second.kind == JsonValue::Kind::number)
        b.batch_per_device = static_cast<int64_t>(batch->second.number);
      out.push_back(b);
    }
  }
  if (out.empty()) throw_usage_error(path + ": no {model: {\"NnMg\": {\"median_speed\": ...}}} entries in baseline JSON");
  return out;
}

std::vector<Comparison> compare(const Reduction& measured, const std::vector<BaselinePoint>& baseline, double tolerance) {
  std::vector<Comparison> rows;
  for (const auto& c : measured.configs)
    for (const auto& p : c.points) {
      if (p.stats.runs == 0) continue;
      const std::string name = point_name(p);
      const BaselinePoint* match = nullptr;
      for (const auto& b : baseline)
        if (b.point == name && b.key == c.key.label()) match = &b;
      if (!match)
        for (const auto& b : baseline)
          if (b.point == name && b.key == c.key.model &&
              (b.batch_per_device == 0 || b.batch_per_device == c.key.batch_per_device))
            match = &b;
      if (!match || match->median <= 0) continue;
      Comparison row{c.key.label(), name, p.stats.median, match->median, p.stats.median / match->median, false};
      row.regression = row.ratio < tolerance;
      rows.push_back(row);
    }
  return rows;
}

void write_comparison(std::ostream& os, const std::vector<Comparison>& rows, double tolerance) {
  os << "\n## Comparison with baseline (regression when measured/baseline < " << fixed(tolerance, 3) << ")\n\n"
     << "| config | point | measured samples/s | baseline samples/s | ratio | verdict |\n|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    os << "| " << r.config << " | " << r.point << " | " << fixed(r.measured, 2) << " | " << fixed(r.baseline, 2) << " | "
       << fixed(r.ratio, 3) << " | " << (r.regression ? "REGRESSION" : "ok") << " |\n";
}

}  // namespace dlperf::analysis
