// make_communicator; see make_communicator.h.
#include "comm/make_communicator.h"

#include "comm/mpi_communicator.h"
#include "core/error.h"
#if defined(DLPERF_WITH_CUDA)
#include "comm/nccl/nccl_communicator.h"
#endif

namespace dlperf {

bool nccl_available() {
#if defined(DLPERF_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm parent, const WorldInfo& world,
                                                CommOptions options, [[maybe_unused]] CUstream_st* compute_stream) {
  if (backend == CommBackend::mpi) return std::make_unique<MpiCommunicator>(parent, world, options);
#if defined(DLPERF_WITH_CUDA)
  return std::make_unique<NcclCommunicator>(parent, world, compute_stream, options);
#else
  throw_usage_error("--backend nccl: this dlperf was built without CUDA/NCCL; use --backend mpi");
#endif
}

}  // namespace dlperf
