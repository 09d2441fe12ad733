// The CUDA InputPipe (backend/input_pipe.h): two pinned host slots, a copy stream, one device
// staging set.
//
//   send(n)     copy stream: wait until the staging set is free (deliver(n-1)'s copy out of
//               it has run), copy host slot n%2 -> staging, record `staged`.
//   deliver(n)  compute stream: wait for `staged`, copy staging -> the model's input tensors
//               (device to device, fast), record `consumed`.
// So batch n+1's host-to-device copy runs on the copy engine while step n computes, and the
// compute stream only waits when the copy is late. Two host slots let the host write batch
// n+1 while batch n's copy may still read the other; a host slot is reused only after its
// copy has finished (an event wait that in steady state finds it long done).
#include <cstring>

#include "backend/cuda/ops.h"

namespace dlperf::cuda {
namespace {

// A tensor in pinned host memory, canonical layout: what Model::load_into writes a batch into.
class PinnedTensor final : public Tensor {
 public:
  PinnedTensor(Dims dims, DType dtype) : Tensor(std::move(dims), dtype), mem_(static_cast<size_t>(numel()) * dtype_size(dtype)) {
    DLPERF_ASSERT(dtype == DType::f32 || dtype == DType::s32, "model inputs are f32 or s32");
  }
  size_t storage_bytes() const override { return mem_.bytes(); }
  void read(std::span<float> out) const override {
    DLPERF_ASSERT(static_cast<int64_t>(out.size()) == numel(), "read of the tensor's size");
    if (dtype() == DType::f32) {
      std::memcpy(out.data(), mem_.get(), out.size_bytes());
    } else {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(mem_.as<int32_t>()[i]);
    }
  }
  void write(std::span<const float> in) override {
    DLPERF_ASSERT(static_cast<int64_t>(in.size()) == numel(), "write of the tensor's size");
    if (dtype() == DType::f32) {
      std::memcpy(mem_.get(), in.data(), in.size_bytes());
    } else {
      for (size_t i = 0; i < in.size(); ++i) mem_.as<int32_t>()[i] = static_cast<int32_t>(in[i]);
    }
  }
  void write_indices(std::span<const int32_t> in) override {
    DLPERF_ASSERT(dtype() == DType::s32 && static_cast<int64_t>(in.size()) == numel(), "index tensor of matching size");
    std::memcpy(mem_.get(), in.data(), in.size_bytes());
  }
  void write_bytes(const void* src, size_t bytes) override {
    DLPERF_ASSERT(bytes == mem_.bytes(), "write_bytes of the tensor's size");
    std::memcpy(mem_.get(), src, bytes);
  }
  void zero() override { std::memset(mem_.get(), 0, mem_.bytes()); }
  bool same_layout(const Tensor& o) const override { return dims() == o.dims() && dtype() == o.dtype(); }
  const void* data() const { return mem_.get(); }

 private:
  PinnedMemory mem_;
};

class CudaInputPipe final : public InputPipe {
 public:
  CudaInputPipe(Ctx ctx, std::span<Tensor* const> inputs) : ctx_(std::move(ctx)) {
    for (Tensor* t : inputs) {
      CudaTensor& d = dev(*t);
      DLPERF_ASSERT(!d.nhwc(), "model input tensors are canonical");
      model_.push_back(&d);
      staging_.push_back(ctx_->alloc(d.storage_bytes()));
      for (auto& slot : host_) {
        slot.tensors.push_back(std::make_unique<PinnedTensor>(t->dims(), t->dtype()));
        slot.view.push_back(slot.tensors.back().get());
      }
    }
  }

  ~CudaInputPipe() override {
    // A copy may still read a host slot or write the staging set.
    cudaStreamSynchronize(copy_.get());
    cudaStreamSynchronize(ctx_->s());
  }

  std::span<Tensor* const> host_slot() override {
    Slot& slot = host_[static_cast<size_t>(sent_ % 2)];
    if (slot.in_flight) DLPERF_CHECK(cudaEventSynchronize(slot.copied.get()));  // sent two batches ago: long done
    slot.in_flight = false;
    return slot.view;
  }

  void send() override {
    Slot& slot = host_[static_cast<size_t>(sent_ % 2)];
    DLPERF_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_.get(), 0));  // the staging set is free
    for (size_t i = 0; i < model_.size(); ++i)
      DLPERF_CHECK(cudaMemcpyAsync(staging_[i].get(), slot.tensors[i]->data(), staging_[i].bytes(), cudaMemcpyHostToDevice,
                                   copy_.get()));
    DLPERF_CHECK(cudaEventRecord(slot.copied.get(), copy_.get()));
    DLPERF_CHECK(cudaEventRecord(staged_.get(), copy_.get()));
    slot.in_flight = true;
    ++sent_;
  }

  void deliver() override {
    DLPERF_ASSERT(sent_ > delivered_, "a batch is sent before it is delivered");
    DLPERF_CHECK(cudaStreamWaitEvent(ctx_->s(), staged_.get(), 0));
    for (size_t i = 0; i < model_.size(); ++i)
      DLPERF_CHECK(cudaMemcpyAsync(model_[i]->data(), staging_[i].get(), staging_[i].bytes(), cudaMemcpyDeviceToDevice, ctx_->s()));
    DLPERF_CHECK(cudaEventRecord(consumed_.get(), ctx_->s()));
    ++delivered_;
  }

 private:
  struct Slot {
    std::vector<std::unique_ptr<PinnedTensor>> tensors;  // shaped like the model's inputs
    std::vector<Tensor*> view;
    Event copied;              // on the copy stream, after this slot's copy
    bool in_flight = false;
  };
  Ctx ctx_;
  Stream copy_;
  std::vector<CudaTensor*> model_;
  std::vector<DeviceMemory> staging_;  // one device set
  Slot host_[2];
  Event staged_;    // the last send's copy is done
  Event consumed_;  // the last deliver's copy out of staging is done
  int64_t sent_ = 0, delivered_ = 0;
};

}  // namespace

std::unique_ptr<InputPipe> make_input_pipe(Ctx ctx, std::span<Tensor* const> inputs) {
  return std::make_unique<CudaInputPipe>(std::move(ctx), inputs);
}

}  // namespace dlperf::cuda
