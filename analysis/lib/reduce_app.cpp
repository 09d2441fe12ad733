// run_reduce: read every trace, apply the method once, write each requested output.
// Nothing is written before every input and option has been checked; no output may be an
// input (compared by device and inode, so a symlink or another spelling of the name is
// caught); each output file is written whole to a temporary and renamed into place, so a
// failed write leaves an older output intact; standard output is checked like a file.
#include "reduce_app.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "compare.h"
#include "core/error.h"
#include "core/file_io.h"
#include "report.h"
#include "run_identity.h"
#include "trace/trace_reader.h"

namespace dlperf::analysis {
namespace fs = std::filesystem;

namespace {

struct Inputs {
  std::vector<RunRecord> runs;
  std::vector<CommRecord> comm;  // dlperf-comm records (fabric health)
  std::vector<SkippedInput> skipped;
  std::vector<std::string> files;
};

// Each file once, each run once (run_identity.h); `notes` says what was counted once.
Inputs read_inputs(const std::vector<std::string>& inputs, std::vector<std::string>& notes) {
  Inputs in;
  in.files = distinct_files(expand_inputs(inputs), notes);
  for (const auto& file : in.files) {
    if (is_comm_record_path(file)) {
      // A bad record is skipped like an unreadable trace: named on stderr, exit 4 (or, alone, exit 2).
      try {
        in.comm.push_back(read_comm_record(file));
      } catch (const Error& e) {
        in.skipped.push_back({file, e.what()});
      }
      continue;
    }
    TolerantRead r = read_runs_tolerant(file);
    in.runs.insert(in.runs.end(), std::make_move_iterator(r.runs.begin()), std::make_move_iterator(r.runs.end()));
    in.skipped.insert(in.skipped.end(), r.skipped.begin(), r.skipped.end());
  }
  drop_duplicate_runs(in.runs, notes);
  return in;
}

void check_range(const char* flag, double v, double lo, bool lo_open, double hi, const std::string& meaning) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  if (!ok) {
    std::ostringstream os;
    os << "--" << flag << " " << v << " is out of range: " << meaning;
    throw_usage_error(os.str());
  }
}

void check_options(const ReduceConfig& cfg) {
  if (cfg.method.warmup && *cfg.method.warmup < 0)
    throw_usage_error("--warmup must be 0 or more (got " + std::to_string(*cfg.method.warmup) + ")");
  if (cfg.method.window && *cfg.method.window < 1)
    throw_usage_error("--window must be 1 or more (got " + std::to_string(*cfg.method.window) + ")");
  check_range("tolerance", cfg.tolerance, 0, true, 1,
              "it is the lowest acceptable measured/baseline ratio, in (0, 1], e.g. 0.95 for a 5% regression");
  check_range("cv-warning", cfg.cv_warning, 0, false, 1, "it is a coefficient of variation in [0, 1], e.g. 0.05");
  check_range("straggler-threshold", cfg.method.straggler_threshold, 0, true, 1,
              "it is the fraction above the median compute time that makes a rank slow, in (0, 1], e.g. 0.05");
}

// "-" and /dev/stdout name standard output (issue 27 item 8): they failed ("is a directory"
// does not apply, but renaming a temporary onto /dev/stdout does) or created a file named "-".
bool is_stdout(const std::string& path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" || path == "/proc/self/fd/1";
}

// The outputs by flag, in the order they are written.
std::vector<std::pair<std::string, std::string>> outputs(const ReduceConfig& cfg) {
  return {{"--csv", cfg.csv_path}, {"--json", cfg.json_path}, {"--plot", cfg.svg_path}, {"--timeline", cfg.timeline_path}};
}

// Every output names a file that is not an input and not another output; at most one is
// standard output; the plot is an SVG file.
void check_outputs(const ReduceConfig& cfg, const std::vector<std::string>& input_files) {
  std::string on_stdout;
  for (const auto& [flag, path] : outputs(cfg))
    if (!path.empty() && is_stdout(path)) {
      if (!on_stdout.empty()) throw_usage_error(on_stdout + " and " + flag + " both name standard output: give one of them a file");
      on_stdout = flag;
    }
  std::map<FileId, std::string> inputs;
  for (const auto& f : input_files)
    if (auto id = file_id(f)) inputs.emplace(*id, f);
  for (const std::string& extra : {cfg.compare_path, cfg.reference_csv})
    if (!extra.empty())
      if (auto id = file_id(extra)) inputs.emplace(*id, extra);
  std::map<std::string, std::string> targets;  // resolved output path -> flag
  for (const auto& [flag, path] : outputs(cfg)) {
    if (path.empty() || is_stdout(path)) continue;
    if (auto id = file_id(path)) {
      auto in = inputs.find(*id);
      if (in != inputs.end())
        throw_usage_error(flag + " " + path + " is an input of this reduction (the same file as " + in->second +
                          "): writing it would destroy the input; choose another output name");
    }
    std::error_code ec;
    if (fs::is_directory(path, ec)) throw_usage_error(flag + " " + path + ": is a directory; give a file name");
    // Every output checked before any is written: a bad --json left the --csv written, exit 2.
    if (const std::string why = output_file_problem(path); !why.empty()) throw_usage_error(flag + " " + path + ": " + why);
    const std::string target = resolve_symlinks(path);
    auto [it, fresh] = targets.emplace(target, flag);
    if (!fresh) throw_usage_error(flag + " " + path + " is also the file of " + it->second + ": give each output its own name");
  }
  if (!cfg.svg_path.empty() && !is_stdout(cfg.svg_path)) {
    std::string ext = fs::path(cfg.svg_path).extension().string();
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (ext != ".svg")
      throw_usage_error("--plot " + cfg.svg_path + ": the plot is SVG; name the file .svg (for a PNG: rsvg-convert -o " +
                        fs::path(cfg.svg_path).replace_extension(".png").string() + " " +
                        fs::path(cfg.svg_path).replace_extension(".svg").string() + ")");
  }
}

void check_readable_file(const char* flag, const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw_usage_error(std::string(flag) + " " + path + ": is a directory, not a file");
  if (!fs::exists(path, ec)) throw_usage_error(std::string(flag) + " " + path + ": no such file");
}

// Why nothing at all could be measured, in one line: the table would be empty.
std::string nothing_measured(const Reduction& r, const MethodOptions& m) {
  std::string msg = "no run could be measured";
  if (r.excluded_short > 0) {
    const bool overridden = m.warmup || m.window;
    msg += ": " + std::to_string(r.excluded_short) + " run(s) shorter than " +
           (overridden ? "--warmup + --window" : std::string("their recorded warm-up + window")) + " = " +
           std::to_string(r.longest_short_need) + " iterations (the longest has " + std::to_string(r.longest_short_run) + ")";
    msg += overridden ? "; lower --warmup/--window" : "; --warmup/--window set a shorter window";
  }
  if (r.excluded_partial > 0)
    msg += (r.excluded_short ? "; " : ": ") + std::to_string(r.excluded_partial) +
           " partial or unfinished (--include-partial measures those with a full window)";
  if (r.excluded_failed > 0) msg += (r.excluded_short || r.excluded_partial ? "; " : ": ") + std::to_string(r.excluded_failed) + " failed";
  if (r.excluded_short + r.excluded_partial + r.excluded_failed == 0) msg += ": the inputs hold no runs";
  return msg;
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
    for (fs::directory_iterator it(in, ec), end; !ec && it != end; it.increment(ec)) {
      const auto ext = it->path().extension();
      std::error_code ec2;  // a symlink loop or an unreadable entry: not a trace, not an error
      if ((ext == ".h5" || ext == ".hdf5" || ext == ".comm") && it->is_regular_file(ec2)) found.push_back(it->path().string());
    }
    if (ec) throw_usage_error(in + ": cannot list the directory (" + ec.message() + ")");
    if (found.empty()) throw_usage_error(in + ": directory holds no .h5 trace files (nor .comm records)");
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

int run_reduce(const ReduceConfig& cfg, std::ostream& out, std::ostream& err) {
  check_options(cfg);
  // Load every input before writing anything, so bad input leaves no half-written outputs.
  ReferenceTable reference;
  if (!cfg.reference_csv.empty()) {
    check_readable_file("--reference", cfg.reference_csv);
    reference = load_reference(cfg.reference_csv);
  }
  std::vector<BaselinePoint> baseline;
  if (!cfg.compare_path.empty()) {
    check_readable_file("--compare", cfg.compare_path);
    if (fs::path(cfg.compare_path).extension() == ".json") {
      baseline = baseline_from_json(cfg.compare_path);
    } else {
      std::vector<RunRecord> base = read_runs(cfg.compare_path);
      std::vector<std::string> counted_once;  // the baseline's own duplicates: not this report's business
      drop_duplicate_runs(base, counted_once);
      baseline = baseline_from_reduction(reduce_runs(base, cfg.method));
    }
  }
  std::vector<std::string> counted_once;
  Inputs in = read_inputs(cfg.inputs, counted_once);
  for (const auto& n : counted_once) err << "dlperf-reduce: note: " << n << '\n';
  // A single bad input and nothing else: its own one-line error, as before any reduction.
  if (in.runs.empty() && in.comm.empty() && in.skipped.size() == 1) throw_usage_error(in.skipped.front().why);
  for (const auto& s : in.skipped) err << "dlperf-reduce: skipped " << s.why << '\n';
  if (in.runs.empty() && in.comm.empty() && !in.skipped.empty())
    throw_usage_error("none of the " + std::to_string(in.skipped.size()) + " inputs above could be read");
  check_outputs(cfg, in.files);
  const Reduction r = reduce_runs(in.runs, cfg.method);
  // --ops and --timeline read the profiled iterations, not the measured window: a run they can
  // show is shown even when no throughput table can be made (said once, on stderr).
  const bool step_views = cfg.ops || !cfg.timeline_path.empty();
  // Only dlperf-comm records: the fabric tables alone (CSV, JSON and the plot are of training runs).
  const bool comm_only = in.runs.empty() && !in.comm.empty();
  if (comm_only && (!cfg.compare_path.empty() || step_views))
    throw_usage_error("the inputs hold only dlperf-comm records (.comm): --compare, --ops and --timeline need training traces");
  // reduce.sh after `submit_all.sh comm` asks for them too: said, not an error.
  if (comm_only && (!cfg.csv_path.empty() || !cfg.json_path.empty() || !cfg.svg_path.empty()))
    err << "dlperf-reduce: note: the inputs hold only dlperf-comm records: --csv, --json and --plot (of training runs) not written\n";
  if (!comm_only && r.measured_runs == 0 && (!step_views || !cfg.compare_path.empty() || !cfg.csv_path.empty() || !cfg.json_path.empty() ||
                               !cfg.svg_path.empty()))
    throw_usage_error(nothing_measured(r, cfg.method));
  std::vector<Comparison> rows;
  if (!cfg.compare_path.empty()) {
    rows = compare(r, baseline, cfg.tolerance);
    // A point the baseline lacks is not a pass: the table says so, and stderr, where a CI log shows it.
    std::string missing;
    for (const auto& c : rows)
      if (!c.matched) missing += (missing.empty() ? "" : ", ") + c.config + " " + c.point + " (" + c.why_not + ")";
    if (std::none_of(rows.begin(), rows.end(), [](const Comparison& c) { return c.matched; }))
      throw_usage_error(cfg.compare_path + ": baseline shares no configuration with the measured runs: " + missing);
    if (!missing.empty()) err << "dlperf-reduce: note: not compared against " << cfg.compare_path << ": " << missing << '\n';
  }
  // The step views are rendered before anything is written, so bad options write nothing.
  std::ostringstream ops_text, timeline_text;
  if (cfg.ops) write_ops_report(ops_text, in.runs, cfg.ops_options);
  if (!cfg.timeline_path.empty()) write_timeline(timeline_text, in.runs, cfg.timeline);

  ReportOptions opt;
  opt.cv_warning = cfg.cv_warning;
  opt.reference = cfg.reference_csv.empty() ? nullptr : &reference;
  const auto render = [&](auto writer) {
    std::ostringstream os;
    writer(os);
    return os.str();
  };
  // Files first, each whole or not at all; the report last, so its exit status is the last word.
  // An output named "-" or /dev/stdout takes standard output's place: it alone is printed there.
  std::string stdout_text;
  bool stdout_output = false;
  const auto emit = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    if (is_stdout(path)) {
      stdout_text = text;
      stdout_output = true;
    } else {
      write_file_atomically(path, text);
    }
  };
  if (!cfg.csv_path.empty() && !comm_only) emit(cfg.csv_path, render([&](std::ostream& os) { write_csv(os, r); }));
  if (!cfg.json_path.empty() && !comm_only) emit(cfg.json_path, render([&](std::ostream& os) { write_json(os, r); }));
  if (!cfg.svg_path.empty() && !comm_only) emit(cfg.svg_path, render([&](std::ostream& os) { write_svg(os, r); }));
  emit(cfg.timeline_path, timeline_text.str());
  if (stdout_output) {
    out << stdout_text;
  } else {
    if (r.measured_runs > 0)
      write_markdown(out, r, cfg.method, opt);
    else if (!comm_only)
      err << "dlperf-reduce: note: no throughput table: " << nothing_measured(r, cfg.method) << '\n';
    out << ops_text.str();
    if (!rows.empty()) write_comparison(out, rows, cfg.tolerance);
    if (!in.comm.empty() && write_comm_tables(out, in.comm, cfg.links) > 0)
      err << "dlperf-reduce: warning: the fabric-health table above has warnings (WARNING lines)\n";
  }
  errno = 0;
  out.flush();
  if (!out) {
    const int e = errno;
    throw Error(ErrorKind::fault, "cannot write the report to standard output: " +
                                      std::string(e ? std::strerror(e) : "write error"));
  }
  if (std::any_of(rows.begin(), rows.end(), [](const Comparison& c) { return c.regression; })) return kExitRegression;
  if (!in.skipped.empty() && !cfg.skip_bad) return kExitSkipped;
  return kExitOk;
}

}  // namespace dlperf::analysis
