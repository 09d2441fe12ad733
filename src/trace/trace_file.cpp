// Crash-safe, concurrency-safe modification of a trace file by write-then-rename under a
// flock (why this design: docs/trace-schema.md, "Appending safely"). HDF5 1.10 cannot
// modify a file in place without a window in which a SIGKILL leaves it unreadable; rename(2)
// within one directory is atomic, so the original is only ever replaced by a complete copy.
#include "trace/trace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "trace/file_lock.h"
#include "trace/trace_schema.h"

namespace dlperf {
namespace {
namespace fs = std::filesystem;

h5::Handle file_access_properties() {
  h5::Handle fapl = DLPERF_H5(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
  // HDF5's own file lock fails on file systems without flock support; dlperf's lock file
  // is what serialises writers, and replaced files are never modified in place.
  DLPERF_CHECK_HDF5(H5Pset_file_locking(fapl, false, true));
#endif
  return fapl;
}

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw_usage_error("cannot open " + path + " to sync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // Directories on some file systems refuse fsync (EINVAL); the rename is still atomic there.
  if (rc != 0 && !(flags & O_DIRECTORY && e == EINVAL))
    throw_usage_error("cannot sync " + path + ": " + std::strerror(e));
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

void update_trace_file(const std::string& path, const std::function<void(hid_t file)>& edit) {
  h5::silence_error_stack();
  FileLock lock(path + ".lock");
  // Only the lock holder writes the temporary, so one left by a killed writer is stale.
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  h5::Handle fapl = file_access_properties();
  {
    h5::Handle file;
    if (fs::exists(path)) {
      { h5::Handle check = open_trace_readonly(path); trace_schema::check_root(check, path); }
      fs::copy_file(path, tmp, fs::copy_options::overwrite_existing, ec);
      if (ec) throw_usage_error("cannot copy " + path + " to " + tmp + ": " + ec.message());
      file = DLPERF_H5(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, fapl), H5Fclose);
      trace_schema::upgrade_root(file);  // an older minor version: this writer may add its fields
    } else {
      file = DLPERF_H5(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), H5Fclose);
      trace_schema::write_root(file);
    }
    try {
      edit(file);
    } catch (...) {
      file.reset();
      fs::remove(tmp, ec);
      throw;
    }
    DLPERF_CHECK_HDF5(H5Fflush(file, H5F_SCOPE_GLOBAL));
  }  // closed here: every byte is in the copy before it is synced and renamed
  fsync_path(tmp, O_RDONLY);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw_usage_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  fs::path dir = fs::path(path).parent_path();
  fsync_path(dir.empty() ? std::string(".") : dir.string(), O_RDONLY | O_DIRECTORY);
}

}  // namespace dlperf
