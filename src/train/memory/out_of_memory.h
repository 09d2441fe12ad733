// Telling "out of memory" apart from every other failure, for --find-max-batch: a batch that
// does not fit is an answer, anything else is an error.
#pragma once

#include <exception>

namespace dlperf {

// True when the exception is an allocation failure for lack of memory: OutOfMemoryError (the
// CUDA backend's device memory, the CPU backend's --memory-limit-mb budget, dlperf's buffers),
// std::bad_alloc, or oneDNN's out_of_memory status.
bool is_out_of_memory(const std::exception_ptr& e);

}  // namespace dlperf
