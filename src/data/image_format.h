// The layout and element type a loader writes a batch of images in: exactly what the model's
// input tensor holds, so handing the batch over is one copy (no f32 detour, no reorder).
//   nchw f32   (N, 3, H, W)   fp32 runs: the first convolution reads canonical NCHW
//   nhwc bf16  (N, H, W, 3)   bf16 runs (AMX / tensor cores want channels-last)
//   nhwc f16   (N, H, W, 3)   fp16 runs on CUDA
// Pixels are normalised per channel: (v / 255 - mean[c]) / std[c] (ImageNet statistics).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dlperf::data {

enum class PixelType : uint8_t { f32, bf16, f16 };
enum class PixelLayout : uint8_t { nchw, nhwc };
const char* to_string(PixelType t);
const char* to_string(PixelLayout l);
size_t pixel_bytes(PixelType t);

// torchvision's ImageNet normalisation (transforms.Normalize in the reference training).
inline constexpr std::array<float, 3> kImageNetMean = {0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd = {0.229f, 0.224f, 0.225f};

struct ImageBatchFormat {
  int64_t batch = 32;
  int64_t height = 224, width = 224;
  PixelType type = PixelType::f32;
  PixelLayout layout = PixelLayout::nchw;

  int64_t image_elems() const { return 3 * height * width; }
  size_t image_bytes() const { return static_cast<size_t>(image_elems()) * pixel_bytes(type); }
  size_t batch_bytes() const { return static_cast<size_t>(batch) * image_bytes(); }
  std::string describe() const;  // "32x224x224 bf16 nhwc"
};

// Round-to-nearest-even conversions for values in the normalised range (no NaN inputs).
inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
uint16_t to_f16(float f);  // IEEE half, round to nearest even, overflow to inf
float from_f16(uint16_t h);
inline float from_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace dlperf::data
