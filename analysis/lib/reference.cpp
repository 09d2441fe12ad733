// Loads and matches the published DLPerf V100 figures (see reference.h).
#include "reference.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"
#include "core/parse_number.h"

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

constexpr const char* kHeader = "system,model,precision,batch_per_device,variant,nodes,gpus_per_node,samples_per_s,speedup";

}  // namespace

// TF32 is what FP32 training runs on since Ampere (cuDNN/cuBLAS's default math for fp32 tensors):
// it sits beside DLPerf's FP32 rows, not its mixed-precision (AMP) ones.
std::string precision_class(const std::string& p) { return p == "fp32" || p == "tf32" ? "fp32" : "mixed"; }

ReferenceTable load_reference(const std::string& csv_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(csv_path, ec))
    throw_usage_error("--reference " + csv_path + ": is a directory; give the published-figures CSV (or no value for the shipped one)");
  std::ifstream in(csv_path, std::ios::binary);
  if (!in) throw_usage_error("--reference " + csv_path + ": cannot read the reference figures");
  char magic[8] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() == 8 && std::string(magic, 8) == std::string("\x89HDF\r\n\x1a\n", 8))
    throw_usage_error("--reference " + csv_path + ": is an HDF5 results file, not the published-figures CSV; "
                      "to check against earlier results use --compare " + csv_path);
  in.clear();
  in.seekg(0);
  constexpr size_t kMaxBytes = 16 << 20;  // the shipped table is a few KiB
  const std::optional<std::string> text = read_at_most(in, kMaxBytes);
  if (!text) throw_usage_error("--reference " + csv_path + ": larger than 16 MiB: not the published-figures CSV");
  std::istringstream lines(*text);
  ReferenceTable t;
  std::string line;
  bool header = true;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::string where = "--reference " + csv_path + ":" + std::to_string(line_no);
    if (header) {
      if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 byte-order mark (spreadsheets write one)
      if (line != kHeader) throw_usage_error(where + ": expected the header '" + std::string(kHeader) + "'");
      header = false;
      continue;
    }
    auto f = split_csv(line);
    if (f.size() != 9) throw_usage_error(where + ": expected 9 fields, got " + std::to_string(f.size()));
    // The text fields head table cells: a '|' would split the markdown row, a control byte the line.
    for (const size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{4}})
      if (f[i].find('|') != std::string::npos || printable(f[i]) != f[i])
        throw_usage_error(where + ": field " + std::to_string(i + 1) + " holds '|' or a control or non-UTF-8 byte");
    try {
      // Strict decimal (std::stod read "0x64" as 100 and " 100" as 100); samples/s below 1e12.
      const auto whole = [&](const std::string& v) {
        const auto n = parse_int64(v);
        if (!n || *n < 0) throw std::invalid_argument(v);
        return *n;
      };
      const auto real = [&](const std::string& v) {
        const auto x = parse_double(v);
        if (!x || !(*x > 0) || !(*x < 1e12)) throw std::invalid_argument(v);
        return *x;
      };
      ReferenceRow r{f[0], f[1], f[2], f[4], f[3].empty() ? 0 : whole(f[3]), whole(f[5]), whole(f[6]), real(f[7]), std::nullopt};
      if (!f[8].empty()) r.speedup = real(f[8]);
      if (r.nodes < 1 || r.gpus_per_node < 1) throw std::invalid_argument("scale");
      if (r.speedup && !(*r.speedup < 1e6)) throw std::invalid_argument("speedup");
      // The same point twice: the first silently won.
      for (const auto& other : t)
        if (other.system == r.system && other.model == r.model && other.precision == r.precision && other.variant == r.variant &&
            other.batch_per_device == r.batch_per_device && other.nodes == r.nodes && other.gpus_per_node == r.gpus_per_node)
          throw_usage_error(where + ": the same system, model, precision, batch, variant and scale as an earlier row");
      t.push_back(std::move(r));
    } catch (const Error&) {
      throw;
    } catch (const std::exception&) {
      throw_usage_error(where + ": not a positive number where one is expected (samples/s below 1e12, speedup below 1e6)");
    }
  }
  if (t.empty()) throw_usage_error("--reference " + csv_path + ": no reference figures (expected the header '" +
                                   std::string(kHeader) + "' and rows)");
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
