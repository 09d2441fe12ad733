// Optional pinning of a rank to a disjoint range of cores, for the CPU backend's `--threads`
// per rank: rank with local rank L uses cores [L*threads, (L+1)*threads) of the cores this
// process may run on (sched_getaffinity, so a Slurm/cgroup binding is respected). Pinning the
// process before its thread pool starts makes the OpenMP threads inherit the range.
#pragma once

#include <vector>

namespace dlperf {

std::vector<int> allowed_cores();  // sorted CPU ids of this process's affinity mask

// The `threads` cores for local rank `local_rank`; Error(usage) when they do not fit.
std::vector<int> disjoint_core_range(const std::vector<int>& allowed, int local_rank, int local_size, int threads);

// Restricts the calling thread (and threads it creates afterwards) to `cores`.
void pin_to_cores(const std::vector<int>& cores);

}  // namespace dlperf
