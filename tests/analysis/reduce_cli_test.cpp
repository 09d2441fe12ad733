// dlperf-reduce as a program: outputs written, exit 0 / 1 (regression) / 2 (bad input with
// one line on stderr) / 3 (an output cannot be written) / 4 (unreadable inputs skipped),
// directories as input; it never writes onto an input and checks every write (issue 18 rows
// 2, 4, 10, 11; issue 15 item 5).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "analysis_test_util.h"
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>

#include "trace/trace_writer.h"

namespace dlperf {
namespace {

struct Result {
  int code;
  std::string out, err;
};

// stdout_to: where the report goes ("" = a file in dir, read back as Result::out).
Result run_reduce_cli(const std::string& args, const test::TempDir& dir, const std::string& stdout_to = "") {
  const std::string out = stdout_to.empty() ? dir.file("stdout.txt") : stdout_to, err = dir.file("stderr.txt");
  const std::string cmd = std::string(DLPERF_BINARY_DIR) + "/analysis/dlperf-reduce " + args + " >" + out + " 2>" + err;
  int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, stdout_to.empty() ? slurp(out) : "", slurp(err)};
}

std::string make_trace(const test::TempDir& dir, const std::string& name, double step_2g) {
  const std::string path = dir.file(name);
  append_runs(path, {test::run_at("resnet50", 1, 1, 0.1), test::run_at("resnet50", 1, 2, step_2g)});
  return path;
}

TEST(ReduceCli, WritesEveryOutput) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  auto r = run_reduce_cli(trace + " --csv " + dir.file("o.csv") + " --json " + dir.file("o.json") + " --plot " +
                              dir.file("o.svg") + " --reference",
                          dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | 2 | 32 | 640.00 | 2.00 | 100.0% |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("V100 samples/s"), std::string::npos);
  for (const char* f : {"o.csv", "o.json", "o.svg"}) EXPECT_TRUE(std::ifstream(dir.file(f)).good()) << f;
}

TEST(ReduceCli, DirectoryInputAndHelp) {
  test::TempDir dir;
  make_trace(dir, "a.h5", 0.1);
  make_trace(dir, "b.h5", 0.1);
  auto r = run_reduce_cli(dir.path(), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | 1 | 2 | 320.00 |"), std::string::npos) << r.out;  // 2 runs at 1n1g
  EXPECT_EQ(run_reduce_cli("--help", dir).code, 0);
}

TEST(ReduceCli, CompareExitsNonZeroOnRegression) {
  test::TempDir dir;
  const std::string base = make_trace(dir, "base.h5", 0.1);
  const std::string slower = make_trace(dir, "slow.h5", 0.125);  // 1n2g: 512 vs 640 = 0.8
  EXPECT_EQ(run_reduce_cli(base + " --compare " + base, dir).code, 0);
  auto r = run_reduce_cli(slower + " --compare " + base + " --tolerance 0.9", dir);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("REGRESSION"), std::string::npos);
  EXPECT_EQ(run_reduce_cli(slower + " --compare " + base + " --tolerance 0.75", dir).code, 0);
}

TEST(ReduceCli, BadInputIsOneLineAndExitTwo) {
  test::TempDir dir;
  std::ofstream(dir.file("junk.h5")) << "not hdf5";
  std::ofstream(dir.file("empty.h5"));
  for (std::string args : {dir.file("junk.h5"), dir.file("empty.h5"), dir.file("missing.h5"), std::string(""),
                           std::string("--window 0 ") + dir.file("junk.h5"), std::string("--bogus")}) {
    auto r = run_reduce_cli(args, dir);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    ASSERT_FALSE(r.err.empty()) << args;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  }
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_one_line_error(const Result& r, int code, const std::string& mention, const std::string& what) {
  EXPECT_EQ(r.code, code) << what << ": " << r.err;
  ASSERT_FALSE(r.err.empty()) << what;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": not one line: " << r.err;
  EXPECT_NE(r.err.find(mention), std::string::npos) << what << ": " << r.err;
}

// A baseline of other work is refused with why, per point: the table of a CI gate must not pass.
TEST(ReduceCli, ABaselineOfOtherWorkSaysWhy) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  std::ofstream(dir.file("bf16.json")) << R"({"resnet50_bf16_b32_cpu": {"1n1r": {"median_speed": 300, "config": {"model": "resnet50",
      "precision": "bf16", "backend": "cpu", "variant": "", "batch_size_per_device": 32, "details": {}}}}})";
  expect_one_line_error(run_reduce_cli(trace + " --compare " + dir.file("bf16.json"), dir), 2,
                        "baseline shares no configuration with the measured runs: resnet50_fp32_b32_cpu 1n1r (not in the baseline)",
                        "bf16 baseline");
}

TEST(ReduceCli, NeverWritesOntoAnInput) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "v.h5", 0.1);
  const std::string before = bytes_of(trace);
  std::filesystem::create_symlink(trace, dir.file("alias.h5"));
  std::filesystem::create_directories(dir.file("sub"));
  for (const std::string flag : {"--json", "--csv", "--plot"})
    for (const std::string& out : {trace, dir.file("alias.h5"), dir.file("sub/../v.h5")}) {
      auto r = run_reduce_cli(flag + " " + out + " " + trace, dir);
      expect_one_line_error(r, 2, "is an input of this reduction", flag + " " + out);
      EXPECT_EQ(bytes_of(trace), before) << flag << " " << out << " changed the input";
    }
  // The --compare baseline is an input too.
  const std::string base = make_trace(dir, "base.h5", 0.1);
  expect_one_line_error(run_reduce_cli(trace + " --compare " + base + " --csv " + base, dir), 2, "is an input", "--compare");
}

TEST(ReduceCli, OutputsAreReplacedWholeAndNoTemporaryIsLeft) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  std::ofstream(dir.file("o.json")) << "old";
  // What a dlperf-reduce killed while writing o.json on this host left behind (its pid is gone).
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string h = host;
  for (char& c : h)
    if (c == '.' || c == '/') c = '_';
  std::ofstream(dir.file(".o.json.tmp." + h + "." + std::to_string(dead))) << "half";
  std::filesystem::permissions(dir.file("o.json"), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                                       std::filesystem::perms::group_read);
  auto r = run_reduce_cli(trace + " --json " + dir.file("o.json"), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(bytes_of(dir.file("o.json")).rfind("{", 0), 0u);
  EXPECT_EQ(std::filesystem::status(dir.file("o.json")).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write | std::filesystem::perms::group_read);
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  // Two outputs on one file would overwrite each other.
  expect_one_line_error(run_reduce_cli(trace + " --json " + dir.file("x") + " --csv " + dir.file("x"), dir), 2, "--json", "same output");
}

TEST(ReduceCli, AFailedWriteToStandardOutputIsAnError) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  expect_one_line_error(run_reduce_cli(trace, dir, "/dev/full"), 3, "standard output", "> /dev/full");
}

TEST(ReduceCli, ThresholdsAreRangeChecked) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  for (const std::string args : {"--tolerance 5", "--tolerance 0", "--tolerance nan", "--cv-warning -1", "--cv-warning 2",
                                 "--straggler-threshold -3", "--straggler-threshold 0", "--warmup -1"}) {
    const std::string flag = args.substr(0, args.find(' '));
    const std::string compare = flag == "--tolerance" ? " --compare " + trace : "";
    expect_one_line_error(run_reduce_cli(trace + compare + " " + args, dir), 2, flag, args);
  }
}

// A file option given an empty value (an unset variable: --compare "$BASELINE") is refused: it
// wrote or compared nothing and exited 0, so a CI gate on it always passed.
TEST(ReduceCli, AnEmptyFileOptionIsRefused) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  for (const std::string flag : {"--compare", "--csv", "--json", "--plot", "--timeline"})
    expect_one_line_error(run_reduce_cli(trace + " " + flag + " ''", dir), 2, flag + " was given an empty value", flag);
  expect_one_line_error(run_reduce_cli(trace + " --compare '' --tolerance 0.9", dir), 2, "--compare was given an empty value", "tolerance");
}

// Every output is checked before any is written: a --json on /dev/full or into a missing folder
// left the --csv (and the --plot) written, exit 2 or 3.
TEST(ReduceCli, ABadOutputAmongSeveralLeavesNoneWritten) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1), csv = dir.file("r.csv"), svg = dir.file("r.svg");
  expect_one_line_error(run_reduce_cli(trace + " --csv " + csv + " --json /dev/full", dir), 2, "--json /dev/full: exists and is not a regular file",
                        "/dev/full");
  expect_one_line_error(run_reduce_cli(trace + " --csv " + csv + " --plot " + svg + " --json " + dir.file("no/x.json"), dir), 2,
                        "--json " + dir.file("no/x.json") + ": its folder " + dir.file("no") + " does not exist", "missing folder");
  EXPECT_FALSE(std::filesystem::exists(csv));
  EXPECT_FALSE(std::filesystem::exists(svg));
  // A report its owner made read-only is not replaced behind their back (rename ignores the mode).
  std::ofstream(dir.file("kept.json")) << "{}\n";
  std::filesystem::permissions(dir.file("kept.json"), std::filesystem::perms::owner_read | std::filesystem::perms::group_read);
  expect_one_line_error(run_reduce_cli(trace + " --csv " + csv + " --json " + dir.file("kept.json"), dir), 2,
                        "--json " + dir.file("kept.json") + ": is write-protected (mode 0440)", "read-only");
  EXPECT_FALSE(std::filesystem::exists(csv));
}

// A rate that prints a 60-digit % of link, or text read as 0 (which means "no link given").
TEST(ReduceCli, ImplausibleLinkRatesAreRefused) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  expect_one_line_error(run_reduce_cli(trace + " --intra-gbps 1e-300", dir), 2, "0 (none) or 0.001 to 1e7", "1e-300");
  expect_one_line_error(run_reduce_cli(trace + " --link-gbps 1e-400", dir), 2, "--link-gbps 1e-400 is too small: it would be read as 0",
                        "1e-400");
  EXPECT_EQ(run_reduce_cli(trace + " --intra-gbps 0.001", dir).code, 0);
}

// A folder's entries that cannot be examined (a symlink loop) are not traces: they are passed
// over, not an exit 3 with no report.
TEST(ReduceCli, ASymlinkLoopInAFolderIsPassedOver) {
  test::TempDir dir;
  make_trace(dir, "a.h5", 0.1);
  std::filesystem::create_symlink("loop2.h5", dir.file("loop1.h5"));
  std::filesystem::create_symlink("loop1.h5", dir.file("loop2.h5"));
  const auto r = run_reduce_cli(dir.path(), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resnet50"), std::string::npos) << r.out;
}

// An option that shapes another's output, given alone, is refused, not silently ignored.
TEST(ReduceCli, AnOptionWithoutTheOneItShapesIsRefused) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  for (const auto& [args, with] : std::vector<std::pair<std::string, std::string>>{
           {"--tolerance 0.9", "--compare"},
           {"--ops-top 5", "--ops"},
           {"--timeline-run run_000001", "--timeline"},
           {"--timeline-rank 1", "--timeline"},
           {"--timeline-steps 2-5", "--timeline"},
           {"--link-warn 0.5", "--link-gbps or --intra-gbps"}}) {
    const std::string flag = args.substr(0, args.find(' '));
    expect_one_line_error(run_reduce_cli(trace + " " + args, dir), 2, flag + " applies with " + with, args);
  }
  // With it, each is accepted.
  EXPECT_EQ(run_reduce_cli(trace + " --compare " + trace + " --tolerance 0.9", dir).code, 0);
  EXPECT_EQ(run_reduce_cli(trace + " --ops --ops-top 5", dir).err.find("applies with"), std::string::npos);  // no profile here
  EXPECT_EQ(run_reduce_cli(trace + " --intra-gbps 100 --link-warn 0.5", dir).code, 0);
}

TEST(ReduceCli, ReferenceMustBeThePublishedFiguresCsv) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  std::ofstream(dir.file("junk.csv")) << "this is not\nthe reference\n";
  std::ofstream(dir.file("header_only.csv")) << "system,model,precision,batch_per_device,variant,nodes,gpus_per_node,samples_per_s,speedup\n";
  expect_one_line_error(run_reduce_cli(trace + " --reference " + trace, dir), 2, "is an HDF5 results file", "--reference a.h5");
  expect_one_line_error(run_reduce_cli(trace + " --reference " + dir.path(), dir), 2, "is a directory", "--reference DIR");
  expect_one_line_error(run_reduce_cli(trace + " --reference /dev/zero", dir), 2, "larger than 16 MiB", "--reference /dev/zero");  // read for ever before
  expect_one_line_error(run_reduce_cli(trace + " --reference " + dir.file("junk.csv"), dir), 2, "--reference", "junk");
  expect_one_line_error(run_reduce_cli(trace + " --reference " + dir.file("header_only.csv"), dir), 2, "no reference figures",
                        "header only");
  // Rows that would mislead: a point given twice (the first won), text read as a number, a rate
  // printed as 60 digits, a '|' that splits the markdown row. A spreadsheet's byte-order mark is
  // no error.
  const std::string header = "system,model,precision,batch_per_device,variant,nodes,gpus_per_node,samples_per_s,speedup\n";
  const std::string row = "x,resnet50,fp32,64,,1,1,300,1\n";
  const std::pair<std::string, std::string> bad[] = {
      {row + row, ":3: the same system, model, precision, batch, variant and scale as an earlier row"},
      {"x,resnet50,fp32,0x40,,1,1,300,1\n", ":2: not a positive number"},
      {"x,resnet50,fp32,64,,1,1, 300,1\n", ":2: not a positive number"},
      {"x,resnet50,fp32,64,,1,1,1e300,1\n", ":2: not a positive number"},
      {"x|y,resnet50,fp32,64,,1,1,300,1\n", ":2: field 1 holds '|'"},
  };
  for (const auto& [rows, want] : bad) {
    std::ofstream(dir.file("bad.csv"), std::ios::trunc) << header << rows;
    expect_one_line_error(run_reduce_cli(trace + " --reference " + dir.file("bad.csv"), dir), 2, want, rows);
  }
  std::ofstream(dir.file("bom.csv"), std::ios::trunc) << "\xEF\xBB\xBF" << header << row;
  EXPECT_EQ(run_reduce_cli(trace + " --reference " + dir.file("bom.csv"), dir).code, 0);
}

TEST(ReduceCli, RunsTooShortForTheWindowAreAnErrorNotAnEmptyTable) {
  test::TempDir dir;
  const std::string path = dir.file("short.h5");
  append_runs(path, {test::run_at("resnet50", 1, 1, 0.1, RunStatus::complete, 10)});
  auto r = run_reduce_cli(path, dir);
  expect_one_line_error(r, 2, "shorter than their recorded warm-up + window = 120 iterations (the longest has 10)", "short runs");
  EXPECT_EQ(run_reduce_cli(path + " --warmup 2 --window 8", dir).code, 0);
  expect_one_line_error(run_reduce_cli(path + " --warmup 2 --window 9", dir), 2,
                        "shorter than --warmup + --window = 11 iterations (the longest has 10); lower", "short runs, overridden");
}

// Issue 27 item 4: the README's "Running it" pair with a run shorter than 120 iterations works
// with no option: the run is measured by its own warm-up and length, and the report says so.
TEST(ReduceCli, ARunIsMeasuredByItsOwnWarmupAndLength) {
  test::TempDir dir;
  const std::string path = dir.file("short.h5");
  append_runs(path, {test::run_of_length(10, 2, 0.1)});
  auto r = run_reduce_cli(path, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("samples in iterations 3-10 (each run's own recorded warm-up and length)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 1 | 1 | 32 | 320.00 |"), std::string::npos) << r.out;
  r = run_reduce_cli(path + " --window 4", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("samples in iterations 3-6 (set by --warmup/--window)"), std::string::npos) << r.out;
}

// Issue 27 item 11: a run is counted once however its file is named: twice, by another
// path, a symlink, inside a folder also given, or a copy of the file.
TEST(ReduceCli, TheSameRunIsCountedOnceHoweverItsFileIsNamed) {
  test::TempDir dir;
  const std::string a = make_trace(dir, "a.h5", 0.1);  // one 1n1g and one 1n2g run
  std::filesystem::create_symlink(a, dir.file("link.h5"));
  std::filesystem::create_directories(dir.file("sub"));
  std::filesystem::copy_file(a, dir.file("sub/copy.h5"));
  const std::string other_path = dir.path() + "/sub/../a.h5";
  const auto once = run_reduce_cli(a, dir);
  ASSERT_EQ(once.code, 0) << once.err;
  for (const std::string& args : {a + " " + a, a + " " + other_path, a + " " + dir.file("link.h5"), a + " " + dir.path(),
                                  a + " " + dir.file("sub/copy.h5"), dir.path() + " " + dir.file("sub")}) {
    auto r = run_reduce_cli(args, dir);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    EXPECT_NE(r.out.find("| 1 | 1 | 1 | 320.00 |"), std::string::npos) << args << ":\n" << r.out;  // repeats: 1 run at 1n1g
    EXPECT_NE(r.out.find("| 1 | 2 | 1 | 640.00 |"), std::string::npos) << args << ":\n" << r.out;
    EXPECT_NE(r.err.find("note: "), std::string::npos) << args;
    EXPECT_TRUE(r.err.find("read once") != std::string::npos || r.err.find("counted once") != std::string::npos) << r.err;
  }
  // Two distinct runs of equal settings and speed are two repeats, not one.
  const std::string b = make_trace(dir, "b.h5", 0.1);
  auto r = run_reduce_cli(a + " " + b, dir);
  EXPECT_NE(r.out.find("| 1 | 1 | 2 | 320.00 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

// Issue 27 item 8: "-" and /dev/stdout are standard output (a file named "-" was created, or
// the write failed); only that document is printed there; --plot writes SVG and refuses
// another extension rather than putting SVG bytes in a .png.
TEST(ReduceCli, StandardOutputAsAnOutputAndThePlotIsSvg) {
  test::TempDir dir;
  const std::string a = make_trace(dir, "a.h5", 0.1);
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());  // a file named "-" would appear here
  auto r = run_reduce_cli(a + " --csv -", dir);
  std::filesystem::current_path(cwd);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("config,model,precision,", 0), 0u) << r.out;  // the CSV alone
  EXPECT_EQ(r.out.find("# dlperf results"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("-")));
  r = run_reduce_cli(a + " --json /dev/stdout", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\"1n2r\""), std::string::npos) << r.out;
  r = run_reduce_cli(a + " --plot - --csv " + dir.file("o.csv"), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("<svg", 0), 0u) << r.out.substr(0, 200);
  EXPECT_TRUE(std::filesystem::exists(dir.file("o.csv")));
  expect_one_line_error(run_reduce_cli(a + " --csv - --json -", dir), 2, "--csv and --json both name standard output", "two on stdout");
  expect_one_line_error(run_reduce_cli(a + " --plot " + dir.file("x.png"), dir), 2, "the plot is SVG; name the file .svg (for a PNG: rsvg-convert",
                        "png");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.png")));
  EXPECT_EQ(run_reduce_cli(a + " --plot " + dir.file("x.SVG"), dir).code, 0);
}

// A file with one damaged run: run_000002's loss dataset removed.
std::string trace_with_damaged_run(const test::TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  append_runs(path, {test::run_at("resnet50", 1, 1, 0.1), test::run_at("resnet50", 1, 1, 0.1), test::run_at("resnet50", 1, 1, 0.1)});
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  EXPECT_GE(f, 0);
  EXPECT_GE(H5Ldelete(f, "/runs/run_000002/loss", H5P_DEFAULT), 0);
  H5Fclose(f);
  return path;
}

TEST(ReduceCli, UnreadableFilesAndRunsAreSkippedAndNamed) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("d"));
  make_trace(dir, "d/good.h5", 0.1);
  std::ofstream(dir.file("d/junk.h5")) << "not hdf5";
  trace_with_damaged_run(dir, "d/damaged.h5");
  auto r = run_reduce_cli(dir.file("d"), dir);
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("skipped " + dir.file("d/junk.h5") + ": not an HDF5 file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("skipped " + dir.file("d/damaged.h5") + ":/runs/run_000002: corrupt dlperf trace"), std::string::npos)
      << r.err;
  // good.h5: 1n1g and 1n2g; damaged.h5: two readable 1n1g runs -> 3 runs at 1n1g.
  EXPECT_NE(r.out.find("| 1 | 1 | 3 | 320.00 |"), std::string::npos) << r.out;
  auto skip = run_reduce_cli("--skip-bad " + dir.file("d"), dir);
  EXPECT_EQ(skip.code, 0) << skip.err;
  EXPECT_NE(skip.err.find("skipped"), std::string::npos);  // still named
}

TEST(ReduceCli, DlperfResultJsonKeyedRn50IsABaseline) {
  test::TempDir dir;
  const std::string path = dir.file("gpu.h5");
  RunRecord one = test::run_at("resnet50", 1, 1, 0.1), two = test::run_at("resnet50", 1, 2, 0.1);
  one.info.backend = two.info.backend = "cuda";
  append_runs(path, {one, two});
  // DLPerf's own result file (DLPerf/Tensorflow/resnet50v1.5/result/resnet50_result.json shape).
  std::ofstream(dir.file("dlperf.json")) << R"({"rn50": {"1n1g": {"average_speed": 321.8, "batch_size_per_device": 32,
      "median_speed": 320.0, "speedup": 1.0}, "1n2g": {"average_speed": 700, "batch_size_per_device": 32,
      "median_speed": 700, "speedup": 2.0}}})";
  auto r = run_reduce_cli(path + " --compare " + dir.file("dlperf.json") + " --tolerance 0.95", dir);
  EXPECT_EQ(r.code, 1) << r.err;  // 640 / 700 = 0.914 < 0.95
  EXPECT_NE(r.out.find("| resnet50_fp32_b32_cuda | 1n1g | 320.00 | 320.00 | 1.000 | ok: the baseline names no precision: compared as fp32 |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| resnet50_fp32_b32_cuda | 1n2g | 640.00 | 700.00 | 0.914 | REGRESSION: the baseline names no precision"),
            std::string::npos)
      << r.out;
}

TEST(ReduceCli, BaselineJsonIsReadStrictly) {
  test::TempDir dir;
  const std::string trace = make_trace(dir, "a.h5", 0.1);
  const std::string ok = R"("1n1r": {"median_speed": 320, "batch_size_per_device": 32})";
  for (const std::string& bad : {"{\"resnet50\": {" + ok + "}, \"resnet50\": {" + ok + "}}",
                                std::string(R"({"resnet50": {"1n1r": {"median_speed": NaN}}})"),
                                std::string(R"({"resnet50": {"1n1r": {"median_speed": 0x140}}})")}) {
    std::ofstream(dir.file("b.json"), std::ios::trunc) << bad;
    expect_one_line_error(run_reduce_cli(trace + " --compare " + dir.file("b.json"), dir), 2, "invalid JSON", bad);
  }
}

}  // namespace
}  // namespace dlperf
