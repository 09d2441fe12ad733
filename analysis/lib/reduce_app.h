// dlperf-reduce as a library call: the settings parsed from the command line, and the run
// that reads the traces, reduces them and writes every requested output. The program's
// main() only parses options into ReduceConfig (analysis/dlperf_reduce.cpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "comm_table.h"
#include "reduce.h"
#include "step_reports.h"

namespace dlperf::analysis {

struct ReduceConfig {
  std::vector<std::string> inputs;  // trace files, or directories of *.h5
  MethodOptions method;
  double cv_warning = 0.05;   // in [0, 1]
  std::string csv_path, json_path, svg_path;
  std::string compare_path;   // results .h5 or DLPerf-shaped .json; "" = no comparison
  double tolerance = 0.95;    // minimum measured/baseline ratio, in (0, 1]
  std::string reference_csv;  // "" = no reference columns
  bool skip_bad = false;      // unreadable files and runs are skipped without failing the exit code
  bool ops = false;             // per-op profiles (step_reports.h)
  OpsOptions ops_options;
  std::string timeline_path;    // "" = no timeline
  TimelineOptions timeline;
  LinkRates links;              // expected rates for the dlperf-comm records (*.comm) among the inputs
};

// Exit codes of dlperf-reduce.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRegression = 1;  // the comparison found a regression
inline constexpr int kExitBadInput = 2;    // bad options or input: one line, nothing written
inline constexpr int kExitError = 3;       // an output (or standard output) could not be written
inline constexpr int kExitSkipped = 4;     // the report was written, but unreadable inputs were skipped (named on stderr)

// Throws dlperf::Error on bad input (usage) or a failed write (fault); returns
// kExitRegression, kExitSkipped or kExitOk. Skipped inputs are named on `err`, one line each.
int run_reduce(const ReduceConfig& cfg, std::ostream& out, std::ostream& err);

// Expands directories to their *.h5 / *.hdf5 traces and *.comm records (sorted); throws Error(usage) when none.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

// The copy of the published figures that ships with dlperf (installed, else source tree).
std::string default_reference_csv();

}  // namespace dlperf::analysis
