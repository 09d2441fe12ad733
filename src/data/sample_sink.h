// Where the loader's threads put samples: the one seam between the loader (which sample, in
// which batch slot, read how, retried how) and the decoding path. The CPU sink decodes and
// augments each sample into the batch; the nvJPEG sink stages compressed bytes that a batch
// step then decodes on the GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "data/image_format.h"
#include "data/random.h"

namespace dlperf::data {

// One loader thread's state (decoders, scratch buffers): used by that thread only.
class SinkWorker {
 public:
  virtual ~SinkWorker() = default;
  // Puts `bytes` (one JPEG) as image `index` of the batch in `slot`, with its random crop and
  // flip drawn from rng. Throws DecodeError when the sample is unusable.
  virtual void put(int slot, int index, std::span<const uint8_t> bytes, SplitMix& rng) = 0;
};

class SampleSink {
 public:
  virtual ~SampleSink() = default;
  virtual std::unique_ptr<SinkWorker> make_worker() = 0;
  // Where the finished batch of `slot` is, format().batch_bytes() bytes: host memory, or
  // device memory when on_device().
  virtual const void* images(int slot) const = 0;
  virtual bool on_device() const { return false; }
  // True when a batch needs a last step after all its samples are put (a device decode).
  virtual bool has_batch_step() const { return false; }
  // That step, on the loader's batch thread, batches in order. Returns the indices of images
  // that could not be decoded there (replaced by a mean image; the loader counts them).
  virtual std::span<const int> finish(int /*slot*/) { return {}; }
  virtual const ImageBatchFormat& format() const = 0;
};

}  // namespace dlperf::data
