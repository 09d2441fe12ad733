// The crop of RandomResizedCrop (torchvision.transforms.RandomResizedCrop.get_params, the
// augmentation of the reference ResNet-50 / VGG training): an area fraction uniform in
// [scale_min, scale_max] and a log-uniform aspect ratio in [ratio_min, ratio_max], up to ten
// tries to fit it in the image, else a centred crop of the image clamped to the ratio range.
#pragma once

#include "data/random.h"

namespace dlperf::data {

struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;  // source pixels: columns [x, x+w), rows [y, y+h)
};

struct CropRange {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};

CropBox random_resized_crop(int width, int height, const CropRange& range, SplitMix& rng);

}  // namespace dlperf::data
