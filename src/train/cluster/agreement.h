// Ranks agree before they work together: every rank of a job must run the same
// configuration (an MPMD launch, a script that differs per node or mixed dlperf builds would
// otherwise give a silently wrong throughput, or worse: replicas of different sizes corrupt
// each other's buffers in the first allreduce). Both checks are collective over `comm`, run
// before any allreduce, and end every rank the same way: Error(usage) (exit 2) whose
// message, on rank 0, names the first differing option and the first rank that differs.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlperf {

using Settings = std::vector<std::pair<std::string, std::string>>;

// Compares a 64-bit hash of `settings` (plus the dlperf build) over all ranks; on a mismatch
// the first differing rank sends its settings to rank 0, which names the option.
void check_ranks_agree(MPI_Comm comm, const Settings& settings);

// Compares the parameter count of the model each rank built.
void check_parameter_counts_agree(MPI_Comm comm, int64_t parameters);

// Compares where each rank keeps each parameter element (ParamStore::layout_signature): the
// gradients are averaged element by element, so ranks whose backends block the weights
// differently (oneDNN on AVX-512 and on SSE4.1: 16- and 8-wide blocks) cannot train together.
// `isa` names each rank's kernels in the message.
void check_parameter_layouts_agree(MPI_Comm comm, uint64_t signature, const std::string& isa);

}  // namespace dlperf
