// Reads every run of an HDF5 trace file back into RunRecords (schema: docs/trace-schema.md).
// Any file that is missing, empty, not HDF5, corrupt, truncated, foreign (HDF5 but not a
// dlperf trace) or of a newer major schema version throws dlperf::Error(usage) with a
// one-line message naming the file; HDF5's own error stack printing is switched off. The file
// is read first in a forked child, because HDF5 1.10 can crash on some damaged files: a crash
// or a hang there is reported as a corrupt file, never taken by the caller.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "trace/run_record.h"

namespace dlperf {

// Runs in append order; a run still being written (or whose writer was killed) has status
// running and the iterations of its last flush. Throws on the first unreadable run.
std::vector<RunRecord> read_runs(const std::string& path);

// An input left out, with the one-line reason naming it ("r.h5:/runs/run_000002: corrupt ...").
struct SkippedInput {
  std::string location;  // the file, or file:/runs/run_NNNNNN
  std::string why;       // the whole one-line message
};
struct TolerantRead {
  std::vector<RunRecord> runs;        // every run that could be read, in append order
  std::vector<SkippedInput> skipped;  // the file (when it cannot be opened at all) or its damaged runs
};
// Like read_runs, but a damaged run is skipped and named instead of failing the whole file.
TolerantRead read_runs_tolerant(const std::string& path);

// For a writer about to extend `file` (an open copy of `path`): throws Error(usage) naming the
// first run that cannot be read, so a damaged file is not grown further.
void check_all_runs_readable(hid_t file, const std::string& path);

}  // namespace dlperf
