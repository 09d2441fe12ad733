// Crash-safe, concurrency-safe modification of a trace file by write-then-rename under a
// flock (why this design: docs/trace-schema.md, "Appending safely"). HDF5 1.10 cannot
// modify a file in place without a window in which a SIGKILL leaves it unreadable; rename(2)
// within one directory is atomic, so the original is only ever replaced by a complete copy.
// The copy is edited in memory (HDF5's core driver, a file image) and written by plain,
// checked write(2) calls, so a full disk is a clean error and HDF5 never sees it.
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
#include "core/test_fault.h"
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

// The edit happens on an in-memory image (HDF5's core driver without a backing store): HDF5
// never writes to disk here, so a full file system cannot fail inside HDF5 (where a failed
// flush or close leaves the library in a state that crashes at exit), and every byte that
// reaches the disk goes through write_all() below, whose errno is checked.
h5::Handle memory_access_properties(const std::vector<char>& image) {
  h5::Handle fapl = DLPERF_H5(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  DLPERF_CHECK_HDF5(H5Pset_fapl_core(fapl, 1 << 20, /*backing_store=*/false));
  if (!image.empty()) DLPERF_CHECK_HDF5(H5Pset_file_image(fapl, const_cast<char*>(image.data()), image.size()));
  return fapl;
}

std::vector<char> read_whole(const std::string& path, const struct stat& st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_usage_error(path + ": cannot read: " + std::strerror(errno));
  std::vector<char> buf(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t r = ::read(fd, buf.data() + done, buf.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int e = r < 0 ? errno : EIO;
      ::close(fd);
      throw Error(ErrorKind::fault, "cannot read " + path + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(r);
  }
  ::close(fd);
  return buf;
}

// Refuses before writing anything when the file system cannot hold the new copy.
void check_space_for(const std::string& to, size_t bytes) {
  struct statvfs v {};
  const std::string dir = fs::path(to).parent_path().string();
  if (::statvfs(dir.c_str(), &v) != 0) return;
  const unsigned long long free_bytes = static_cast<unsigned long long>(v.f_bavail) * v.f_frsize;
  if (free_bytes >= bytes) return;
  const std::string name = describe_filesystem(to);
  throw_fault("no space left on " + (name.empty() ? dir : name) + " for the new copy of the results file (" +
              human_bytes(bytes) + " needed, " + human_bytes(free_bytes) + " free)");
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_fault("cannot open " + dir + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd), e = errno;
  ::close(fd);
  // Some file systems refuse fsync on a directory (EINVAL); the rename is still atomic there.
  if (rc != 0 && e != EINVAL) throw_fault("cannot sync " + dir + ": " + std::strerror(e));
}

// Removes the temporary unless it was renamed into place.
struct TempFile {
  std::string path;
  bool keep = false;
  ~TempFile() {
    if (!keep) ::unlink(path.c_str());
  }
};

// A results file dlperf may replace: a regular file its owner has not made read-only.
void check_replaceable(const std::string& target, const struct stat& st, const std::string& named) {
  if (!S_ISREG(st.st_mode)) throw_usage_error(named + ": not a regular file");
  if (const std::string p = write_protection(target, st); !p.empty())
    throw_usage_error(named + " " + p + ": adding a run replaces the file; make it writable (chmod u+w) or choose another --output");
}

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
  // Where "<file>.lock" does not exist yet, what can be refused without the lock is refused
  // before it is created, so a refused --output (a folder, a text file, a read-only trace)
  // leaves nothing behind. The checks are repeated under the lock (the file may have changed
  // in between); once the lock exists (every later flush of a run) they run there only.
  struct stat early {};
  if (::access((target + ".lock").c_str(), F_OK) != 0 && ::stat(target.c_str(), &early) == 0) {
    check_replaceable(target, early, named);
    trace_schema::check_root(open_trace_readonly(target), named);
  }
  FileLock lock(target + ".lock", opt.lock);
  test_fault_point("lock");  // test-only: a writer stopped or killed while it holds the lock
  // Only the lock holder writes the temporary, so one found now was left by a killed writer.
  TempFile tmp{target + ".tmp"};
  ::unlink(tmp.path.c_str());
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  if (exists) check_replaceable(target, st, named);
  if (exists && st.st_nlink > 1)
    throw_usage_error(named + " has " + std::to_string(st.st_nlink) +
                      " hard links: appending replaces the file, which would leave the other names on the old copy; "
                      "remove the other links (or write to a copy)");
  std::vector<char> image;
  if (exists) {
    h5::Handle check = open_trace_readonly(target);
    trace_schema::check_root(check, named);
    if (opt.check_existing_runs) check_all_runs_readable(check, path);
    image = read_whole(target, st);
  }
  {
    // The name only identifies the in-memory file; HDF5 insists that none exists on disk for
    // an image it opens, which holds for the temporary's name (removed above).
    h5::Handle fapl = memory_access_properties(image);
    h5::Handle file = exists ? DLPERF_H5(H5Fopen(tmp.path.c_str(), H5F_ACC_RDWR, fapl), H5Fclose)
                             : DLPERF_H5(H5Fcreate(tmp.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose);
    if (!exists) trace_schema::write_root(file);
    else trace_schema::upgrade_root(file);  // an older minor version: this writer may add its fields
    edit(file);
    DLPERF_CHECK_HDF5(H5Fflush(file, H5F_SCOPE_GLOBAL));
    const ssize_t size = DLPERF_CHECK_HDF5(H5Fget_file_image(file, nullptr, 0));
    image.assign(static_cast<size_t>(size), '\0');
    DLPERF_CHECK_HDF5(H5Fget_file_image(file, image.data(), image.size()));
  }  // closed in memory: nothing to fail on disk
  check_space_for(tmp.path, image.size());
  write_new_file(tmp.path, std::string_view(image.data(), image.size()), target, exists ? &st : nullptr);
  if (::rename(tmp.path.c_str(), target.c_str()) != 0)
    throw_fault("cannot rename " + tmp.path + " to " + target + ": " + std::strerror(errno));
  tmp.keep = true;
  const fs::path dir = fs::path(target).parent_path();
  fsync_directory(dir.empty() ? std::string(".") : dir.string());
}

}  // namespace dlperf
