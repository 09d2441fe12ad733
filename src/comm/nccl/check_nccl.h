// StatusTraits for ncclResult_t: DLPERF_CHECK(ncclAllReduce(...)) throws Error(library) with
// NCCL's description of the code.
#pragma once

#include <nccl.h>

#include <string>

#include "core/check.h"

namespace dlperf {

template <>
struct StatusTraits<ncclResult_t> {
  static constexpr const char* library = "NCCL";
  static bool ok(ncclResult_t s) { return s == ncclSuccess; }
  static std::string describe(ncclResult_t s) { return ncclGetErrorString(s); }
};

}  // namespace dlperf
