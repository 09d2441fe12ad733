// make_communicator; see make_communicator.h.
#include "comm/make_communicator.h"

#include "comm/mpi_communicator.h"
#include "core/error.h"
#if defined(DLPERF_WITH_CUDA)
#include "comm/cuda/staged_communicator.h"
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

std::unique_ptr<Communicator> make_staged_communicator(MPI_Comm parent, const WorldInfo& world, CommOptions options,
                                                       [[maybe_unused]] CUstream_st* compute_stream) {
#if defined(DLPERF_WITH_CUDA)
  return std::make_unique<StagedCommunicator>(std::make_unique<MpiCommunicator>(parent, world, options), compute_stream);
#else
  (void)parent, (void)world, (void)options;
  throw_usage_error("--comm mpi with device buffers needs a CUDA build");
#endif
}

std::string nccl_version() {
#if defined(DLPERF_WITH_CUDA)
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9 (older: X * 1000 + Y * 100 + Z)
  return v >= 10000 ? std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100)
                    : std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 100) + "." + std::to_string(v % 100);
#else
  return "";
#endif
}

}  // namespace dlperf
