// VGG16, configuration D of Simonyan & Zisserman 2014 ("Very Deep Convolutional Networks for
// Large-Scale Image Recognition"), with torchvision's parameter names: 13 convolutions 3x3 pad 1
// with bias and ReLU (features.N), 5 max pools 2x2, and the classifier
// (C*H*W) -> hidden -> hidden -> classes with ReLU and dropout (classifier.0, .3, .6).
// The defaults are VGG16 at 224x224: 138,357,544 parameters at 1000 classes. Tests use reduced
// widths, hidden size and image size.
#pragma once

#include <memory>

#include "models/model.h"

namespace dlperf {

struct VggConfig {
  int64_t width = 64;          // channels of the first block; blocks use 1x, 2x, 4x, 8x, 8x
  int64_t hidden = 4096;       // classifier hidden width
  int64_t classes = 1000;
  int64_t batch = 16;          // per device
  int64_t image_size = 224;    // H = W, a multiple of 32
  float dropout = 0.5f;        // classifier dropout probability
  float label_smoothing = 0.0f;
  uint64_t dropout_seed = 0;
};

// Five 2x2 pools: the image must be a multiple of 32 (32 leaves a 1x1 map).
inline constexpr int64_t kVggMinImageSize = 32;

// Checks the configuration (usage errors name the flag) and plans every op.
std::unique_ptr<Model> make_vgg(Backend& be, const VggConfig& config);

// Parameters of a configuration, counted as PyTorch does.
int64_t vgg_parameter_count(const VggConfig& c);
// Those of them in convolution filters and linear matrices (no biases): what the memory plan's
// sharded master weights shard.
int64_t vgg_matrix_count(const VggConfig& c);

}  // namespace dlperf
