// The CPU decoding path: each loader thread decodes its sample's crop (jpeg_decoder.h) and
// resamples, flips and normalises it (resample.h) straight into the batch buffer, in the
// model's element type and layout. Batch buffers come from the backend's allocator (page-
// locked on CUDA) and are reused for the whole run.
#pragma once

#include <vector>

#include "core/host_memory.h"
#include "data/random_resized_crop.h"
#include "data/resample.h"
#include "data/sample_sink.h"

namespace dlperf::data {

struct Augmentation {
  CropRange crop;                                  // RandomResizedCrop
  bool flip = true;                                // RandomHorizontalFlip(0.5)
  Normalization norm = imagenet_normalization();   // Normalize(mean, std)
};

// One sample's augmentation choices, drawn in this order from its generator (so the CPU and
// GPU paths agree): the crop, then the flip.
struct AugmentChoice {
  CropBox crop;
  bool flip = false;
};
AugmentChoice draw_augmentation(int width, int height, const Augmentation& a, SplitMix& rng);

class CpuSink final : public SampleSink {
 public:
  CpuSink(const ImageBatchFormat& format, int slots, const Augmentation& augment, const HostAllocator& allocate);
  std::unique_ptr<SinkWorker> make_worker() override;
  const void* images(int slot) const override { return buffers_[static_cast<size_t>(slot)].get(); }
  const ImageBatchFormat& format() const override { return format_; }
  void* image(int slot, int index) const {
    return static_cast<uint8_t*>(buffers_[static_cast<size_t>(slot)].get()) + static_cast<size_t>(index) * format_.image_bytes();
  }
  const Augmentation& augmentation() const { return augment_; }

 private:
  ImageBatchFormat format_;
  Augmentation augment_;
  std::vector<HostMemory> buffers_;  // one batch per slot
};

// Decodes and augments one JPEG into one image of a batch (format's type and layout); the
// state a thread reuses across samples. Throws DecodeError.
class CpuImagePipeline {
 public:
  explicit CpuImagePipeline(const ImageBatchFormat& format) { resampler_.reserve(format); }
  void run(std::span<const uint8_t> jpeg, const ImageBatchFormat& format, const Augmentation& augment, SplitMix& rng, void* image);
  // The same with the crop and flip already drawn (the GPU path's CPU fallback).
  void run(std::span<const uint8_t> jpeg, const AugmentChoice& choice, const ImageBatchFormat& format, const Normalization& norm,
           void* image);

 private:
  JpegDecoder decoder_;
  Resampler resampler_;
};

}  // namespace dlperf::data
