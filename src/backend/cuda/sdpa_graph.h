// cuDNN's fused scaled-dot-product attention (flash attention: the scores never leave the chip)
// for grouped-query causal self-attention, built on the graph (backend) API as the operation
// pattern cuDNN's SDPA engines match: cudnn-frontend's composite SDPA nodes (cuDNN 9.0-9.20)
// lowered op by op, since the frontend itself is not a dependency here.
//
//   forward   S = (Q K^T) * scale; causal mask (row >= col, else -inf); softmax over keys with
//             Stats = max + log(sum exp) per row (saved, f32); O = P V
//   backward  sum = rowsum(dO * O); P = exp(S * scale - Stats) under the mask; dV = P^T dO;
//             dS = P (dO V^T - sum) * scale; dK = dS^T Q; dQ = dS K (f32, then converted)
// GQA: K and V have kv_heads heads; cuDNN broadcasts them over each group of query heads and
// sums dK and dV over the group. Data in bf16 or fp16, accumulation in f32; head dim a multiple
// of 8 up to 128. Tensors are dlperf's (B*T, heads*D) row-major projections, described to
// cuDNN by strides as (B, H, T, D).
//
// Every plan is executed once at plan time on scratch operands (forward, then backward on its
// statistics) before it is accepted; any failure throws Error(library) and the caller keeps
// its cuBLAS path, with the reason in its fallback warning. The plans are made once per shape
// and context and shared by every layer (a failure too: later layers fall back at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/cudnn_graph.h"

namespace dlperf::cuda {

struct SdpaShape {
  int64_t batch = 0, seq_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  DType dtype = DType::bf16;
};

// The operations of the forward or backward graph, every descriptor finalized but not the
// graph itself (that needs a cuDNN handle, hence a GPU): what the tests can check without one.
std::shared_ptr<Graph> sdpa_operations(const SdpaShape& s, bool backward);

// Whether cuDNN's fused attention applies at all (data type, head dim, GPU); "" when it does,
// else why not, for the fallback warning.
std::string sdpa_unsupported(const Context& ctx, const SdpaShape& s);

class FusedSdpa {
 public:
  FusedSdpa(Context& ctx, const SdpaShape& s);  // plans (and trial-runs) both graphs; throws Error(library)
  FusedSdpa(const FusedSdpa&) = delete;  // the variant packs point at the scalars below
  FusedSdpa& operator=(const FusedSdpa&) = delete;
  // lse: (B, H, T) f32, written by forward, read by backward. sum: (B, H, T) f32 scratch.
  void forward(Context& ctx, const void* q, const void* k, const void* v, void* o, float* lse);
  void backward(Context& ctx, const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse, float* sum,
                void* dq, void* dk, void* dv);
  std::string forward_name() const { return fwd_->name(); }
  std::string backward_name() const { return bwd_->name(); }
  size_t dq_accum_bytes() const;  // f32 (B, H, T, D): the backward's dQ accumulator, in ctx.scratch

 private:
  SdpaShape s_;
  float scale_, neg_inf_, one_ = 1.0f;  // the graphs' by-value scalars: their addresses go in the variant packs
  std::shared_ptr<const GraphPlan> fwd_, bwd_;  // shared by every op of this shape (Context::graph_plans)
  VariantPackCache fwd_cache_, bwd_cache_;
};

}  // namespace dlperf::cuda
