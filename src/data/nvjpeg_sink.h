// --decoder gpu: JPEG decoding with nvJPEG on the training GPU (its hardware JPEG decoder on
// A100/H100, the CUDA decoder elsewhere), and RandomResizedCrop + flip + normalisation in a
// CUDA kernel writing the batch in the model's format straight into device memory. The loader
// threads only read files, parse headers and draw each sample's crop (so a few CPU cores can
// feed a fast GPU); the loader's batch thread runs one batched decode per batch.
// Images nvJPEG's batched path does not take (CMYK, progressive) and a batch nvJPEG fails on
// are decoded by the CPU path instead, into pinned memory, and copied in.
// Built only where CMake found nvJPEG (DLPERF_WITH_NVJPEG).
#pragma once

#include <memory>

#include "core/host_memory.h"
#include "data/cpu_sink.h"
#include "data/sample_sink.h"

namespace dlperf::data {

// `device`: the CUDA device the batches live on (the rank's GPU).
std::unique_ptr<SampleSink> make_nvjpeg_sink(const ImageBatchFormat& format, int slots, const Augmentation& augment, int device,
                                             const HostAllocator& allocate);

}  // namespace dlperf::data
