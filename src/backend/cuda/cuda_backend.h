// CudaBackend: the Backend on one NVIDIA GPU (cuDNN, cuBLAS and the kernels beside this
// file). Public so that the NCCL communicator can order its collectives after the compute
// stream: Backend::stream_handle() (a cudaStream_t).
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mapped_buffer.h"

namespace dlperf::cuda {

class MappingQueue;

struct Context;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& o);
  ~CudaBackend() override;

  cudaStream_t stream() const;  // the one compute stream every op and copy runs on
  int device() const;

  BackendKind kind() const override { return BackendKind::cuda; }
  std::string description() const override;

  TensorPtr tensor(const Dims& dims, DType dtype, Layout layout) override;
  TensorPtr tensor_like(const Tensor& t) override;
  TensorPtr rows_of(Tensor& t, int64_t first, int64_t count) override;
  void convert(const Tensor& src, Tensor& dst) override;
  std::unique_ptr<Buffer> buffer(size_t elems) override;
  // Mapped in chunks through CUDA's virtual memory management (mapped_buffer.h), where the
  // device supports it; else ordinary buffers, and frees_decommitted() is false.
  std::unique_ptr<Buffer> decommitted_buffer(size_t elems) override;
  std::unique_ptr<Buffer> releasable_buffer(size_t elems) override;
  bool frees_decommitted() const override { return mapped_; }
  std::string memory_mapping_summary(int64_t measured_steps) const override;
  void begin_measured_window() override;
  HostMemory host_memory(size_t bytes) override;  // cudaHostAlloc (portable: any device may DMA from it)
  int64_t peak_memory_bytes() const override;
  // The counter of the backend's own device allocations (tensors, buffers, workspaces), as the
  // memory plan reads it after building the model; not the device's own figure.
  int64_t allocated_bytes() const override;
  int64_t allocated_peak_bytes() const override { return peak_memory_bytes(); }
  int64_t device_memory_used_bytes() const override;
  DeviceFacts device_facts() const override;
  void synchronize() override;
  void* stream_handle() override { return stream(); }  // NCCL orders itself after this stream
  // Channels-last in every precision: cuDNN's tensor-core convolutions (f16, bf16, TF32) and
  // the fused batch norm + add + ReLU kernels are NHWC; NCHW would add transposes around them.
  Layout image_layout() const override { return Layout::channels_last; }
  // The GPU's compute capability as its kernels are compiled for it: "sm_90" on an H100.
  std::string isa() const override;
  // What each op planned: cuDNN graph engine or legacy algorithm, cuBLASLt epilogue or the
  // fallback, dlperf's own kernels; a fast path that could not be planned names its fallback.
  std::vector<PlannedKernel> planned_kernels() const override;

  std::unique_ptr<StepRecorder> step_recorder() override;
  std::unique_ptr<InputPipe> input_pipe(std::span<Tensor* const> model_inputs) override;
  size_t input_pipe_bytes(std::span<Tensor* const> model_inputs) const override;
  void fill(float* dst, size_t count, float value) override;
  void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) override;
  bool supports_graphs() const override { return true; }
  void begin_capture() override;
  std::unique_ptr<GraphSegment> end_capture() override;

  std::unique_ptr<Conv2d> conv2d(const Conv2dSpec& s, const Tensor& x) override;
  std::unique_ptr<BatchNorm> batch_norm(const BatchNormSpec& s, const Tensor& x) override;
  std::unique_ptr<Pool2d> pool2d(const Pool2dSpec& s, const Tensor& x) override;
  std::unique_ptr<GlobalAvgPool> global_avg_pool(const Tensor& x) override;
  std::unique_ptr<Linear> linear(const LinearSpec& s, const Tensor& x) override;
  std::unique_ptr<Activation> activation(ActivationKind k, const Tensor& x) override;
  std::unique_ptr<Add> add(const Tensor& a, const Tensor& b, bool fuse_relu) override;
  using Backend::add;
  std::unique_ptr<SoftmaxCrossEntropy> cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override;
  std::unique_ptr<LayerNorm> layer_norm(const LayerNormSpec& s, const Tensor& x) override;
  std::unique_ptr<DropoutAddNorm> dropout_add_norm(const AddNormSpec& s, const Tensor& a) override;
  std::unique_ptr<Embedding> embedding(const EmbeddingSpec& s, const Tensor& ids) override;
  std::unique_ptr<Dropout> dropout(float p, const Tensor& x) override;
  std::unique_ptr<BatchedMatmul> batched_matmul(const BatchedMatmulSpec& s, DType t) override;
  std::unique_ptr<MaskedSoftmax> masked_softmax(const Tensor& x) override;
  std::unique_ptr<RowGather> gather_rows(const Tensor& x, const Tensor& idx) override;
  std::unique_ptr<Linear> tied_linear(const LinearSpec& s, Embedding& tied, const Tensor& x) override;
  // Llama's ops (llama_ops.cpp).
  std::unique_ptr<RmsNorm> rms_norm(const RmsNormSpec& s, const Tensor& x) override;
  std::unique_ptr<Rope> rope(const RopeSpec& s, const Tensor& x) override;
  std::unique_ptr<SwiGlu> swiglu(const Tensor& a) override;
  std::unique_ptr<CausalAttention> causal_attention(const AttentionSpec& s, const Tensor& q) override;  // causal_attention.cpp
  std::unique_ptr<SoftmaxCrossEntropy> token_cross_entropy(const CrossEntropySpec& s, const Tensor& logits) override;

  // One launch converts every compute copy (f16/bf16 weights, channels-last filters, the fused
  // convolutions' biases) from the f32 master values; the table is built on the first call.
  void refresh_compute_weights(std::span<Layer* const> layers) override;
  // ZeRO's compute-precision all-gather: the run table uploaded once, one launch a pack.
  std::unique_ptr<PackTable> pack_table(std::vector<PackRun> runs) override;
  void pack(const PackTable& t, const float* values, float* words) override;
  void unpack(const PackTable& t, const float* words, float* values) override;

  void sgd_step(std::span<float> w, std::span<const float> g, std::span<float> m, const SgdStep& s) override;
  void adamw_step(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v, const AdamStep& s) override;
  // Multi-tensor forms: a fixed number of launches whatever the number of tensors; LAMB's norms
  // and trust ratios stay on the device (no host round trip); the step gate as in launch_adamw.
  void sgd_step(float* w, const float* g, float* m, std::span<const ParamSegment> segments, const SgdStep& s) override;
  void adamw_step(float* w, const float* g, float* m, float* v, std::span<const ParamSegment> segments, const AdamStep& s) override;
  void lamb_step(float* w, const float* g, float* m, float* v, float* update, std::span<const ParamSegment> segments,
                 const AdamStep& s) override;
  // Sharded LAMB: the pieces' norms summed per parameter into `sums` on the device, ready for
  // the communicator's f64 allreduce; the ratios read from there (no host wait).
  void lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, std::span<const LambPiece> pieces, size_t params,
                        const AdamStep& s, double* sums) override;
  void lamb_shard_apply(float* w, const float* update, std::span<const LambPiece> pieces, const double* sums, const AdamStep& s) override;
  // These two return host values: each waits for the stream (one small copy back).
  LambNorms lamb_update(std::span<const float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                        std::span<float> update, const AdamStep& s) override;
  void lamb_apply(std::span<float> w, std::span<const float> update, float step, const float* gate) override;
  double sum_squares(std::span<const float> x) override;
  void accumulate(std::span<float> dst, std::span<const float> src, bool first) override;

 private:
  void record(const char* kind, const Tensor& x, const std::string& impl);  // a one-call op, both passes

  std::shared_ptr<Context> ctx_;
  bool mapped_ = false;  // mapped buffers are supported here
  std::shared_ptr<MappingQueue> mapping_;  // their decommits, shared: memory bounded across buffers
  MappingStats window_start_;              // the mapping counters when the measured steps began
  bool window_started_ = false;
  std::shared_ptr<void> reduce_;  // (kReduceBlocks + 1) * 2 doubles: block partials, then the sums
  // The segment and task tables of the multi-tensor optimizer steps, one per segment list (an
  // optimizer passes the same list every step; compared by value, a host-side check). A
  // ParamSegment list is the pieces {offset, offset, count, its index, decay}.
  struct OptTable {
    std::vector<LambPiece> key;
    int64_t segments = 0, tasks = 0;
    std::shared_ptr<void> mem;  // OptSegment[segments] | OptTask[tasks] | f64 partial[2 tasks] | f32 ratio[segments]
    size_t tasks_at = 0, partial_at = 0, ratio_at = 0;
  };
  OptTable& opt_table(std::span<const ParamSegment> segments);
  OptTable& opt_table(std::span<const LambPiece> pieces);
  std::vector<OptTable> opt_tables_;
  // The weight-refresh tables, one per layer list: the whole model's (the trainer's refresh
  // before forward), or one per bucket when ZeRO's all-gathers arrive bucket by bucket. The
  // segments each was built from, and its segments | tasks on the device.
  struct CastTable {
    std::vector<CastSegment> key;
    std::shared_ptr<void> mem;
    int64_t tasks = 0;
    size_t segments_bytes = 0;
  };
  std::vector<CastTable> cast_tables_;
};

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o);

}  // namespace dlperf::cuda
