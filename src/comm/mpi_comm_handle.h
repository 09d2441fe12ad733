// MpiComm: RAII owner of one MPI communicator (from MPI_Comm_dup / MPI_Comm_split*), so every
// communicator dlperf creates is freed exactly once and never leaks on an exception path.
// leak() is for the fault path: freeing a communicator that still has pending operations
// (a peer died mid-collective) may block, and the program is about to MPI_Abort anyway.
#pragma once

#include <mpi.h>

#include <utility>

#include "core/check.h"

namespace dlperf {

class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm owned) : comm_(owned) {}
  ~MpiComm() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);  // no throw from a destructor
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  MpiComm(MpiComm&& o) noexcept : comm_(std::exchange(o.comm_, MPI_COMM_NULL)) {}
  MpiComm& operator=(MpiComm&& o) noexcept {
    if (this != &o) {
      if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
      comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    }
    return *this;
  }

  // A private copy of `parent` (same group, own matching context, inherits its error handler).
  static MpiComm dup(MPI_Comm parent) {
    MPI_Comm c = MPI_COMM_NULL;
    DLPERF_CHECK_MPI(MPI_Comm_dup(parent, &c));
    return MpiComm(c);
  }

  // The ranks of `parent` on this node (sharing memory), keyed by their rank in `parent` so
  // local ranks keep its order. Collective over `parent`.
  static MpiComm node(MPI_Comm parent) {
    int rank = 0;
    DLPERF_CHECK_MPI(MPI_Comm_rank(parent, &rank));
    MPI_Comm c = MPI_COMM_NULL;
    DLPERF_CHECK_MPI(MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c));
    return MpiComm(c);
  }

  MPI_Comm get() const { return comm_; }
  void leak() { comm_ = MPI_COMM_NULL; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace dlperf
