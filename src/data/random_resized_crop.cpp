#include "data/random_resized_crop.h"

#include <cmath>

namespace dlperf::data {

// Python's round() is round-half-to-even, as nearbyint in the default rounding mode.
static int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }

CropBox random_resized_crop(int width, int height, const CropRange& r, SplitMix& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(r.ratio_min), log_hi = std::log(r.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (r.scale_min + (r.scale_max - r.scale_min) * rng.uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    const int w = round_even(std::sqrt(target * aspect));
    const int h = round_even(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int y = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const int x = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {x, y, w, h};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < r.ratio_min) h = round_even(w / r.ratio_min);
  else if (in_ratio > r.ratio_max) w = round_even(h * r.ratio_max);
  return {(width - w) / 2, (height - h) / 2, w, h};
}

}  // namespace dlperf::data
