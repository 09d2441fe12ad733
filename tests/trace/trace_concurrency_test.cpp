// Several processes appending to one file at once lose nothing; a writer SIGKILLed at any
// moment leaves every earlier run intact and the file appendable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "trace/trace_reader.h"
#include "trace/trace_writer.h"
#include "trace_test_util.h"

namespace dlperf {
namespace {

// Runs `body` in a child process; the child exits 0 on success, 1 on any exception.
template <class Body>
pid_t spawn(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 0;
    try {
      body();
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  return pid;
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(TraceConcurrency, ConcurrentAppendersLoseNothing) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  constexpr int kProcs = 4, kRunsEach = 4;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p)
    kids.push_back(spawn([&, p] {
      for (int k = 0; k < kRunsEach; ++k) {
        RunRecord r = test::small_run(4, 40, p * 100 + k);
        TraceWriter w(path, r.info);
        RunRecord half = r;
        for (auto& rank : half.ranks) rank.iterations.resize(20);
        w.flush(half);
        w.finish(r, RunStatus::complete);
      }
    }));
  for (pid_t k : kids) EXPECT_EQ(wait_exit_code(k), 0);

  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), static_cast<size_t>(kProcs * kRunsEach));
  std::set<int64_t> seen;
  for (const auto& r : runs) {
    EXPECT_EQ(r.info.status, RunStatus::complete);
    ASSERT_EQ(r.ranks.size(), 4u);
    EXPECT_EQ(r.ranks[3].iterations.size(), 40u);
    seen.insert(r.info.repeat_index);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kProcs * kRunsEach));
}

TEST(TraceConcurrency, SigkillMidWriteKeepsEarlierRuns) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  append_runs(path, {test::small_run(2, 10, 0)});  // an earlier run that must survive
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A writer that keeps appending and flushing big runs until killed.
    pid_t kid = spawn([&] {
      for (int k = 1;; ++k) {
        RunRecord r = test::small_run(32, 400, 1000 * (attempt + 1) + k);
        TraceWriter w(path, r.info);
        w.flush(r);
        w.finish(r, RunStatus::complete);
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 70 * attempt));
    ::kill(kid, SIGKILL);
    EXPECT_EQ(wait_exit_code(kid), 128 + SIGKILL);

    auto runs = read_runs(path);  // readable, no error
    ASSERT_GE(runs.size(), 1u);
    EXPECT_EQ(runs[0].info.repeat_index, 0);
    EXPECT_EQ(runs[0].info.status, RunStatus::complete);
    // Every stored run is whole: complete ones have all their data, the killed one is
    // "running" with exactly what its last flush wrote (all or nothing).
    for (size_t k = 1; k < runs.size(); ++k) {
      const RunRecord& r = runs[k];
      if (r.ranks.empty()) continue;  // registered, killed before its first flush
      ASSERT_EQ(r.ranks.size(), 32u);
      EXPECT_EQ(r.ranks[31].iterations.size(), 400u);
    }
  }
  // The lock died with the writer: the file is still appendable and the stale temporary goes.
  const size_t before = read_runs(path).size();
  append_runs(path, {test::small_run(2, 10, 7)});
  EXPECT_EQ(read_runs(path).size(), before + 1);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace dlperf
