// make_communicator: builds the Communicator for a backend, so programs choose it from a flag
// without including CUDA headers. The NCCL one exists only in a CUDA build (Error(usage)
// otherwise); it uses the current CUDA device (pick it with select_device_by_local_rank in
// nccl/nccl_communicator.h) and orders its work after `compute_stream` (nullptr: the legacy
// default stream).
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/communicator.h"
#include "comm/mpi_session.h"

struct CUstream_st;  // = cudaStream_t, declared here so this header needs no CUDA

namespace dlperf {

bool nccl_available();  // compiled with NCCL

std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm parent, const WorldInfo& world,
                                                CommOptions options, CUstream_st* compute_stream = nullptr);

// --comm mpi on the CUDA backend (comm/cuda/staged_communicator.h): device buffers reduced by
// MPI through pinned host memory, so ranks may share a GPU. Error(usage) without CUDA.
std::unique_ptr<Communicator> make_staged_communicator(MPI_Comm parent, const WorldInfo& world, CommOptions options,
                                                       CUstream_st* compute_stream);

// The NCCL library's version ("2.28.9"), "" without NCCL.
std::string nccl_version();

}  // namespace dlperf
