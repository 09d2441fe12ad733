// cuDNN's fused-attention graphs (src/backend/cuda/sdpa_graph.cpp) built without a GPU: every
// tensor, pointwise, reduction, matmul and reshape descriptor of the forward and backward graphs
// takes its attributes and finalizes (cuDNN checks their types, ranks and arities there), for
// grouped-query and multi-head attention in bf16 and fp16. Whether cuDNN's engines then match
// the pattern needs a GPU: LlamaConformance.FusedAttentionPlansAndAgreesWithCublas.
#include <gtest/gtest.h>

#include "backend/cuda/sdpa_graph.h"

namespace dlperf::cuda {
namespace {

TEST(SdpaGraph, OperationsFinalizeWithoutAGpu) {
  for (DType t : {DType::bf16, DType::f16})
    for (int64_t kv_heads : {8, 32})
      for (bool backward : {false, true}) {
        SCOPED_TRACE(std::string(backward ? "backward" : "forward") + ", kv heads " + std::to_string(kv_heads));
        SdpaShape s{2, 256, 32, kv_heads, 128, t};
        EXPECT_NO_THROW(sdpa_operations(s, backward));
      }
}

}  // namespace
}  // namespace dlperf::cuda
