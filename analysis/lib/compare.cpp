// Baseline loading and matching for --compare (see compare.h).
#include "compare.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>

#include "core/error.h"
#include "format.h"
#include "json_strict.h"

namespace dlperf::analysis {

std::string model_family(const std::string& name) {
  std::string n;
  for (char ch : name)
    if (std::isalnum(static_cast<unsigned char>(ch))) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // DLPerf's result files key the model as "rn50", "r50", "resnet50", "resnet50v1.5",
  // "bert-base-adam-training", "vgg16"; dlperf's as resnet50, bert_base, vgg16.
  if (n == "rn50" || n == "r50" || n.rfind("resnet50", 0) == 0) return "resnet50";
  if (n.rfind("vgg16", 0) == 0) return "vgg16";
  if (n.rfind("bert", 0) == 0 && n.find("large") == std::string::npos) return "bert_base";
  return name;
}

std::vector<BaselinePoint> baseline_from_reduction(const Reduction& r) {
  std::vector<BaselinePoint> out;
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.stats.runs > 0)
        out.push_back({c.label, point_name(c.key.backend, p.nodes, p.devices_per_node), p.stats.median, c.key.batch_per_device});
  return out;
}

std::vector<BaselinePoint> baseline_from_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_usage_error(path + ": cannot read baseline");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) throw_usage_error(path + ": cannot read baseline (is it a directory?)");
  const nlohmann::json root = parse_json_strict(ss.str(), path);
  if (!root.is_object()) throw_usage_error(path + ": baseline JSON is not an object of models");
  std::vector<BaselinePoint> out;
  for (const auto& [key, points] : root.items()) {
    if (!points.is_object()) continue;
    for (const auto& [name, v] : points.items()) {
      if (!v.is_object()) continue;
      auto median = v.find("median_speed");
      if (median == v.end()) median = v.find("average_speed");
      if (median == v.end() || !median->is_number()) continue;
      // A throughput of 0, a negative or an absurd one cannot be a baseline: it was dropped
      // without a word, and the point then went uncompared.
      const double speed = median->get<double>();
      if (!(std::isfinite(speed) && speed > 0 && speed < 1e12)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", speed);
        throw_usage_error(path + ": " + key + " " + name + ": " + median.key() + " " + text + " is not a throughput (samples/s above 0 and below 1e12)");
      }
      BaselinePoint b{key, name, speed, 0};
      auto batch = v.find("batch_size_per_device");
      if (batch != v.end() && batch->is_number()) b.batch_per_device = static_cast<int64_t>(batch->get<double>());
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
      const std::string name = point_name(c.key.backend, p.nodes, p.devices_per_node);
      const BaselinePoint* match = nullptr;
      for (const auto& b : baseline)
        if (b.point == name && b.key == c.label) match = &b;
      if (!match)  // a DLPerf result file: the model's name in any of DLPerf's spellings, same batch
        for (const auto& b : baseline)
          if (b.point == name && model_family(b.key) == model_family(c.key.model) &&
              (b.batch_per_device == 0 || b.batch_per_device == c.key.batch_per_device))
            match = &b;
      if (!match || !(match->median > 0)) {
        rows.push_back({c.label, name, p.stats.median, 0, 0, false, false});
        continue;
      }
      Comparison row{c.label, name, p.stats.median, match->median, p.stats.median / match->median, false, true};
      row.regression = row.ratio < tolerance;
      rows.push_back(row);
    }
  return rows;
}

void write_comparison(std::ostream& os, const std::vector<Comparison>& rows, double tolerance) {
  os << "\n## Comparison with baseline (regression when measured/baseline < " << fixed(tolerance, 3) << ")\n\n"
     << "| config | point | measured samples/s | baseline samples/s | ratio | verdict |\n|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    if (r.matched)
      os << "| " << r.config << " | " << r.point << " | " << fixed(r.measured, 2) << " | " << fixed(r.baseline, 2) << " | "
         << fixed(r.ratio, 3) << " | " << (r.regression ? "REGRESSION" : "ok") << " |\n";
    else
      os << "| " << r.config << " | " << r.point << " | " << fixed(r.measured, 2) << " | n/a | n/a | not in the baseline |\n";
}

}  // namespace dlperf::analysis
