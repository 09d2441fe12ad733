// The nvJPEG sink (see nvjpeg_sink.h). Per slot: the staged compressed images and their
// crops (host), a pinned host batch for the images the CPU decodes, and the device batch.
// The batch thread owns the nvJPEG handle and state, the stream, the per-image decode
// buffers (grown to the largest image, then reused) and the crop table.
#include "data/nvjpeg_sink.h"

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/check_cuda.h"
#include "data/gpu_augment.h"
#include "data/jpeg_decoder.h"

namespace dlperf {

template <>
struct StatusTraits<nvjpegStatus_t> {
  static constexpr const char* library = "nvJPEG";
  static bool ok(nvjpegStatus_t s) { return s == NVJPEG_STATUS_SUCCESS; }
  static std::string describe(nvjpegStatus_t s) { return "nvjpegStatus_t " + std::to_string(static_cast<int>(s)); }
};

namespace data {
namespace {

struct Job {
  AugmentChoice choice;
  int width = 0, height = 0;
  bool on_gpu = false;  // staged for nvJPEG; else already decoded into the pinned host batch
};

struct Slot {
  std::vector<std::vector<uint8_t>> jpeg;  // [B] compressed bytes (capacity kept)
  std::vector<Job> jobs;                   // [B]
  HostMemory host{nullptr, nullptr};       // (B, image) pinned: CPU-decoded images
  void* device = nullptr;                  // (B, image) the batch on the GPU
};

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

class NvjpegSink final : public SampleSink {
 public:
  NvjpegSink(const ImageBatchFormat& f, int slots, const Augmentation& a, int device, const HostAllocator& allocate)
      : format_(f), augment_(a), device_(device), slots_(static_cast<size_t>(slots)), cpu_(f) {
    DLPERF_CHECK(cudaSetDevice(device_));
    for (auto& s : slots_) {
      s.jpeg.resize(static_cast<size_t>(f.batch));
      s.jobs.resize(static_cast<size_t>(f.batch));
      s.host = allocate(f.batch_bytes());
      DLPERF_CHECK(cudaMalloc(&s.device, f.batch_bytes()));
    }
    // The hardware decoder where the GPU has one (A100, H100), else the default backend.
    if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &handle_) != NVJPEG_STATUS_SUCCESS)
      DLPERF_CHECK(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &handle_));
    DLPERF_CHECK(nvjpegJpegStateCreate(handle_, &state_));
    DLPERF_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DLPERF_CHECK(cudaMalloc(reinterpret_cast<void**>(&crops_dev_), sizeof(GpuCrop) * static_cast<size_t>(f.batch)));
    DLPERF_CHECK(cudaMallocHost(reinterpret_cast<void**>(&crops_host_), sizeof(GpuCrop) * static_cast<size_t>(f.batch)));
    decoded_.resize(static_cast<size_t>(f.batch));
  }

  ~NvjpegSink() override {
    // Teardown ignores errors: a failed run is already reporting its own.
    (void)cudaStreamSynchronize(stream_);
    for (auto& s : slots_) (void)cudaFree(s.device);
    for (auto& b : decoded_) (void)cudaFree(b.ptr);
    (void)cudaFree(crops_dev_);
    (void)cudaFreeHost(crops_host_);
    (void)nvjpegJpegStateDestroy(state_);
    (void)nvjpegDestroy(handle_);
    (void)cudaStreamDestroy(stream_);
  }

  std::unique_ptr<SinkWorker> make_worker() override;
  const void* images(int slot) const override { return slots_[static_cast<size_t>(slot)].device; }
  bool on_device() const override { return true; }
  bool has_batch_step() const override { return true; }
  const ImageBatchFormat& format() const override { return format_; }
  std::span<const int> finish(int slot) override;

  Slot& slot(int s) { return slots_[static_cast<size_t>(s)]; }
  const Augmentation& augmentation() const { return augment_; }
  void* host_image(int s, int i) {
    return static_cast<uint8_t*>(slot(s).host.get()) + static_cast<size_t>(i) * format_.image_bytes();
  }

 private:
  void cpu_fallback(int slot, int i);  // on the batch thread

  ImageBatchFormat format_;
  Augmentation augment_;
  int device_;
  std::vector<Slot> slots_;
  // Batch thread only:
  bool device_set_ = false;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int batched_size_ = -1;  // what nvjpegDecodeBatchedInitialize was last called with
  std::vector<DeviceBuffer> decoded_;  // [B] RGB of each image, full size
  GpuCrop* crops_dev_ = nullptr;
  GpuCrop* crops_host_ = nullptr;
  std::vector<const unsigned char*> data_;
  std::vector<size_t> lengths_;
  std::vector<nvjpegImage_t> dest_;
  std::vector<int> order_;   // batch index of each staged image
  std::vector<int> failed_;  // images neither decoder could decode
  CpuImagePipeline cpu_;
};

class NvjpegWorker final : public SinkWorker {
 public:
  explicit NvjpegWorker(NvjpegSink& sink) : sink_(sink), cpu_(sink.format()) {}
  void put(int slot, int index, std::span<const uint8_t> bytes, SplitMix& rng) override {
    const JpegHeader h = header_.read_header(bytes.data(), bytes.size());  // throws DecodeError: a bad sample
    Job& j = sink_.slot(slot).jobs[static_cast<size_t>(index)];
    j.choice = draw_augmentation(h.width, h.height, sink_.augmentation(), rng);
    j.width = h.width;
    j.height = h.height;
    // nvJPEG's batched path takes baseline greyscale and YCbCr; the rest is decoded here.
    j.on_gpu = (h.components == 1 || h.components == 3) && !h.progressive;
    if (j.on_gpu) sink_.slot(slot).jpeg[static_cast<size_t>(index)].assign(bytes.begin(), bytes.end());
    else cpu_.run(bytes, j.choice, sink_.format(), sink_.augmentation().norm, sink_.host_image(slot, index));
  }

 private:
  NvjpegSink& sink_;
  JpegDecoder header_;
  CpuImagePipeline cpu_;
};

std::unique_ptr<SinkWorker> NvjpegSink::make_worker() { return std::make_unique<NvjpegWorker>(*this); }

void NvjpegSink::cpu_fallback(int slot_index, int i) {
  Slot& s = slot(slot_index);
  Job& j = s.jobs[static_cast<size_t>(i)];
  j.on_gpu = false;
  try {
    cpu_.run(s.jpeg[static_cast<size_t>(i)], j.choice, format_, augment_.norm, host_image(slot_index, i));
  } catch (const DecodeError&) {
    std::memset(host_image(slot_index, i), 0, format_.image_bytes());  // the mean image (0 after normalisation)
    failed_.push_back(i);
  }
}

std::span<const int> NvjpegSink::finish(int slot_index) {
  if (!device_set_) {
    DLPERF_CHECK(cudaSetDevice(device_));
    device_set_ = true;
  }
  Slot& s = slot(slot_index);
  failed_.clear();
  order_.clear();
  data_.clear();
  lengths_.clear();
  dest_.clear();
  for (int i = 0; i < static_cast<int>(format_.batch); ++i) {
    const Job& j = s.jobs[static_cast<size_t>(i)];
    if (!j.on_gpu) continue;
    DeviceBuffer& b = decoded_[static_cast<size_t>(i)];
    const size_t need = static_cast<size_t>(j.width) * static_cast<size_t>(j.height) * 3;
    if (b.bytes < need) {  // grows to the largest image seen at this position, then stays
      DLPERF_CHECK(cudaFree(b.ptr));
      DLPERF_CHECK(cudaMalloc(&b.ptr, need));
      b.bytes = need;
    }
    nvjpegImage_t d{};
    d.channel[0] = static_cast<unsigned char*>(b.ptr);
    d.pitch[0] = static_cast<size_t>(j.width) * 3;
    order_.push_back(i);
    data_.push_back(s.jpeg[static_cast<size_t>(i)].data());
    lengths_.push_back(s.jpeg[static_cast<size_t>(i)].size());
    dest_.push_back(d);
  }
  const int n = static_cast<int>(order_.size());
  if (n > 0) {
    nvjpegStatus_t st = NVJPEG_STATUS_SUCCESS;
    if (n != batched_size_) {
      st = nvjpegDecodeBatchedInitialize(handle_, state_, n, 1, NVJPEG_OUTPUT_RGBI);
      batched_size_ = st == NVJPEG_STATUS_SUCCESS ? n : -1;
    }
    if (st == NVJPEG_STATUS_SUCCESS) st = nvjpegDecodeBatched(handle_, state_, data_.data(), lengths_.data(), dest_.data(), stream_);
    if (st != NVJPEG_STATUS_SUCCESS) {
      // One image nvJPEG rejects fails the whole call: this batch goes through the CPU, and the
      // next call re-initialises (nvJPEG's documented reset after a failed batch).
      batched_size_ = -1;
      for (int i : order_) cpu_fallback(slot_index, i);
    } else {
      int k = 0;
      for (int i : order_) {
        const Job& j = s.jobs[static_cast<size_t>(i)];
        crops_host_[k++] = GpuCrop{static_cast<const uint8_t*>(decoded_[static_cast<size_t>(i)].ptr), j.width * 3, j.width, j.height,
                                   j.choice.crop.x, j.choice.crop.y, j.choice.crop.w, j.choice.crop.h, j.choice.flip ? 1 : 0, i};
      }
      DLPERF_CHECK(cudaMemcpyAsync(crops_dev_, crops_host_, sizeof(GpuCrop) * static_cast<size_t>(k), cudaMemcpyHostToDevice, stream_));
      DLPERF_CHECK(static_cast<cudaError_t>(launch_gpu_augment(crops_dev_, k, s.device, format_, augment_.norm.scale.data(), augment_.norm.shift.data(), stream_)));
    }
  }
  // Images decoded on the CPU (by the workers, or just now): one copy each into the device batch.
  for (int i = 0; i < static_cast<int>(format_.batch); ++i) {
    if (s.jobs[static_cast<size_t>(i)].on_gpu) continue;
    const size_t at = static_cast<size_t>(i) * format_.image_bytes();
    DLPERF_CHECK(cudaMemcpyAsync(static_cast<uint8_t*>(s.device) + at, static_cast<uint8_t*>(s.host.get()) + at, format_.image_bytes(),
                                 cudaMemcpyHostToDevice, stream_));
  }
  // The batch is complete before the loader calls it ready (the step's copy runs on another
  // stream); the batch thread waits here, not the step.
  DLPERF_CHECK(cudaStreamSynchronize(stream_));
  return failed_;
}

}  // namespace

std::unique_ptr<SampleSink> make_nvjpeg_sink(const ImageBatchFormat& format, int slots, const Augmentation& augment, int device,
                                             const HostAllocator& allocate) {
  return std::make_unique<NvjpegSink>(format, slots, augment, device, allocate ? allocate : HostAllocator(aligned_host_memory));
}

}  // namespace data
}  // namespace dlperf
