// Whole-file operations on a trace: opening with dlperf's access properties, and the one
// crash-safe way to modify a trace (copy, edit the copy, rename it over the original, all
// under an exclusive lock). Used by TraceWriter; not needed by the trainer directly.
#pragma once

#include <hdf5.h>

#include <functional>
#include <string>

#include "trace/file_lock.h"
#include "trace/h5_handle.h"

namespace dlperf {

// Opens an existing file read-only (throws Error(usage) with a one-line reason when it is
// missing, empty, not HDF5, corrupt or truncated). Does not check the dlperf schema.
h5::Handle open_trace_readonly(const std::string& path);

struct UpdateOptions {
  LockOptions lock;                  // how long to wait for "<file>.lock", and what may cut it short
  bool check_existing_runs = false;  // refuse a file with an unreadable run (a new run's registration)
};

// Under "<file>.lock": reads the file into memory (or creates a new trace there), calls
// edit(file) on that in-memory copy, writes the result to "<file>.tmp", fsyncs it and renames
// it over the file. Readers and a writer killed at any point see either the old or the new
// file, never a mix. Memory: about twice the file's size, for the length of the update.
//  * `path` may be a symlink: the file it points to is replaced (lock and temporary beside
//    it), the link stays. A file with several hard links is refused (a rename would split them).
//  * The copy keeps the file's owner (as root), group, mode and POSIX ACL.
//  * A temporary left by a killed writer is removed (under the lock no one else writes one).
//  * Every failure removes the temporary and leaves the file as it was; a full file system
//    or quota is one line, "no space left on <mount point> (<type>) ...".
// Throws Error(usage) for refusals (not a dlperf trace, damaged run, hard links), LockTimeout
// and LockInterrupted (file_lock.h), Error(fault) for write failures.
void update_trace_file(const std::string& path, const std::function<void(hid_t file)>& edit,
                       const UpdateOptions& opt = {});

}  // namespace dlperf
