// Whole-file operations on a trace: opening with dlperf's access properties, and the one
// crash-safe way to modify a trace (copy, edit the copy, rename it over the original, all
// under an exclusive lock). Used by TraceWriter; not needed by the trainer directly.
#pragma once

#include <hdf5.h>

#include <functional>
#include <string>

#include "trace/h5_handle.h"

namespace dlperf {

// Opens an existing file read-only (throws Error(usage) with a one-line reason when it is
// missing, empty, not HDF5, corrupt or truncated). Does not check the dlperf schema.
h5::Handle open_trace_readonly(const std::string& path);

// Under "<path>.lock": copies <path> (or creates a new trace) to "<path>.tmp", calls
// edit(file) on the copy, closes and fsyncs it, and renames it over <path>. Readers and a
// writer killed at any point see either the old or the new file, never a mix.
void update_trace_file(const std::string& path, const std::function<void(hid_t file)>& edit);

}  // namespace dlperf
