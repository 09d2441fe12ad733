// dlperf-jobs --profile CLUSTER.ini --matrix MATRIX.ini [--output-dir jobs]: writes one sbatch
// script per (model, configuration), CPU-backend variants, reduce.sh and submit_all.sh
// (src/jobs/, formats in jobs/README.md). Exit 0 written, 2 bad input (one line naming the
// file, line and what to fix; nothing written), 3 the output directory could not be written.
#include <boost/program_options.hpp>
#include <iostream>

#include "core/file_io.h"
#include "core/given_options.h"
#include "dlperf_version.h"
#include "jobs/generate.h"
#include "jobs/jobs_error.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  using namespace dlperf::jobs;
  GenerateConfig cfg;
  po::options_description opts(
      "Usage: dlperf-jobs --profile CLUSTER.ini --matrix MATRIX.ini --output-dir DIR  (or --list)\n"
      "Writes one Slurm batch script per (model, configuration) of the matrix, CPU-backend variants,\n"
      "reduce.sh and submit_all.sh. Exit: 0 written, 2 bad input (nothing written), 3 write error.\n\nOptions");
  opts.add_options()
      ("help,h", "print this help")
      ("version", "print the version")
      ("profile", po::value(&cfg.profile_path), "cluster profile (INI; e.g. jobs/profiles/generic.ini)")
      ("matrix", po::value(&cfg.matrix_path), "job matrix (INI; e.g. jobs/matrix.ini)")
      ("output-dir", po::value(&cfg.output_dir), "directory to write the scripts to (required: no default, so the committed "
                                                  "jobs/ of a checkout is only replaced when named)")
      ("list", po::bool_switch(), "print the file names instead of writing them");
  try {
    po::variables_map vm;
    const po::parsed_options parsed = po::command_line_parser(argc, argv).options(opts).positional({}).run();  // no positional words
    po::store(parsed, vm);
    dlperf::check_given_texts(parsed, vm);  // --profile "$PROFILE" with it unset
    if (vm.count("help")) {
      std::cout << opts << '\n';
      return dlperf::exit_after_printing("dlperf-jobs");
    }
    if (vm.count("version")) {
      std::cout << "dlperf-jobs " << DLPERF_VERSION << " (" << DLPERF_GIT_REVISION << ")\n";
      return dlperf::exit_after_printing("dlperf-jobs");
    }
    po::notify(vm);
    std::vector<std::string> notes;
    const auto files = generate_files(cfg, &notes);
    for (const auto& n : notes) std::cerr << "dlperf-jobs: note: " << n << '\n';
    if (vm["list"].as<bool>()) {
      for (const auto& f : files) std::cout << f.name << '\n';
      if (const std::string why = dlperf::flush_stdout_error(); !why.empty()) {
        std::cerr << "dlperf-jobs: " << why << '\n';
        return 3;
      }
      return 0;
    }
    write_files(cfg.output_dir, files);
    std::cout << "dlperf-jobs: wrote " << files.size() << " files to " << cfg.output_dir << "/\n";
    return 0;
  } catch (const po::error& e) {
    std::cerr << "dlperf-jobs: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const dlperf::Error& e) {
    std::cerr << "dlperf-jobs: " << e.what() << '\n';
    return e.kind() == dlperf::ErrorKind::usage ? 2 : 3;
  } catch (const JobsError& e) {
    std::cerr << "dlperf-jobs: " << e.what() << '\n';
    return e.kind() == JobsErrorKind::bad_input ? 2 : 3;
  } catch (const std::exception& e) {
    std::cerr << "dlperf-jobs: " << e.what() << '\n';
    return 3;
  }
}
