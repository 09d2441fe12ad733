// Factories of the oneDNN ops, one file per op (conv2d.cpp, batch_norm.cpp, ...);
// CpuBackend (backend.cpp) forwards its planning calls here.
#pragma once

#include "backend/onednn/context.h"

namespace dlperf::onednn {

using Ctx = std::shared_ptr<Context>;

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
std::unique_ptr<Embedding> make_embedding(Ctx ctx, const EmbeddingSpec& s, const Tensor& ids, DType out);
std::unique_ptr<Dropout> make_dropout(Ctx ctx, float p, const Tensor& x);
std::unique_ptr<BatchedMatmul> make_batched_matmul(Ctx ctx, const BatchedMatmulSpec& s, DType dtype);
std::unique_ptr<MaskedSoftmax> make_masked_softmax(Ctx ctx, const Tensor& x);
std::unique_ptr<RowGather> make_gather_rows(Ctx ctx, const Tensor& x, const Tensor& idx);
std::unique_ptr<Linear> make_tied_linear(Ctx ctx, const LinearSpec& s, Embedding& tied, const Tensor& x);
// Llama's ops, dlperf's own OpenMP loops (rms_norm.cpp, rope.cpp, swiglu.cpp,
// causal_attention.cpp, token_cross_entropy.cpp).
std::unique_ptr<RmsNorm> make_rms_norm(Ctx ctx, const RmsNormSpec& s, const Tensor& x);
std::unique_ptr<Rope> make_rope(Ctx ctx, const RopeSpec& s, const Tensor& x);
std::unique_ptr<SwiGlu> make_swiglu(Ctx ctx, const Tensor& a);
std::unique_ptr<CausalAttention> make_causal_attention(Ctx ctx, const AttentionSpec& s, const Tensor& q);
std::unique_ptr<SoftmaxCrossEntropy> make_token_cross_entropy(Ctx ctx, const CrossEntropySpec& s, const Tensor& logits);

// step_support.cpp: the step recorder and the step gate update (backend/recorder.h, step_gate.h).
std::unique_ptr<StepRecorder> make_step_recorder(Ctx ctx);
void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u);

// embedding.cpp -> tied_linear.cpp: the table a tied decoder reads and whose gradient it
// writes first; from then on the embedding's backward adds to that gradient.
Param& share_embedding_weight(Embedding& e);

}  // namespace dlperf::onednn
