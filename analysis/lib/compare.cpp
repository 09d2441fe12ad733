// Baseline loading and matching for --compare (see compare.h).
#include "compare.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <tuple>
#include <ostream>

#include "comparable.h"
#include "core/error.h"
#include "core/file_io.h"
#include "format.h"
#include "json_strict.h"
#include "reference.h"

namespace dlperf::analysis {

std::string model_family(const std::string& name) {
  std::string n;
  for (char ch : name)
    if (std::isalnum(static_cast<unsigned char>(ch))) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  // DLPerf's result files key the model as "rn50", "r50", "resnet50", "resnet50v1.5",
  // "bert-base-adam-training", "vgg16"; dlperf's as resnet50, bert_base, vgg16.
  if (n.rfind("rn50", 0) == 0 || n == "r50" || n.rfind("resnet50", 0) == 0) return "resnet50";  // "rn50_amp" too
  if (n.rfind("vgg16", 0) == 0) return "vgg16";
  if (n.rfind("bert", 0) == 0 && n.find("large") == std::string::npos) return "bert_base";
  return name;
}

namespace {

// The "config" object dlperf-reduce --json writes beside each point (report_files.cpp).
ConfigKey config_from_json(const nlohmann::json& j, const std::string& where) {
  ConfigKey k;
  const auto text = [&](const char* name) {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_string()) throw_usage_error(where + ": config has no text '" + name + "'");
    return it->get<std::string>();
  };
  k.model = text("model"), k.precision = text("precision"), k.backend = text("backend"), k.variant = text("variant");
  const auto batch = j.find("batch_size_per_device");
  if (batch == j.end() || !batch->is_number_integer()) throw_usage_error(where + ": config has no integer 'batch_size_per_device'");
  k.batch_per_device = batch->get<int64_t>();
  const auto details = j.find("details");
  if (details == j.end() || !details->is_object()) throw_usage_error(where + ": config has no object 'details'");
  for (const auto& [name, v] : details->items()) {
    if (!v.is_string()) throw_usage_error(where + ": config detail '" + name + "' is not text");
    k.details.emplace(name, v.get<std::string>());
  }
  return k;
}

// Everything but the machine and the build.
bool same_work(const ConfigKey& a, const ConfigKey& b) {
  if (std::tie(a.model, a.precision, a.backend, a.variant, a.batch_per_device) !=
      std::tie(b.model, b.precision, b.backend, b.variant, b.batch_per_device))
    return false;
  // Details both record: a baseline from an older dlperf lacks settings added since (a newer
  // build records more), which are then not held against it.
  for (const auto& [name, v] : a.details)
    if (const auto it = b.details.find(name); !is_identity_detail(name) && it != b.details.end() && it->second != v) return false;
  return true;
}

// "resnet50_fp32_b64_cpu...": a label dlperf wrote, not a DLPerf model name.
bool is_dlperf_label(const std::string& key) {
  for (const char* p : {"_fp32_b", "_tf32_b", "_fp16_b", "_bf16_b"})
    if (const size_t at = key.find(p); at != std::string::npos && at + 7 < key.size() && std::isdigit(static_cast<unsigned char>(key[at + 7])))
      return true;
  return false;
}

// The precision a DLPerf name states in one of its parts ("rn50_fp16_b256", "resnet50_amp_result"):
// "" when it states none, or two of different classes.
std::string stated_precision(const std::string& name) {
  std::string found, token;
  for (size_t i = 0; i <= name.size(); ++i) {
    const unsigned char ch = i < name.size() ? static_cast<unsigned char>(name[i]) : '_';
    if (std::isalnum(ch)) {
      token += static_cast<char>(std::tolower(ch));
      continue;
    }
    for (const char* p : {"fp32", "tf32", "fp16", "bf16", "amp", "mixed"})
      if (token == p) {
        if (!found.empty() && precision_class(found) != precision_class(token)) return "";
        if (found.empty()) found = token;
      }
    token.clear();
  }
  return found;
}

}  // namespace

std::vector<BaselinePoint> baseline_from_reduction(const Reduction& r) {
  std::vector<BaselinePoint> out;
  for (const auto& c : r.configs)
    for (const auto& p : c.points)
      if (p.stats.runs > 0)
        out.push_back({c.label, point_name(c.key.backend, p.nodes, p.devices_per_node), p.stats.median, c.key.batch_per_device, c.key});
  return out;
}

std::vector<BaselinePoint> baseline_from_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_usage_error(path + ": cannot read baseline");
  // dlperf-reduce --json of a large sweep is some hundred KiB; a file given by mistake is not
  // read into memory whole.
  constexpr size_t kMaxBytes = 64 << 20;
  const std::optional<std::string> contents = read_at_most(in, kMaxBytes);
  if (!contents) throw_usage_error(path + ": larger than 64 MiB: not a baseline written by dlperf-reduce --json");
  if (in.bad()) throw_usage_error(path + ": cannot read baseline (is it a directory?)");
  const nlohmann::json root = parse_json_strict(*contents, path);
  if (!root.is_object()) throw_usage_error(path + ": baseline JSON is not an object of models");
  std::vector<BaselinePoint> out;
  const std::string file_precision = stated_precision(std::filesystem::path(path).filename().string());
  for (const auto& [key, points] : root.items()) {
    if (!points.is_object()) continue;
    const std::string key_precision = stated_precision(key);
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
      BaselinePoint b{key, name, speed, 0, std::nullopt};
      auto batch = v.find("batch_size_per_device");
      if (batch != v.end() && batch->is_number()) b.batch_per_device = static_cast<int64_t>(batch->get<double>());
      if (const auto cfg = v.find("config"); cfg != v.end() && cfg->is_object())
        b.config = config_from_json(*cfg, path + ": " + key + " " + name);
      else
        b.precision = key_precision.empty() ? file_precision : key_precision;
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
      const std::string name = point_name(c.key.backend, p.nodes, p.devices_per_node);
      const BaselinePoint* match = nullptr;
      std::vector<const BaselinePoint*> work;  // baseline configurations of the same work
      for (const auto& b : baseline)
        if (b.point == name && b.config && same_work(*b.config, c.key)) work.push_back(&b);
      for (const auto* b : work)
        if (work.size() == 1 || *b->config == c.key) match = b;
      std::string why_not = "not in the baseline";
      if (!match && work.size() > 1) {
        std::set<std::string> differ;
        for (const auto* b : work)
          for (const auto* o : work)
            for (const auto& [detail, v] : b->config->details)
              if (const auto it = o->config->details.find(detail); it == o->config->details.end() || it->second != v) differ.insert(detail);
        why_not = std::to_string(work.size()) + " baseline configurations match (they differ in";
        for (const auto& d : differ) why_not += " " + d;
        why_not += ")";
      }
      bool dlperf_figure = false;  // matched a DLPerf result file's figure
      if (!match && work.empty())
        for (const auto& b : baseline) {
          if (b.point != name || b.config) continue;
          if (b.key == c.label) {  // a label of dlperf's, from a JSON without configurations
            match = &b;
            dlperf_figure = false;
            continue;
          }
          // A DLPerf result file: the model's name in any of DLPerf's spellings, same batch, the
          // same precision where it says one, and only beside the workload it published.
          if (match || is_dlperf_label(b.key) || model_family(b.key) != model_family(c.key.model) ||
              (b.batch_per_device != 0 && b.batch_per_device != c.key.batch_per_device))
            continue;
          if (!is_published_workload(c))
            why_not = "not the published workload (" + differences(c) + "), which the baseline's " + b.key + " figures are";
          else if (!b.precision.empty() && precision_class(b.precision) != precision_class(c.key.precision))
            why_not = "the baseline's " + b.key + " is " + b.precision + " (its name says), this is " + c.key.precision;
          else {
            match = &b;
            dlperf_figure = true;
          }
        }
      // A point whose runs all failed or stopped early: a gate passed while the scale point
      // crashed. Where the baseline measured it, it is a regression; elsewhere it is not a row.
      if (p.stats.runs == 0) {
        if (match && match->median > 0)
          rows.push_back({c.label, name, 0, match->median, 0, true, true, "no measured run (failed or partial)"});
        continue;
      }
      if (!match || !(match->median > 0)) {
        rows.push_back({c.label, name, p.stats.median, 0, 0, false, false, why_not});
        continue;
      }
      Comparison row{c.label, name, p.stats.median, match->median, p.stats.median / match->median, false, true, ""};
      row.regression = row.ratio < tolerance;
      if (dlperf_figure && match->precision.empty()) row.why_not = "the baseline names no precision: compared as " + c.key.precision;
      rows.push_back(row);
    }
  return rows;
}

void write_comparison(std::ostream& os, const std::vector<Comparison>& rows, double tolerance) {
  os << "\n## Comparison with baseline (regression when measured/baseline < " << fixed(tolerance, 3) << ")\n\n"
     << "| config | point | measured samples/s | baseline samples/s | ratio | verdict |\n|---|---|---|---|---|---|\n";
  for (const auto& r : rows)
    if (r.matched) {
      // Rounded to 3 digits, a ratio just under the tolerance (0.94995) read as the tolerance
      // itself beside REGRESSION: more digits until it shows below.
      int digits = 3;
      while (r.regression && digits < 8 && std::stod(fixed(r.ratio, digits)) >= tolerance) ++digits;
      os << "| " << cell(r.config) << " | " << r.point << " | " << rate(r.measured) << " | " << rate(r.baseline) << " | "
         << fixed(r.ratio, digits) << " | " << (r.regression ? "REGRESSION" : "ok") << (r.why_not.empty() ? "" : ": " + cell(r.why_not)) << " |\n";
    } else
      os << "| " << cell(r.config) << " | " << r.point << " | " << rate(r.measured) << " | n/a | n/a | " << cell(r.why_not) << " |\n";
}

}  // namespace dlperf::analysis
