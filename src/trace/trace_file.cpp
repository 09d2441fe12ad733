// Crash-safe, concurrency-safe modification of a trace file by write-then-rename under a
// flock (why this design: docs/trace-schema.md, "Appending safely"). HDF5 1.10 cannot
// modify a file in place without a window in which a SIGKILL leaves it unreadable; rename(2)
// within one directory is atomic, so the original is only ever replaced by a complete copy.
#include "trace/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/file_io.h"
#include "trace/trace_reader.h"
#include "trace/trace_schema.h"

namespace dlperf {
namespace {
namespace fs = std::filesystem;

[[noreturn]] void throw_fault(const std::string& m) { throw Error(ErrorKind::fault, m); }

h5::Handle file_access_properties() {
  h5::Handle fapl = DLPERF_H5(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
  // HDF5's own file lock fails on file systems without flock support; dlperf's lock file
  // is what serialises writers, and replaced files are never modified in place.
  DLPERF_CHECK_HDF5(H5Pset_file_locking(fapl, false, true));
#endif
  return fapl;
}

// The errno HDF5's file driver saw, from its error stack ("... errno = 28, error message =
// 'No space left on device' ..."); 0 when the stack does not say. Call before any other
// HDF5 call: each one clears the stack.
int errno_from_hdf5_stack() {
  int found = 0;
  auto cb = [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
    if (e->desc) {
      if (const char* p = std::strstr(e->desc, "errno = ")) *static_cast<int*>(data) = std::atoi(p + 8);
    }
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, cb, &found);
  return found;
}

// Nearly nothing left: a failure whose errno is unknown is blamed on space (HDF5 does not
// always pass errno up, e.g. from its metadata cache flush).
bool file_system_full(const std::string& path) {
  struct statvfs v {};
  const std::string dir = fs::path(path).parent_path().string();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &v) != 0) return false;
  return static_cast<unsigned long long>(v.f_bavail) * v.f_frsize < 64 * 1024;
}

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw_fault("cannot open " + path + " to sync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // Directories on some file systems refuse fsync (EINVAL); the rename is still atomic there.
  if (rc != 0 && !(flags & O_DIRECTORY && e == EINVAL)) throw_fault(write_failure_message(path, e, "syncing"));
}

// Copies `from` (stat'ed as `st`) to the new file `to`, bytes and attributes.
void copy_trace(const std::string& from, const struct stat& st, const std::string& to) {
  struct statvfs v {};
  const std::string dir = fs::path(to).parent_path().string();
  if (::statvfs(dir.c_str(), &v) == 0 &&
      static_cast<unsigned long long>(v.f_bavail) * v.f_frsize < static_cast<unsigned long long>(st.st_size)) {
    std::string name = describe_filesystem(to);
    throw_fault("no space left on " + (name.empty() ? dir : name) + " for the copy of " + from + " that an append needs (" +
                std::to_string(st.st_size / (1024 * 1024) + 1) + " MiB; " +
                std::to_string(static_cast<unsigned long long>(v.f_bavail) * v.f_frsize / (1024 * 1024)) + " MiB free)");
  }
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw_usage_error(from + ": cannot read: " + std::strerror(errno));
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    const int e = errno;
    ::close(in);
    throw_fault(write_failure_message(to, e, "creating"));
  }
  int err = 0;
  try {
    copy_file_attributes(from, st, out, to);
    std::vector<char> buf(1 << 20);
    for (;;) {
      const ssize_t r = ::read(in, buf.data(), buf.size());
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        err = r < 0 ? errno : 0;
        break;
      }
      for (ssize_t done = 0; done < r;) {
        const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(r - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          err = errno;
          break;
        }
        done += w;
      }
      if (err) break;
    }
  } catch (...) {
    ::close(in);
    ::close(out);
    throw;
  }
  ::close(in);
  if (::close(out) != 0 && !err) err = errno;
  if (err) throw_fault(write_failure_message(to, err, "copying " + from + " to"));
}

// Removes the temporary unless it was renamed into place.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep) ::unlink(path.c_str());
  }
};

}  // namespace

h5::Handle open_trace_readonly(const std::string& path) {
  h5::silence_error_stack();
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw_usage_error(path + ": no such file");
  if (fs::is_directory(status)) throw_usage_error(path + ": is a directory, not a trace file");
  if (fs::file_size(path, ec) == 0) throw_usage_error(path + ": empty file, not a dlperf trace");
  if (::access(path.c_str(), R_OK) != 0) throw_usage_error(path + ": not readable: " + std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) throw_usage_error(path + ": not an HDF5 file");
  h5::Handle fapl = file_access_properties();
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl);
  if (f < 0) throw_usage_error(path + ": corrupt or truncated HDF5 file (cannot be opened)");
  return h5::Handle(f, H5Fclose);
}

void update_trace_file(const std::string& path, const std::function<void(hid_t file)>& edit, const UpdateOptions& opt) {
  h5::silence_error_stack();
  // A symlinked results file: replace what it points to, so the link and its target stay one file.
  const std::string target = resolve_symlinks(path);
  const std::string named = fs::absolute(path).lexically_normal() == fs::path(target) ? path : path + " (-> " + target + ")";
  FileLock lock(target + ".lock", opt.lock);
  // Only the lock holder writes the temporary, so one found now was left by a killed writer.
  TempFile tmp{target + ".tmp"};
  ::unlink(tmp.path.c_str());
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) throw_usage_error(named + ": not a regular file");
  if (exists && st.st_nlink > 1)
    throw_usage_error(named + " has " + std::to_string(st.st_nlink) +
                      " hard links: appending replaces the file, which would leave the other names on the old copy; "
                      "remove the other links (or write to a copy)");
  h5::Handle fapl = file_access_properties();
  h5::Handle file;  // outside the try: its error stack is read before it is closed
  try {
    if (exists) {
      {
        h5::Handle check = open_trace_readonly(target);
        trace_schema::check_root(check, named);
        if (opt.check_existing_runs) check_all_runs_readable(check, path);
      }
      copy_trace(target, st, tmp.path);
      file = DLPERF_H5(H5Fopen(tmp.path.c_str(), H5F_ACC_RDWR, fapl), H5Fclose);
    } else {
      file = DLPERF_H5(H5Fcreate(tmp.path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl), H5Fclose);
      trace_schema::write_root(file);
    }
    edit(file);
    DLPERF_CHECK_HDF5(H5Fflush(file, H5F_SCOPE_GLOBAL));
    // Closing writes the last metadata: its status is the file's.
    DLPERF_CHECK_HDF5(H5Fclose(file.release()));
    fsync_path(tmp.path, O_RDONLY);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage) throw;
    const int err = errno_from_hdf5_stack();
    file.reset();  // closed before the temporary is removed
    if (is_out_of_space(err) || (e.kind() == ErrorKind::library && file_system_full(tmp.path)))
      throw_fault(write_failure_message(tmp.path, err ? err : ENOSPC) + " while appending to " + named +
                  "; the file is unchanged");
    if (e.kind() == ErrorKind::library)
      throw_fault("cannot write " + tmp.path + " while appending to " + named + ": " + e.what());
    throw;
  }
  if (::rename(tmp.path.c_str(), target.c_str()) != 0)
    throw_fault("cannot rename " + tmp.path + " to " + target + ": " + std::strerror(errno));
  tmp.keep = true;
  const fs::path dir = fs::path(target).parent_path();
  fsync_path(dir.empty() ? std::string(".") : dir.string(), O_RDONLY | O_DIRECTORY);
}

}  // namespace dlperf
