// run_reduce: read every trace, apply the method once, write each requested output.
#include "reduce_app.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "compare.h"
#include "core/error.h"
#include "report.h"
#include "trace/trace_reader.h"

namespace dlperf::analysis {
namespace fs = std::filesystem;

namespace {

template <class Writer>
void write_file(const std::string& path, Writer writer) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (!os) throw_usage_error("cannot write " + path);
  writer(os);
  os.flush();
  if (!os) throw_usage_error("failed writing " + path);
}

std::vector<RunRecord> read_all(const std::vector<std::string>& inputs) {
  std::vector<RunRecord> runs;
  for (const auto& file : expand_inputs(inputs)) {
    auto more = read_runs(file);
    runs.insert(runs.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return runs;
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw_usage_error("no trace file given (dlperf-reduce FILE|DIR ...; see --help)");
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in, ec)) {
      files.push_back(in);  // read_runs reports a missing or bad file
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(in, ec)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".h5" || ext == ".hdf5")) found.push_back(e.path().string());
    }
    if (found.empty()) throw_usage_error(in + ": directory holds no .h5 trace files");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string default_reference_csv() {
  for (const char* p : {DLPERF_REFERENCE_INSTALLED, DLPERF_REFERENCE_SOURCE})
    if (fs::exists(p)) return p;
  return DLPERF_REFERENCE_INSTALLED;
}

int run_reduce(const ReduceConfig& cfg, std::ostream& out) {
  if (cfg.method.warmup < 0 || cfg.method.window < 1) throw_usage_error("--warmup must be >= 0 and --window >= 1");
  if (!(cfg.tolerance > 0)) throw_usage_error("--tolerance must be a positive ratio, e.g. 0.95");
  // Load every input before writing anything, so bad input leaves no half-written outputs.
  ReferenceTable reference;
  if (!cfg.reference_csv.empty()) reference = load_reference(cfg.reference_csv);
  std::vector<BaselinePoint> baseline;
  if (!cfg.compare_path.empty()) {
    if (fs::path(cfg.compare_path).extension() == ".json")
      baseline = baseline_from_json(cfg.compare_path);
    else
      baseline = baseline_from_reduction(reduce_runs(read_all({cfg.compare_path}), cfg.method));
  }
  const std::vector<RunRecord> runs = read_all(cfg.inputs);
  const Reduction r = reduce_runs(runs, cfg.method);
  // The step views are rendered before anything is written, so bad options write nothing.
  std::ostringstream ops_text, timeline_text;
  if (cfg.ops) write_ops_report(ops_text, runs, cfg.ops_options);
  if (!cfg.timeline_path.empty()) write_timeline(timeline_text, runs, cfg.timeline);

  ReportOptions opt;
  opt.cv_warning = cfg.cv_warning;
  opt.reference = cfg.reference_csv.empty() ? nullptr : &reference;
  write_markdown(out, r, cfg.method, opt);
  out << ops_text.str();
  if (!cfg.timeline_path.empty()) write_file(cfg.timeline_path, [&](std::ostream& os) { os << timeline_text.str(); });
  if (!cfg.csv_path.empty()) write_file(cfg.csv_path, [&](std::ostream& os) { write_csv(os, r); });
  if (!cfg.json_path.empty()) write_file(cfg.json_path, [&](std::ostream& os) { write_json(os, r); });
  if (!cfg.svg_path.empty()) write_file(cfg.svg_path, [&](std::ostream& os) { write_svg(os, r); });
  if (cfg.compare_path.empty()) return kExitOk;
  auto rows = compare(r, baseline, cfg.tolerance);
  if (rows.empty()) throw_usage_error(cfg.compare_path + ": baseline shares no configuration with the measured runs");
  write_comparison(out, rows, cfg.tolerance);
  return std::any_of(rows.begin(), rows.end(), [](const Comparison& c) { return c.regression; }) ? kExitRegression
                                                                                                    : kExitOk;
}

}  // namespace dlperf::analysis
