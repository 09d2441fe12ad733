// A backend is the compute context: engine/device, streams, library handles and the
// factories that plan ops on it. Two implementations: cpu (oneDNN) and cuda (cuDNN, cuBLAS).
// Models and the trainer are written once against this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/graph.h"
#include "backend/input_pipe.h"
#include "backend/ops.h"
#include "backend/recorder.h"
#include "backend/step_gate.h"
#include "backend/tensor.h"
#include "core/host_memory.h"

namespace dlperf {

enum class BackendKind : uint8_t { cpu, cuda };
enum class Layout : uint8_t { canonical, channels_last };
// fp32: IEEE f32 everywhere (no TF32 in any convolution or GEMM). tf32: f32 data, TF32 tensor-core
// math allowed in convolutions and GEMMs (what NVIDIA's "FP32" A100/H100 figures mean; CUDA
// only). bf16: bf16 compute, f32 master weights. fp16: f16 compute with dynamic loss scaling,
// f32 master weights (CUDA only; "amp" on the command line).
enum class Precision : uint8_t { fp32, bf16, fp16, tf32 };
const char* to_string(BackendKind k);
const char* to_string(Precision p);
DType compute_dtype(Precision p);

// Flat, untyped storage on the backend's device (parameters, gradients, optimizer state).
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual float* data() = 0;
  virtual size_t size() const = 0;  // f32 elements
  virtual void read(std::span<float> out, size_t offset = 0) const = 0;
  virtual void write(std::span<const float> in, size_t offset = 0) = 0;
  virtual void zero() = 0;
  // ZeRO-2 (train/parallel/zero.h) frees a gradient bucket once it is reduce-scattered and
  // writes it again in the next backward. decommit: [offset, offset + count) is not needed until
  // written again; the backend may give its memory back and stop counting it (CPU: the whole
  // pages inside the range return to the kernel and read as zero afterwards). commit: the range
  // is about to be written again; it is counted again (and may throw OutOfMemoryError past a
  // limit). Calls alternate per range. Both return the bytes affected: 0 where the backend keeps
  // the memory (the default). The CUDA backend's mapped buffers (cuda/mapped_buffer.h) free
  // whole chunks of the device's granularity (2 MiB), once the work queued on them is done; a
  // decommitted range must be committed again before any work is queued that touches it.
  virtual size_t decommit(size_t offset, size_t count) {
    (void)offset, (void)count;
    return 0;
  }
  // The unit decommit gives back and commit counts, in bytes (the pages of a range it holds
  // whole): the CPU's page size, 4 KiB on a GPU; 0 where the buffer keeps its memory.
  virtual size_t decommit_unit() const { return 0; }
  virtual size_t commit(size_t offset, size_t count) {
    (void)offset, (void)count;
    return 0;
  }
  // Memory that ranges of buffers take turns in. The sharded master's other ranks' values
  // (train/parallel/zero.h) live only from their bucket's all-gather until the layers they
  // complete are refreshed, in the same order every step, so one bucket's and a later one's
  // need not exist at once; under ZeRO-2 the gradients come and go the same way in backward.
  // The unit is a granule of share_granularity() bytes (CPU: a page; CUDA: a chunk of the
  // device's allocation granularity); 0 where the backend keeps its memory (the default: share
  // does nothing). share(live): live[g] is the spans of the caller's events (its own count, the
  // same every step) from granule g's first commit to its last decommit, one for each time it
  // is used and given back (ZeRO-2's gradients with --grad-accum: once per micro-batch), in
  // order and not meeting; none for a granule that is not the caller's to share (every granule
  // past the end of `live`). Each granule that has spans and is decommitted now (every page of
  // it) is backed from then on by a granule of a pool, which the granules whose spans do not
  // meet take turns in (share_backing). Decommit and commit then give back, map and count nothing for
  // it, and the pool is counted once; a commit still reads as zero (the granule is cleared when
  // its first page is committed again), but between a decommit and the next commit the granule
  // shows what another granule with the same backing holds. A granule's decommit in a span's
  // last event and the next user's commit in a later one are all that keep them apart. Returns the pool's
  // bytes. share_together does the same for several buffers of one backend, their spans on one
  // clock, in one pool. unshare(): once the queued work is done, every shared granule is
  // private and decommitted again (its contents lost), and the buffer lets go of the pool (freed
  // with its last buffer): before the ranges are all needed at once (ZeRO's restore_values).
  struct Span {
    int64_t first = 0, last = -1;  // events, inclusive
    bool empty() const { return first > last; }
  };
  using Spans = std::vector<Span>;  // one granule's, in order
  class SharePool {  // the memory granules take turns in, counted once
   public:
    virtual ~SharePool() = default;
    virtual void grow(size_t granules) = 0;
  };
  virtual size_t share_granularity() const { return 0; }
  size_t share(std::span<const Spans> live);
  virtual void unshare() {}
  // What share_together drives: whether granule g can be shared now (decommitted whole, not
  // shared yet; false past the end), a pool of this backend's memory, and mapping each granule
  // to its pool granule (kNotShared: left alone).
  virtual bool shareable(size_t granule) const {
    (void)granule;
    return false;
  }
  virtual std::shared_ptr<SharePool> make_share_pool() { return nullptr; }
  // Gives back what the buffer keeps for later commits (a GPU buffer's cache of unmapped
  // chunks, sized by its largest commit): before a pool takes the turns, which map nothing.
  virtual void drop_cached() {}
  virtual void back(std::span<const size_t> backing, const std::shared_ptr<SharePool>& pool) { (void)backing, (void)pool; }
  static constexpr size_t kNotShared = SIZE_MAX;
};

// The pool granule each granule is backed by (Buffer::share), kNotShared for those without a
// span or not `eligible`: interval colouring, in order of the granules' first events, each
// taking the lowest pool granule that is free then and through every later span of it (free:
// the spans of the granules it backs meet none of them). With one span a granule that is
// optimal: the pool holds as many as the spans that meet at one event. With several (a
// pattern repeated per micro-batch) a later span can rule a free pool granule out and the pool
// may hold more; for a repeated pattern it holds what one repetition needs. Consecutive
// granules tend to get consecutive pool granules (one mapping a run).
std::vector<size_t> share_backing(std::span<const Buffer::Spans> live, const std::function<bool(size_t)>& eligible);
struct ShareRequest {
  Buffer* buffer = nullptr;
  std::span<const Buffer::Spans> live;
};
size_t share_together(std::span<const ShareRequest> parts);

// One fused SGD step over a contiguous range (PyTorch semantics):
//   g = grad * grad_scale + weight_decay * w;  m = momentum * m + g;  w -= lr * m
// (first step: m = g, signalled by first_step). grad_scale folds in 1/world_size averaging.
// gate: the step gate (backend/step_gate.h) in the backend's memory, or nullptr. When set, the
// kernel reads it as it runs: gate[skip] != 0 leaves w and m unchanged, lr is multiplied by
// gate[lr] and grad_scale by gate[grad_scale]. Every optimizer entry point below takes it the
// same way, so no step decision is read back to the host.
struct SgdStep {
  float lr = 0.1f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
  bool first_step = false;
  const float* gate = nullptr;
};

// One fused Adam-family step over a contiguous range (one parameter, or neighbours of equal
// decay). g = grad * grad_scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// u = m_hat / (sqrt(v_hat) + eps) with m_hat = m / (1 - b1^step), v_hat = v / (1 - b2^step)
// (bias correction; step counts from 1). With a gate (see SgdStep), a skipped step leaves w, m
// and v unchanged and the bias correction counts applied steps only: step is gate[applied].
struct AdamStep {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f;
  float weight_decay = 0.0f;
  float grad_scale = 1.0f;
  int64_t step = 1;
  const float* gate = nullptr;
};
// One parameter of a multi-tensor Adam-family step: a range of the flat buffers (a ParamStore
// entry) and whether weight decay applies to it.
struct ParamSegment {
  size_t offset = 0, count = 0;
  bool decay = false;
  bool operator==(const ParamSegment&) const = default;
};
// One piece of a sharded LAMB step (ZeRO): `count` elements of parameter `param` (the index of
// its trust ratio), at `offset` in the flat weights and at `local` in the shard's gradients,
// moments and update scratch.
struct LambPiece {
  size_t offset = 0, local = 0, count = 0, param = 0;
  bool decay = false;
  bool operator==(const LambPiece&) const = default;
};
// LAMB's per-parameter norms (You et al. 2019, "Large Batch Optimization for Deep Learning"):
// the trust ratio is ||w|| / ||u + wd w||.
struct LambNorms {
  double w_sq = 0.0;  // sum of w^2
  double u_sq = 0.0;  // sum of (u + wd w)^2
};

// What a library chose to run one planned kernel with, for the run's record and for the
// check that no reference kernel is in the timed loop: a fast path that silently falls back to
// a reference implementation on another machine is the most expensive bug a benchmark can have.
struct PlannedKernel {
  std::string op;     // the op's name ("layer1.0.conv2") or, for unnamed ops, its kind ("add_relu")
  std::string pass;   // "forward", "backward_data", "backward_weights", "backward", "reorder", ...
  std::string shape;  // the problem, "(32, 64, 56, 56) bf16"
  std::string impl;   // the implementation, "brgconv:avx512_core_bf16", "jit:uni", "ref:any"
  bool reference = false;  // a reference (non-JIT, unoptimised) implementation
};

struct BackendOptions {
  Precision precision = Precision::fp32;
  int threads = 0;       // CPU: compute threads per rank (0 = library default)
  // CUDA: the local rank; the device used is device % (devices this process sees), so sites
  // that show each rank only its own GPU (--gpus-per-task) and sites that show all of a node's
  // GPUs (--gpu-bind=none) both work; --gpu-bind=closest, which shows a rank several, may not.
  int device = 0;
  // CPU: the bytes of tensors and buffers the backend may hold at once (--memory-limit-mb), as a
  // GPU's fixed memory; an allocation past it throws OutOfMemoryError. 0: no limit.
  int64_t memory_limit_bytes = 0;
  bool conv_autotune = false;  // CUDA: time the top cuDNN engine configurations per convolution at plan time
  // CUDA: backward convolutions only on deterministic engines (same seed, same result bit for
  // bit). On by default for library callers (the conformance and repro tests); dlperf-train
  // turns it off unless --deterministic, as PyTorch allows the faster nondeterministic engines.
  bool deterministic = true;
  // CUDA, channels-last batch norm: cuDNN's persistent NHWC kernels for f16 and bf16 (where
  // cuDNN accepts the shape) and dlperf's own (batch_norm.cu) for f32, or one of them always
  // (the conformance tests cover both).
  enum class BatchNormImpl : uint8_t { automatic, cudnn, kernels } cuda_batch_norm = BatchNormImpl::automatic;
  // CUDA, causal attention in bf16/fp16: cuDNN's fused SDPA where it plans, else cuBLAS products
  // (automatic); fused: cuDNN's or a usage error; unfused: the cuBLAS products always.
  enum class AttentionImpl : uint8_t { automatic, fused, unfused } cuda_attention = AttentionImpl::automatic;
  // CUDA: the longest the host waits for queued device work before it unmaps memory (a
  // collective that never completes: a dead peer), as --timeout bounds every wait for a rank.
  int timeout_s = 60;
};

// The dims of Backend::rows_of(t, first, count), after checking the rows lie in t.
Dims row_view_dims(const Tensor& t, int64_t first, int64_t count);

// What a trace records about the device (issue 13, docs/trace-schema.md). CPU: empty model.
struct DeviceFacts {
  std::string model;                            // "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;
  std::string pci_bus_id;                       // "0000:17:00.0", for the topology
  std::map<std::string, std::string> versions;  // "cuda", "cudnn", "cublas", "driver"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  virtual std::string description() const = 0;  // library, ISA / device, threads
  virtual std::string isa() const { return {}; }  // the instruction set kernels dispatch to ("avx512_core_bf16"); "" on GPUs
  // Every kernel planned so far, in plan order, with the implementation the library chose.
  virtual std::vector<PlannedKernel> planned_kernels() const { return {}; }
  // The layout a network's input images should have in the compute dtype: every later layout
  // follows from it. channels_last where tensor-core/AMX kernels want NHWC; canonical lets the
  // first convolution choose (oneDNN: blocked nChw16c).
  virtual Layout image_layout() const { return dtype() == DType::f32 ? Layout::canonical : Layout::channels_last; }
  Precision precision() const { return options_.precision; }
  DType dtype() const { return compute_dtype(options_.precision); }

  // ---- memory ----
  // canonical: dense row-major over dims; channels_last: (N, C, H, W) stored as NHWC, the
  // layout tensor-core/AMX convolutions want. The first layer's input picks one; every later
  // layout follows from the ops.
  virtual TensorPtr tensor(const Dims& dims, DType dtype, Layout layout = Layout::canonical) = 0;
  virtual TensorPtr tensor_like(const Tensor& t) = 0;           // same dims, dtype and layout
  // A tensor over rows [first, first + count) of t's storage: no copy, no allocation, t must
  // outlive it. t is canonical and dense (no row pitch), its first dim the rows; the view has
  // t's dims with the first replaced by count. Ops planned for the view's dims run on it: a
  // layer applied to a batch in chunks (Llama's output head over tokens).
  virtual TensorPtr rows_of(Tensor& t, int64_t first, int64_t count);
  // Any layout/dtype to any. Same dims, or a reshape: dims that differ with the same element
  // count, one side canonical; the data then moves in canonical (row-major) order, e.g. a
  // (N, C, H, W) map in any layout to its (N, C*H*W) flatten and back.
  virtual void convert(const Tensor& src, Tensor& dst) = 0;
  // Plans a convert between tensors of these dims, dtypes and layouts ahead of the timed loop
  // (where planning is needed; the CPU backend records the reorder it will run).
  virtual void plan_convert(const Tensor& src, const Tensor& dst) { (void)src, (void)dst; }
  virtual std::unique_ptr<Buffer> buffer(size_t elems) = 0;     // zero-filled f32
  // The same, starting decommitted (Buffer::decommit over all of it): ZeRO-2's gradients, which
  // are committed bucket by bucket as backward writes them. Default: an ordinary buffer.
  virtual std::unique_ptr<Buffer> decommitted_buffer(size_t elems) { return buffer(elems); }
  // Committed and zero-filled like buffer(), but ranges of it can be decommitted: the sharded
  // f32 master weights (CUDA: mapped in chunks; CPU: every large buffer already is).
  virtual std::unique_ptr<Buffer> releasable_buffer(size_t elems) { return buffer(elems); }
  // True when Buffer::decommit really gives memory back (CPU: madvise; CUDA: cuMemUnmap, where
  // the device supports virtual memory management). ZeRO then also shards the f32 master
  // weights of low-precision runs (train/parallel/zero.h); where it does not, they stay whole
  // on every rank.
  virtual bool frees_decommitted() const { return false; }
  // One line on what decommit and commit cost where it is host time spent outside the step's
  // queued work (CUDA: the driver's map and unmap calls, and the waits before them): per step of
  // the `measured_steps` since begin_measured_window() (the steady state, set-up and warm-up
  // apart), and over the whole run; "" where there is nothing to say.
  virtual std::string memory_mapping_summary(int64_t measured_steps) const {
    (void)measured_steps;
    return {};
  }
  // The timed steps begin (after the warm-up): what memory_mapping_summary counts per step from.
  virtual void begin_measured_window() {}
  // Host memory for step inputs a loader fills: page-locked on CUDA (DMA, asynchronous
  // copies), 64-byte aligned on the CPU. Safe to call from any thread.
  virtual HostMemory host_memory(size_t bytes) { return aligned_host_memory(bytes); }
  virtual int64_t peak_memory_bytes() const = 0;                // device memory (GPU) or resident set (CPU)
  // The most bytes of tensors and buffers the backend held at once (its allocation counter; CPU:
  // what --memory-limit-mb is checked against); 0 where the backend does not count.
  virtual int64_t allocated_peak_bytes() const { return 0; }
  // What it holds now, by the same count (the memory plan reads it after building the model).
  virtual int64_t allocated_bytes() const { return 0; }
  // Memory in use on the device as the device reports it (CUDA: total - free from
  // cudaMemGetInfo, every process and library included); 0 where there is no device.
  virtual int64_t device_memory_used_bytes() const { return 0; }
  virtual DeviceFacts device_facts() const { return {}; }
  virtual void synchronize() = 0;                               // wait for all queued work
  // The queue ops run on, for a communicator that must order itself after them (CUDA: the
  // cudaStream_t of the compute stream). nullptr where work is synchronous (CPU).
  virtual void* stream_handle() { return nullptr; }

  // ---- a step without host synchronisation (issue 13) ----
  virtual std::unique_ptr<StepRecorder> step_recorder() = 0;
  // A pipe that moves batches into `model_inputs` ahead of use (backend/input_pipe.h), or
  // nullptr where the backend has no copy engine to overlap (CPU: inputs are written directly).
  virtual std::unique_ptr<InputPipe> input_pipe(std::span<Tensor* const> model_inputs) {
    (void)model_inputs;
    return nullptr;
  }
  // The device memory such a pipe holds besides the model's inputs (its staging set), for the
  // memory plan: the pipe is made as the step starts, after the model's build was counted.
  virtual size_t input_pipe_bytes(std::span<Tensor* const> model_inputs) const {
    (void)model_inputs;
    return 0;
  }
  // dst[0, count) = value in queue order, without waiting (the step gate's learning rate).
  virtual void fill(float* dst, size_t count, float value) = 0;
  // The step gate update after the gradient exchange (backend/step_gate.h); grads is the
  // whole flat gradient buffer, gate kGateFloats floats in the backend's memory.
  virtual void update_step_gate(std::span<const float> grads, float* gate, const StepGateUpdate& u) = 0;
  // CUDA graphs (backend/graph.h): false where the backend cannot capture.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_capture();
  virtual std::unique_ptr<GraphSegment> end_capture();

  // ---- op planning (x fixes the shape, dtype and layout the op is planned for) ----
  virtual std::unique_ptr<Conv2d> conv2d(const Conv2dSpec& spec, const Tensor& x) = 0;
  virtual std::unique_ptr<BatchNorm> batch_norm(const BatchNormSpec& spec, const Tensor& x) = 0;
  virtual std::unique_ptr<Pool2d> pool2d(const Pool2dSpec& spec, const Tensor& x) = 0;
  virtual std::unique_ptr<GlobalAvgPool> global_avg_pool(const Tensor& x) = 0;
  virtual std::unique_ptr<Linear> linear(const LinearSpec& spec, const Tensor& x) = 0;
  virtual std::unique_ptr<Activation> activation(ActivationKind kind, const Tensor& x) = 0;
  virtual std::unique_ptr<Add> add(const Tensor& a, const Tensor& b, bool fuse_relu) = 0;
  std::unique_ptr<Add> add(const Tensor& a, bool fuse_relu) { return add(a, a, fuse_relu); }  // b in a's layout
  virtual std::unique_ptr<SoftmaxCrossEntropy> cross_entropy(const CrossEntropySpec& spec, const Tensor& logits) = 0;
  virtual std::unique_ptr<LayerNorm> layer_norm(const LayerNormSpec& spec, const Tensor& x) = 0;
  // Dropout + residual add + layer norm (a: the dropout's input; planned for its shape and dtype).
  virtual std::unique_ptr<DropoutAddNorm> dropout_add_norm(const AddNormSpec& spec, const Tensor& a) = 0;
  virtual std::unique_ptr<Embedding> embedding(const EmbeddingSpec& spec, const Tensor& ids) = 0;
  virtual std::unique_ptr<Dropout> dropout(float p, const Tensor& x) = 0;
  virtual std::unique_ptr<BatchedMatmul> batched_matmul(const BatchedMatmulSpec& spec, DType dtype) = 0;
  virtual std::unique_ptr<MaskedSoftmax> masked_softmax(const Tensor& x) = 0;
  virtual std::unique_ptr<RowGather> gather_rows(const Tensor& x, const Tensor& idx) = 0;
  // x (M, C) -> y (M, vocab) = x E^T (+ b with spec.bias), E (vocab, C) the weight of `tied`
  // (BERT's MLM decoder, Llama 3.2's output head). The returned layer owns only the bias, if any (spec.name + ".bias");
  // E stays one parameter of `tied`. The decoder's backward writes E's gradient and marks the
  // embedding so that its own backward, which must come later in the step, adds to it: the
  // gradient is the sum of both uses.
  virtual std::unique_ptr<Linear> tied_linear(const LinearSpec& spec, Embedding& tied, const Tensor& x) = 0;
  // Llama's ops (backend/ops.h). The defaults refuse with one line naming the backend: a
  // backend that has not implemented them cannot run --model llama*.
  virtual std::unique_ptr<RmsNorm> rms_norm(const RmsNormSpec& spec, const Tensor& x);
  virtual std::unique_ptr<Rope> rope(const RopeSpec& spec, const Tensor& x);
  virtual std::unique_ptr<SwiGlu> swiglu(const Tensor& a);
  virtual std::unique_ptr<CausalAttention> causal_attention(const AttentionSpec& spec, const Tensor& q);
  // Cross-entropy over a large vocabulary (next-token prediction): streams the logits row by
  // row in f32, keeping one log-sum-exp per row, never an f32 copy of the (M, K) logits; its
  // backward may write dlogits over the logits themselves. Label smoothing 0.
  virtual std::unique_ptr<SoftmaxCrossEntropy> token_cross_entropy(const CrossEntropySpec& spec, const Tensor& logits);

  // Low-precision runs: rebuild the compute copies (f16/bf16, channels-last filters) of every
  // layer's weights from the f32 master values; once per step, before forward. The CUDA
  // backend converts all of them in one launch; the default asks each layer.
  virtual void refresh_compute_weights(std::span<Layer* const> layers) {
    for (Layer* l : layers) l->refresh_compute_weights();
  }

  // ZeRO's all-gather in the compute precision (train/parallel/zero.h): runs of flat f32 values
  // packed into 4-byte words, and back. A narrow run takes the compute type (bf16 or f16, two
  // values a word; an odd run's last half-word is zero), rounded as the compute copies are
  // rounded, so the widened values (exact) rebuild the same compute copies; any other run is
  // copied as f32. A table is made once (a GPU uploads it) and used every step; the default
  // runs host loops over host memory (the CPU backend).
  struct PackRun {
    size_t value = 0, count = 0, word = 0;  // value: flat f32 offset; word: offset in the packed words
    bool narrow = false;
  };
  class PackTable {
   public:
    virtual ~PackTable() = default;
  };
  virtual std::unique_ptr<PackTable> pack_table(std::vector<PackRun> runs);
  virtual void pack(const PackTable& t, const float* values, float* words);
  virtual void unpack(const PackTable& t, const float* words, float* values);

  // ---- fused optimizer updates over flat buffer ranges ----
  virtual void sgd_step(std::span<float> w, std::span<const float> g, std::span<float> m, const SgdStep& s) = 0;
  // AdamW (torch.optim.AdamW, decoupled decay): w -= lr * (u + weight_decay * w).
  virtual void adamw_step(std::span<float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                          const AdamStep& s) = 0;
  // LAMB, first half: updates m and v as Adam, writes u + weight_decay * w into `update` and
  // returns the two squared norms; the caller forms the trust ratio and calls lamb_apply.
  virtual LambNorms lamb_update(std::span<const float> w, std::span<const float> g, std::span<float> m, std::span<float> v,
                                std::span<float> update, const AdamStep& s) = 0;
  // LAMB, second half: w -= step * update (step = lr * trust ratio); with a gate (see SgdStep)
  // nothing changes on a skipped step and step is multiplied by gate[lr].
  virtual void lamb_apply(std::span<float> w, std::span<const float> update, float step, const float* gate) = 0;
  // Sum of squares of a range, accumulated in double (global gradient norm for clipping).
  virtual double sum_squares(std::span<const float> x) = 0;
  // Gradient accumulation (--grad-accum): dst = src (first) or dst += src, in queue order.
  virtual void accumulate(std::span<float> dst, std::span<const float> src, bool first) = 0;

  // Multi-tensor forms over the flat buffers w, g, m, v (and LAMB's update scratch), every
  // segment at once; s.weight_decay applies to the segments that decay. The defaults loop over
  // the segments with the calls above; the CUDA backend runs each in a fixed number of launches
  // whatever the number of tensors, with LAMB's norms and trust ratios kept on the device.
  // SGD: sgd_step per segment.
  virtual void sgd_step(float* w, const float* g, float* m, std::span<const ParamSegment> segments, const SgdStep& s);
  // AdamW: adamw_step per segment.
  virtual void adamw_step(float* w, const float* g, float* m, float* v, std::span<const ParamSegment> segments, const AdamStep& s);
  // LAMB (You et al. 2019; apex FusedLAMB without nvlamb): per segment u = Adam direction
  // + wd w, trust ratio r = ||w|| / ||u|| (1 when either is 0 or the segment does not decay),
  // w -= lr r u. `update` is scratch of the buffers' size.
  virtual void lamb_step(float* w, const float* g, float* m, float* v, float* update, std::span<const ParamSegment> segments,
                         const AdamStep& s);
  // Sharded LAMB, in two halves around a sum over the ranks of the parameters' norms (ZeRO:
  // a parameter may lie in several ranks' shards). First half: per piece as lamb_update (w at
  // piece.offset; g, m, v and update at piece.local), each piece's squared norms added into
  // sums[2 * param] (w) and sums[2 * param + 1] (u), pieces in order; sums holds 2 * params
  // doubles in the backend's memory, every one written (0 for a parameter without pieces).
  // Second half: per piece w -= lr r u, r = ||w|| / ||u|| from the sums (1 as in lamb_step).
  // The defaults loop over the pieces with lamb_update / lamb_apply; the CUDA backend keeps
  // the sums on the device (a fixed number of launches, no host wait).
  virtual void lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, std::span<const LambPiece> pieces,
                                size_t params, const AdamStep& s, double* sums);
  virtual void lamb_shard_apply(float* w, const float* update, std::span<const LambPiece> pieces, const double* sums, const AdamStep& s);

 protected:
  explicit Backend(BackendOptions o) : options_(o) {}
  BackendOptions options_;
};

// Creates the backend of the given kind; a usage error when it is not built in or the
// machine cannot run the precision (bf16 without AVX512-BF16/AMX, no GPU).
std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options);

// Whether the cpu backend computes bf16 on this CPU: oneDNN's native bf16 kernels (AVX512-BF16
// or AMX, at the ISA oneDNN dispatches to, ONEDNN_MAX_CPU_ISA included). Elsewhere (AMD Zen 3,
// Intel before Cooper Lake) make_backend refuses --precision bf16.
bool cpu_computes_bf16();

// Number of CUDA devices this process sees (0 without the CUDA backend or a device), and their
// PCI bus ids ("0000:17:00.0") in device order.
int cuda_device_count();
std::vector<std::string> cuda_pci_bus_ids();
// The memory of the GPU a rank with this local rank uses (local_rank % devices, as the backend
// picks it), from its properties, without creating a context; 0 without a device.
int64_t cuda_device_memory_bytes(int local_rank);

}  // namespace dlperf
