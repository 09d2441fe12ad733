// The same run read twice is counted once (issue 27 item 11): `dlperf-reduce a.h5 a.h5`, the
// same file by another path or a symlink, a file inside a folder also given, or a copy of a
// results file beside the original would otherwise put a run into a median twice.
//
// Files are told apart by device and inode (read once each); runs by what identifies one run
// whatever file holds it: its start time, command line, hosts, Slurm job, repeat index and
// the common-clock start of its first iteration (two distinct runs never share all of them).
// Of two records of one run (a copy taken while it ran, and the finished file), the complete
// one is kept, else the longer.
#pragma once

#include <string>
#include <vector>

#include "trace/run_record.h"

namespace dlperf::analysis {

// The files to read: `files` in order, each file once (later names of the same file dropped;
// a file that cannot be stat'ed is kept, for the reader to report). `notes` gets one line per
// name dropped.
std::vector<std::string> distinct_files(const std::vector<std::string>& files, std::vector<std::string>& notes);

// Removes the second and later records of a run, keeping the best (above) at the first one's
// place. `notes` gets one line per record dropped, naming both locations.
void drop_duplicate_runs(std::vector<RunRecord>& runs, std::vector<std::string>& notes);

}  // namespace dlperf::analysis
