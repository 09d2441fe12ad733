// Loads and matches the published DLPerf V100 figures (see reference.h).
#include "reference.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace dlperf::analysis {
namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) out.push_back(field);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

std::string family(const std::string& model) {
  for (const char* f : {"resnet50", "vgg16", "bert"})
    if (model.rfind(f, 0) == 0) return f;
  return model;
}

std::string precision_class(const std::string& p) { return p == "fp32" ? "fp32" : "mixed"; }

}  // namespace

ReferenceTable load_reference(const std::string& csv_path) {
  std::ifstream in(csv_path);
  if (!in) throw_usage_error("cannot read reference figures " + csv_path);
  ReferenceTable t;
  std::string line;
  bool header = true;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    if (header) {  // system,model,precision,batch_per_device,variant,nodes,gpus_per_node,samples_per_s,speedup
      header = false;
      continue;
    }
    auto f = split_csv(line);
    if (f.size() < 9) throw_usage_error(csv_path + ":" + std::to_string(line_no) + ": expected 9 fields");
    try {
      ReferenceRow r{f[0], f[1], f[2], f[4], f[3].empty() ? 0 : std::stoll(f[3]), std::stoll(f[5]), std::stoll(f[6]),
                     std::stod(f[7]), std::nullopt};
      if (!f[8].empty()) r.speedup = std::stod(f[8]);
      t.push_back(std::move(r));
    } catch (const std::exception&) {
      throw_usage_error(csv_path + ":" + std::to_string(line_no) + ": not a number where one is expected");
    }
  }
  return t;
}

std::optional<ReferenceRow> match_reference(const ReferenceTable& t, const ConfigKey& key, int64_t nodes,
                                            int64_t devices_per_node) {
  const ReferenceRow* best = nullptr;
  int best_score = -1;
  for (const auto& r : t) {
    if (family(r.model) != family(key.model) || precision_class(r.precision) != precision_class(key.precision) ||
        r.nodes != nodes || r.gpus_per_node != devices_per_node)
      continue;
    const int score = (r.batch_per_device == key.batch_per_device ? 2 : 0) + (r.variant.empty() ? 1 : 0);
    if (score > best_score) {
      best = &r;
      best_score = score;
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace dlperf::analysis
