// The GPU decoder's augmentation kernel (gpu_augment.cu), for nvjpeg_sink.cpp. Plain C++17:
// CUDA device code is compiled as C++17 here.
#pragma once

#include <cstdint>

#include "data/image_format.h"

namespace dlperf::data {

// The crop of one decoded image.
struct GpuCrop {
  const uint8_t* src;  // decoded RGB, interleaved, rows `pitch` bytes apart (device)
  int pitch, width, height;
  int x, y, w, h;      // the crop, source pixels
  int flip;
  int index;           // the image of the batch to write
};

// Resamples each crop to format's size (PIL's antialiased bilinear, as resample.cpp does on
// the CPU), flips it, normalises (v * scale[c] + shift[c] for v in [0, 255]) and stores it
// into `batch` (device) in format's type and layout, on `stream` (a cudaStream_t). `crops`
// is device memory. Returns the launch's cudaError_t.
int launch_gpu_augment(const GpuCrop* crops, int count, void* batch, const ImageBatchFormat& format, const float scale[3],
                       const float shift[3], void* stream);

}  // namespace dlperf::data
