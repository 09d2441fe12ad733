// ResNet v1.5 (torchvision's and NVIDIA's ResNet-50 definition): bottleneck blocks with the
// stride on the 3x3 convolution. blocks = {3, 4, 6, 3} and width 64 give ResNet-50
// (25,557,032 parameters at 1000 classes); tests use reduced depth, width and image size.
#pragma once

#include <array>

#include "models/model.h"

namespace dlperf {

struct ResNetConfig {
  std::array<int, 4> blocks = {3, 4, 6, 3};
  int64_t width = 64;          // planes of the first stage; stages use 1x, 2x, 4x, 8x
  int64_t classes = 1000;
  int64_t batch = 32;          // per device
  int64_t image_size = 224;    // H = W
  float label_smoothing = 0.1f;
  // --recompute block: each bottleneck keeps only its input (the previous block's output);
  // its inner activations live in buffers shared by the blocks of one shape and are recomputed
  // just before the block's backward, without moving batch norm's running statistics twice.
  bool recompute = false;
};

// The smallest image that still leaves a 1x1 map before the global pool: 32 (stride 32).
inline constexpr int64_t kResNetMinImageSize = 32;

std::unique_ptr<Model> make_resnet(Backend& be, const ResNetConfig& config);

}  // namespace dlperf
