#include "data/cpu_sink.h"

namespace dlperf::data {

AugmentChoice draw_augmentation(int width, int height, const Augmentation& a, SplitMix& rng) {
  AugmentChoice c;
  c.crop = random_resized_crop(width, height, a.crop, rng);
  c.flip = a.flip && rng.uniform() < 0.5;
  return c;
}

void CpuImagePipeline::run(std::span<const uint8_t> jpeg, const ImageBatchFormat& format, const Augmentation& augment, SplitMix& rng,
                           void* image) {
  const JpegHeader h = decoder_.read_header(jpeg.data(), jpeg.size());
  const AugmentChoice c = draw_augmentation(h.width, h.height, augment, rng);
  const DecodedRegion region = decoder_.decode(c.crop, static_cast<int>(format.width), static_cast<int>(format.height));
  resampler_.run(region, c.flip, format, augment.norm, image);
}

void CpuImagePipeline::run(std::span<const uint8_t> jpeg, const AugmentChoice& c, const ImageBatchFormat& format,
                           const Normalization& norm, void* image) {
  decoder_.read_header(jpeg.data(), jpeg.size());
  const DecodedRegion region = decoder_.decode(c.crop, static_cast<int>(format.width), static_cast<int>(format.height));
  resampler_.run(region, c.flip, format, norm, image);
}

namespace {

class CpuWorker final : public SinkWorker {
 public:
  explicit CpuWorker(const CpuSink& sink) : sink_(sink), pipeline_(sink.format()) {}
  void put(int slot, int index, std::span<const uint8_t> bytes, SplitMix& rng) override {
    pipeline_.run(bytes, sink_.format(), sink_.augmentation(), rng, sink_.image(slot, index));
  }

 private:
  const CpuSink& sink_;
  CpuImagePipeline pipeline_;
};

}  // namespace

CpuSink::CpuSink(const ImageBatchFormat& format, int slots, const Augmentation& augment, const HostAllocator& allocate)
    : format_(format), augment_(augment) {
  for (int s = 0; s < slots; ++s) buffers_.push_back(allocate ? allocate(format_.batch_bytes()) : aligned_host_memory(format_.batch_bytes()));
}

std::unique_ptr<SinkWorker> CpuSink::make_worker() { return std::make_unique<CpuWorker>(*this); }

}  // namespace dlperf::data
