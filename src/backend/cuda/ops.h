// Factories of the CUDA ops, one file per op (conv2d.cpp, batch_norm.cpp, ...); CudaBackend
// (backend.cpp) forwards its planning calls here.
#pragma once

#include "backend/cuda/context.h"

namespace dlperf::cuda {

// Embedding tables are stored with their rows padded to a multiple of this (zero rows), so a
// tied decoder's GEMMs over the vocabulary are tensor-core aligned (BERT: 30,522 -> 30,528).
constexpr int64_t kTableRowPad = 8;

std::unique_ptr<Conv2d> make_conv2d(Ctx ctx, const Conv2dSpec& s, const Tensor& x);
std::unique_ptr<BatchNorm> make_batch_norm(Ctx ctx, const BatchNormSpec& s, const Tensor& x);
std::unique_ptr<Pool2d> make_pool2d(Ctx ctx, const Pool2dSpec& s, const Tensor& x);
std::unique_ptr<GlobalAvgPool> make_global_avg_pool(Ctx ctx, const Tensor& x);
std::unique_ptr<Linear> make_linear(Ctx ctx, const LinearSpec& s, const Tensor& x);
std::unique_ptr<Activation> make_activation(Ctx ctx, ActivationKind kind, const Tensor& x);
std::unique_ptr<Add> make_add(Ctx ctx, const Tensor& a, const Tensor& b, bool fuse_relu);
std::unique_ptr<SoftmaxCrossEntropy> make_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits);
std::unique_ptr<LayerNorm> make_layer_norm(Ctx ctx, const LayerNormSpec& s, const Tensor& x);
std::unique_ptr<DropoutAddNorm> make_dropout_add_norm(Ctx ctx, const AddNormSpec& s, const Tensor& a);
std::unique_ptr<Embedding> make_embedding(Ctx ctx, const EmbeddingSpec& s, const Tensor& ids, DType compute);
std::unique_ptr<Dropout> make_dropout(Ctx ctx, float p, const Tensor& x);
std::unique_ptr<BatchedMatmul> make_batched_matmul(Ctx ctx, const BatchedMatmulSpec& s, DType dtype);
std::unique_ptr<MaskedSoftmax> make_masked_softmax(Ctx ctx, const Tensor& x);
std::unique_ptr<RowGather> make_gather_rows(Ctx ctx, const Tensor& x, const Tensor& idx);
std::unique_ptr<Linear> make_tied_linear(Ctx ctx, const LinearSpec& s, Embedding& tied, const Tensor& x);
// llama_ops.cpp
std::unique_ptr<RmsNorm> make_rms_norm(Ctx ctx, const RmsNormSpec& s, const Tensor& x);
std::unique_ptr<Rope> make_rope(Ctx ctx, const RopeSpec& s, const Tensor& x);
std::unique_ptr<SwiGlu> make_swiglu(Ctx ctx, const Tensor& a);
std::unique_ptr<CausalAttention> make_causal_attention(Ctx ctx, const AttentionSpec& s, const Tensor& q);  // causal_attention.cpp
std::unique_ptr<SoftmaxCrossEntropy> make_token_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits);
// The embedding's table for a tied decoder; the embedding's backward then accumulates.
Param& share_embedding_weight(Embedding& e);

// recorder.cpp, input_pipe.cpp: a step without host synchronisation (backend/recorder.h,
// backend/input_pipe.h).
std::unique_ptr<StepRecorder> make_step_recorder(Ctx ctx);
std::unique_ptr<InputPipe> make_input_pipe(Ctx ctx, std::span<Tensor* const> inputs);
// device_facts.cpp
DeviceFacts describe_device(const Context& ctx);

}  // namespace dlperf::cuda
