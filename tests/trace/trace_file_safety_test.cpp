// The results file as a cluster user meets it (issue 18 rows 1, 5, 6, 10): a symlinked file
// is written through the link, a hard-linked one is refused, mode, group and ACL survive an
// append, a stale temporary is removed, a file with a damaged run is not appended to, and a
// wait for the lock names the holder, ends at the timeout and ends on a stop flag.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <thread>

#include "core/error.h"
#include "core/file_io.h"
#include "trace/file_lock.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"
#include "trace_test_util.h"

namespace dlperf {
namespace {
namespace fs = std::filesystem;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(TraceFileSafety, SymlinkedResultsFileIsWrittenThroughTheLink) {
  test::TempDir dir;
  fs::create_directories(dir.file("scratch"));
  const std::string target = dir.file("scratch/results.h5"), link = dir.file("results.h5");
  fs::create_symlink("scratch/results.h5", link);  // relative, dangling until the first run
  append_runs(link, {test::small_run()});
  append_runs(link, {test::small_run()});
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link))) << "the link was replaced by a regular file";
  ASSERT_TRUE(fs::is_regular_file(target));
  EXPECT_EQ(read_runs(target).size(), 2u);
  EXPECT_EQ(read_runs(link).size(), 2u);
  EXPECT_TRUE(fs::exists(target + ".lock"));  // one lock per real file, whatever name reaches it
  EXPECT_FALSE(fs::exists(target + ".tmp"));
}

TEST(TraceFileSafety, HardLinkedResultsFileIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  append_runs(path, {test::small_run()});
  fs::create_hard_link(path, dir.file("other-name.h5"));
  const std::string before = bytes_of(path);
  const std::string w = usage_error_of([&] { append_runs(path, {test::small_run()}); });
  EXPECT_NE(w.find("has 2 hard links"), std::string::npos) << w;
  EXPECT_EQ(bytes_of(path), before);
  EXPECT_EQ(read_runs(dir.file("other-name.h5")).size(), 1u);
}

// Appending replaces the file, which needs only the folder's permission: a trace its owner made
// read-only was rewritten all the same. Refused with the mode, for root too; nothing changes.
TEST(TraceFileSafety, ReadOnlyResultsFileIsRefused) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  append_runs(path, {test::small_run()});
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  const std::string before = bytes_of(path);
  const std::string w = usage_error_of([&] { append_runs(path, {test::small_run()}); });
  EXPECT_NE(w.find("r.h5 is write-protected (mode 0444): adding a run replaces the file"), std::string::npos) << w;
  EXPECT_EQ(bytes_of(path), before);
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);  // made writable again, it takes the run
  append_runs(path, {test::small_run()});
  EXPECT_EQ(read_runs(path).size(), 2u);
}

// A refused --output (a text file, a folder) leaves no "<file>.lock" beside it: the checks that
// need no lock come before the lock file is created.
TEST(TraceFileSafety, ARefusedTargetGetsNoLockFile) {
  test::TempDir dir;
  std::ofstream(dir.file("notes.txt")) << "my notes\n";
  fs::create_directories(dir.file("folder.h5"));
  for (const char* name : {"notes.txt", "folder.h5"}) {
    usage_error_of([&] { append_runs(dir.file(name), {test::small_run()}); });
    EXPECT_FALSE(fs::exists(dir.file(name) + ".lock")) << name;
  }
  EXPECT_EQ(bytes_of(dir.file("notes.txt")), "my notes\n");
}

TEST(TraceFileSafety, ModeGroupAndAclSurviveAnAppend) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  append_runs(path, {test::small_run()});
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  const bool root = ::geteuid() == 0;
  const gid_t group = root ? 4242 : ::getegid();
  ASSERT_EQ(::chown(path.c_str(), static_cast<uid_t>(-1), group), 0) << std::strerror(errno);
  // POSIX ACL "user::rw-, user:1234:r--, group::r--, mask::r--, other::---" as the kernel stores it.
  struct Entry {
    uint16_t tag, perm;
    uint32_t id;
  };
  const uint32_t version = 2, none = 0xffffffffu;
  const Entry entries[] = {{0x01, 6, none}, {0x02, 4, 1234}, {0x04, 4, none}, {0x10, 4, none}, {0x20, 0, none}};
  std::string acl(reinterpret_cast<const char*>(&version), 4);
  acl.append(reinterpret_cast<const char*>(entries), sizeof entries);
  const bool acls = ::setxattr(path.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) == 0;

  append_runs(path, {test::small_run()});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_gid, group);
  if (acls) {
    std::string got(256, '\0');
    const ssize_t n = ::getxattr(path.c_str(), "system.posix_acl_access", got.data(), got.size());
    ASSERT_GT(n, 0) << "the ACL was lost";
    got.resize(static_cast<size_t>(n));
    EXPECT_EQ(got, acl);
  } else {
    std::cout << "ACLs not supported on " << dir.file("") << " (" << std::strerror(errno) << "): ACL part skipped\n";
  }
  EXPECT_EQ(read_runs(path).size(), 2u);
}

TEST(TraceFileSafety, StaleTemporaryOfADeadWriterIsRemoved) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  append_runs(path, {test::small_run()});
  std::ofstream(path + ".tmp") << std::string(100000, 'x');  // what a SIGKILLed writer leaves
  append_runs(path, {test::small_run()});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(read_runs(path).size(), 2u);
}

TEST(TraceFileSafety, NoSpaceMessageNamesTheFileSystem) {
  test::TempDir dir;
  const std::string w = write_failure_message(dir.file("r.h5.tmp"), ENOSPC);
  EXPECT_EQ(w.rfind("no space left on /", 0), 0u) << w;
  EXPECT_NE(w.find(" ("), std::string::npos) << w;  // "(ext4)", "(tmpfs)", ...
  EXPECT_NE(write_failure_message(dir.file("r.h5.tmp"), EDQUOT).find("quota"), std::string::npos);
}

TEST(TraceFileSafety, FileWithADamagedRunIsNotAppendedTo) {
  test::TempDir dir;
  const std::string path = dir.file("r.h5");
  append_runs(path, {test::small_run(), test::small_run(), test::small_run()});
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Ldelete(f, "/runs/run_000002/iteration_end", H5P_DEFAULT), 0);
  H5Fclose(f);
  const std::string before = bytes_of(path);
  const std::string w = usage_error_of([&] { TraceWriter writer(path, test::small_run().info); });
  EXPECT_NE(w.find(path + ":/runs/run_000002"), std::string::npos) << w;
  EXPECT_NE(w.find("not appending"), std::string::npos) << w;
  EXPECT_EQ(bytes_of(path), before);
}

// A child process holds the lock for `hold` seconds; returns its pid once it holds it.
pid_t hold_lock(const std::string& lock_path, double hold) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    {
      FileLock lock(lock_path);
      (void)!::write(ready[1], "x", 1);
      std::this_thread::sleep_for(std::chrono::duration<double>(hold));
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  EXPECT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  return child;
}

TEST(TraceFileLock, WaitNamesTheHolderAndGivesUpAtTheTimeout) {
  test::TempDir dir;
  const std::string lock = dir.file("r.h5.lock");
  const pid_t holder = hold_lock(lock, 5);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  LockOptions opt;
  opt.timeout_seconds = 0.6;
  std::vector<std::string> heard;
  opt.on_wait = [&](const std::string& line) { heard.push_back(line); };
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  try {
    FileLock waiting(lock, opt);
    ADD_FAILURE() << "took a lock another process holds";
  } catch (const LockTimeout& e) {
    what = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.6);
  EXPECT_LT(waited, 2.0);
  const std::string who = std::string(host) + " pid " + std::to_string(holder);
  EXPECT_NE(what.find("gave up after"), std::string::npos) << what;
  EXPECT_NE(what.find(who), std::string::npos) << what;
  ASSERT_FALSE(heard.empty());
  EXPECT_NE(heard[0].find(who), std::string::npos) << heard[0];
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  // The holder died without clearing its record: the lock is free and is taken at once.
  FileLock after(lock, opt);
}

TEST(TraceFileLock, WaitEndsWhenTheStopFlagIsSet) {
  test::TempDir dir;
  const std::string lock = dir.file("r.h5.lock");
  const pid_t holder = hold_lock(lock, 5);
  std::atomic<bool> stop{false};
  LockOptions opt;
  opt.cancel = &stop;
  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(FileLock waiting(lock, opt), LockInterrupted);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5);
  signaller.join();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
}

}  // namespace
}  // namespace dlperf
