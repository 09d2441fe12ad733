// Reads every run of an HDF5 trace file back into RunRecords (schema: docs/trace-schema.md).
// Any file that is missing, empty, not HDF5, corrupt, truncated, foreign (HDF5 but not a
// dlperf trace) or of a newer major schema version throws dlperf::Error(usage) with a
// one-line message naming the file; HDF5's own error stack printing is switched off. The file
// is read first in a forked child, because HDF5 1.10 can crash on some damaged files: a crash
// or a hang there is reported as a corrupt file, never taken by the caller.
#pragma once

#include <string>
#include <vector>

#include "trace/run_record.h"

namespace dlperf {

// Runs in append order; a run still being written (or whose writer was killed) has status
// running and the iterations of its last flush.
std::vector<RunRecord> read_runs(const std::string& path);

}  // namespace dlperf
