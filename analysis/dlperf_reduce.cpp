// dlperf-reduce FILE|DIR ...: reduce dlperf HDF5 traces with the DLPerf measurement method
// and print markdown tables; optional CSV, JSON, SVG, reference figures and a regression
// check. Thin entry point: options -> ReduceConfig -> run_reduce (analysis/lib).
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "core/given_options.h"
#include "dlperf_version.h"
#include "reduce_app.h"

namespace po = boost::program_options;
using dlperf::analysis::ReduceConfig;

int main(int argc, char** argv) {
  ReduceConfig cfg;
  po::options_description opts(
      "Usage: dlperf-reduce [options] FILE|DIR ...\n"
      "Groups runs by exact configuration (model, precision, batch, backend, variant and every other\n"
      "setting that changes the work: image/sequence size, network sizes, optimizer, data, threads,\n"
      "build, machine) and nodes x devices; throughput per run = samples in the measured window / its\n"
      "wall time on the slowest rank; median over repeats; speedup vs 1 node x 1 device.\n"
      "Exit: 0 ok, 1 regression, 2 bad input (nothing written), 3 an output could not be written,\n"
      "4 report written but unreadable files or runs were skipped (named on stderr; see --skip-bad).\n\nOptions");
  opts.add_options()
      ("help,h", "print this help")
      ("version", "print the version")
      ("warmup", po::value<int64_t>(), "iterations dropped at the start of every run (default: each run's own recorded --warmup)")
      ("window", po::value<int64_t>(), "iterations measured after the warm-up (default: each run's own recorded --iterations minus "
                                       "its warm-up)")
      ("include-partial", po::bool_switch(&cfg.method.include_partial), "also measure partial runs with a full window")
      ("csv", po::value(&cfg.csv_path), "write every statistic as CSV to FILE (- or /dev/stdout: to standard output, "
                                        "instead of the report)")
      ("json", po::value(&cfg.json_path), "write DLPerf-shaped JSON to FILE (- : standard output)")
      ("plot", po::value(&cfg.svg_path), "write an SVG scaling plot to FILE (a name ending in .svg; - : standard output; for a PNG: rsvg-convert)")
      ("compare", po::value(&cfg.compare_path), "baseline results .h5 or DLPerf .json; exit 1 on regression, or on a point the baseline has whose runs all failed (points the baseline lacks are listed as not compared)")
      ("tolerance", po::value(&cfg.tolerance)->default_value(0.95, "0.95"), "minimum measured/baseline median ratio, in (0, 1]")
      ("reference", po::value(&cfg.reference_csv)->implicit_value(dlperf::analysis::default_reference_csv(), "shipped"),
       "show published DLPerf V100 figures (optionally from CSV FILE)")
      ("cv-warning", po::value(&cfg.cv_warning)->default_value(0.05, "0.05"), "warn when a group's coefficient of variation exceeds this, in [0, 1]")
      ("straggler-threshold", po::value(&cfg.method.straggler_threshold)->default_value(0.05, "0.05"),
       "a rank is slow in an iteration when its compute exceeds the median by this fraction, in (0, 1]")
      ("link-gbps", po::value(&cfg.links.inter_gbps), "dlperf-comm records (*.comm) across nodes: expected link rate per rank, Gbit/s")
      ("intra-gbps", po::value(&cfg.links.intra_gbps), "dlperf-comm records within one node: expected link rate, Gbit/s")
      ("link-warn", po::value(&cfg.links.warn_fraction)->default_value(0.8, "0.8"),
       "warn when a dlperf-comm record's peak bus bandwidth is below this share of the link, in (0, 1]")
      ("skip-bad", po::bool_switch(&cfg.skip_bad), "exit 0 even when unreadable files or runs were skipped (they are still named on stderr)");
  std::string timeline_steps;
  po::options_description step("Where a step's time goes (runs with dlperf-train --profile-ops N)");
  step.add_options()
      ("ops", po::bool_switch(&cfg.ops), "print each profiled run's top ops and their share of the step")
      ("ops-top", po::value(&cfg.ops_options.top)->default_value(cfg.ops_options.top), "rows of the top-ops table")
      ("timeline", po::value(&cfg.timeline_path), "write one rank's phases, ops and allreduce buckets as Chrome trace-event JSON "
                                                   "(Perfetto) to FILE")
      ("timeline-run", po::value(&cfg.timeline.run), "run for --timeline: run_NNNNNN or FILE:/runs/run_NNNNNN (default: the last read)")
      ("timeline-rank", po::value(&cfg.timeline.rank)->default_value(0), "rank for --timeline")
      ("timeline-steps", po::value(&timeline_steps), "iterations for --timeline, A-B from 0 (default: the profiled ones, else the last 5)");
  opts.add(step);
  po::options_description hidden;
  hidden.add_options()("input", po::value(&cfg.inputs));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("input", -1);
  try {
    po::variables_map vm;
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(all).positional(pos).run();
    po::store(parsed, vm);
    // An empty value (an unset variable: --compare "$BASELINE" compared nothing and exited 0, so a
    // CI gate built on it never failed), or 1e-400 read as 0 (a link rate or a threshold off).
    dlperf::check_given_texts(parsed, vm);
    if (vm.count("help")) {
      std::cout << opts << '\n';
      return dlperf::exit_after_printing("dlperf-reduce");
    }
    if (vm.count("version")) {
      std::cout << "dlperf-reduce " << DLPERF_VERSION << " (" << DLPERF_GIT_REVISION << ")\n";
      return dlperf::exit_after_printing("dlperf-reduce");
    }
    po::notify(vm);
    if (vm.count("warmup")) cfg.method.warmup = vm["warmup"].as<int64_t>();
    if (vm.count("window")) cfg.method.window = vm["window"].as<int64_t>();
    if (!timeline_steps.empty()) dlperf::analysis::parse_step_range(timeline_steps, cfg.timeline);
    // 0: none given. Otherwise 1 Mbit/s to 10 Pbit/s: below, the table's % of link ran to 60 digits.
    for (const double rate : {cfg.links.inter_gbps, cfg.links.intra_gbps})
      if (!(rate == 0 || (rate >= 1e-3 && rate < 1e7)))
        throw dlperf::Error(dlperf::ErrorKind::usage, "--link-gbps and --intra-gbps are link rates in Gbit/s: 0 (none) or 0.001 to 1e7");
    if (!(cfg.links.warn_fraction > 0 && cfg.links.warn_fraction <= 1))
      throw dlperf::Error(dlperf::ErrorKind::usage, "--link-warn must be in (0, 1]");
    if (cfg.ops_options.top < 1) throw dlperf::Error(dlperf::ErrorKind::usage, "--ops-top must be at least 1");
    // An option that only shapes another's output, given without it, would be silently ignored.
    const auto given = [&vm](const char* name) { return vm.count(name) > 0 && !vm[name].defaulted(); };
    const std::pair<const char*, std::vector<const char*>> needs[] = {
        {"tolerance", {"compare"}},       {"ops-top", {"ops"}},           {"timeline-run", {"timeline"}},
        {"timeline-rank", {"timeline"}},  {"timeline-steps", {"timeline"}}, {"link-warn", {"link-gbps", "intra-gbps"}}};
    for (const auto& [option, wants] : needs) {
      if (!given(option) || std::any_of(wants.begin(), wants.end(), given)) continue;
      std::string with = "--" + std::string(wants.front());
      if (wants.size() > 1) with += " or --" + std::string(wants.back());
      throw dlperf::Error(dlperf::ErrorKind::usage, "--" + std::string(option) + " applies with " + with + "; add it or drop --" + option);
    }
    return dlperf::analysis::run_reduce(cfg, std::cout, std::cerr);
  } catch (const po::error& e) {
    std::cerr << "dlperf-reduce: " << e.what() << " (see --help)\n";
    return dlperf::analysis::kExitBadInput;
  } catch (const dlperf::Error& e) {
    std::cerr << "dlperf-reduce: " << e.what() << '\n';
    return e.kind() == dlperf::ErrorKind::usage ? dlperf::analysis::kExitBadInput : dlperf::analysis::kExitError;
  } catch (const std::exception& e) {
    std::cerr << "dlperf-reduce: " << e.what() << '\n';
    return dlperf::analysis::kExitError;
  }
}
