// dlperf-reduce as a program: outputs written, exit 0 / 1 (regression) / 2 (bad input with
// one line on stderr), directories as input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "analysis_test_util.h"
#include "trace/trace_writer.h"

namespace dlperf {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run_reduce_cli(const std::string& args, const test::TempDir& dir) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = std::string(DLPERF_BINARY_DIR) + "/analysis/dlperf-reduce " + args + " >" + out + " 2>" + err;
  int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
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

}  // namespace
}  // namespace dlperf
