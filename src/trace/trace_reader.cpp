// read_runs: opens read-only without taking the writers' lock (writers replace the file by
// rename, so an open file is always a complete snapshot) and turns any failure inside the
// file into a usage error naming the file and run, because a bad file is the user's input.
#include "trace/trace_reader.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <functional>
#include <new>
#include <stdexcept>

#include "core/error.h"
#include "trace/h5_io.h"
#include "trace/trace_file.h"
#include "trace/trace_schema.h"

namespace dlperf {
namespace {

// Runs `fn`, turning every failure into one usage-error line "<where>: corrupt dlperf trace: ...".
template <class Fn>
auto as_trace_error(const std::string& where, bool names_where, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage && names_where) throw;  // already names the file
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: implausible sizes");
  } catch (const std::length_error&) {
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: implausible sizes");
  }
}

// The names of the run groups, after checking the file's root: a file-level failure.
std::vector<std::string> run_names(hid_t file, const std::string& path) {
  return as_trace_error(path, true, [&] {
    trace_schema::check_root(file, path);
    h5::Handle runs = DLPERF_H5(H5Gopen2(file, trace_schema::kRunsGroup, H5P_DEFAULT), H5Gclose);
    std::vector<std::string> names;
    auto cb = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
      static_cast<std::vector<std::string>*>(op)->emplace_back(name);
      return 0;
    };
    DLPERF_CHECK_HDF5(H5Literate(runs, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names));
    return names;
  });
}

RunRecord read_one(hid_t file, const std::string& path, const std::string& name) {
  // Printable: a damaged run name's raw bytes would otherwise reach every message and report.
  const std::string where = printable(path + ":/" + trace_schema::kRunsGroup + "/" + name);
  RunRecord r = as_trace_error(where, false, [&] {
    h5::Handle group =
        DLPERF_H5(H5Gopen2(file, (std::string(trace_schema::kRunsGroup) + "/" + name).c_str(), H5P_DEFAULT), H5Gclose);
    return trace_schema::read_run_group(group);
  });
  r.location = where;
  return r;
}

std::vector<RunRecord> read_runs_in_process(const std::string& path) {
  h5::Handle file = open_trace_readonly(path);
  std::vector<RunRecord> out;
  for (const auto& name : run_names(file, path)) out.push_back(read_one(file, path, name));
  return out;
}

TolerantRead read_tolerant_in_process(const std::string& path) {
  TolerantRead out;
  h5::Handle file;
  std::vector<std::string> names;
  try {
    file = open_trace_readonly(path);
    names = run_names(file, path);
  } catch (const Error& e) {
    out.skipped.push_back({path, e.what()});
    return out;
  }
  for (const auto& name : names) {
    try {
      out.runs.push_back(read_one(file, path, name));
    } catch (const Error& e) {
      out.skipped.push_back({printable(path + ":/" + trace_schema::kRunsGroup + "/" + name), e.what()});
    }
  }
  return out;
}

// HDF5 1.10.8 can crash on some damaged object headers instead of returning an error: a
// corrupted attribute datatype message segfaults inside H5Aopen, and a file whose read failed
// half-way can segfault in H5Fclose (found by tests/trace's damaged-bytes fuzz). A reader must
// not crash on a bad input file, so the file is read first in a child process (`read`), with
// a time limit; only when the child read it is it read here, and the same reads then behave
// the same. A child that failed cleanly sends its one-line error back through a pipe.
constexpr unsigned kProbeSeconds = 120;

void probe_in_child(const std::string& path, const std::function<void()>& read) {
  int fds[2];
  if (::pipe(fds) != 0) return;  // cannot isolate: read in process
  std::fflush(nullptr);
  const pid_t kid = ::fork();
  if (kid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    return;
  }
  if (kid == 0) {
    ::close(fds[0]);
    ::alarm(kProbeSeconds);
    int code = 0;
    try {
      read();
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      [[maybe_unused]] ssize_t n = ::write(fds[1], msg.data(), msg.size());
      code = 1;
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) message.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(kid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && !message.empty()) throw Error(ErrorKind::usage, message);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    throw Error(ErrorKind::usage, path + ": corrupt dlperf trace: reading it did not finish in " + std::to_string(kProbeSeconds) + " s");
  throw Error(ErrorKind::usage, path + ": corrupt dlperf trace: the HDF5 library crashed reading it" +
                                    (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : std::string()));
}

}  // namespace

std::vector<RunRecord> read_runs(const std::string& path) {
  probe_in_child(path, [&] { read_runs_in_process(path); });
  return read_runs_in_process(path);
}

TolerantRead read_runs_tolerant(const std::string& path) {
  // The child skips what it cannot read, as the caller will; only a crash or a hang fails it,
  // and then the whole file is skipped.
  try {
    probe_in_child(path, [&] { read_tolerant_in_process(path); });
  } catch (const Error& e) {
    TolerantRead out;
    out.skipped.push_back({path, e.what()});
    return out;
  }
  return read_tolerant_in_process(path);
}

void check_all_runs_readable(hid_t file, const std::string& path) {
  // In process, without the child probe: the writer may be an MPI rank, where fork() is unsafe.
  for (const auto& name : run_names(file, path)) {
    try {
      read_one(file, path, name);
    } catch (const Error& e) {
      throw Error(ErrorKind::usage, std::string(e.what()) +
                                        "; not appending to a file with a damaged run (write to another --output, "
                                        "or move this file aside)");
    }
  }
}

}  // namespace dlperf
