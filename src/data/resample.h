// From a decoded crop to one image of the batch: antialiased bilinear resampling to the
// output size, horizontal flip, per-channel normalisation, stored in the batch's element
// type and layout. The filter is PIL's Image.resize(BILINEAR) (a triangle filter whose
// support widens with the downscale factor), which is what torchvision's RandomResizedCrop
// applies to the cropped PIL image; pixels outside the crop are not used, as after
// torchvision's crop.
//
// Separable, vertical pass first: each output row combines a few whole source rows
// (contiguous, vectorised) into one float row, then the horizontal pass reduces that row to
// the output width and writes the result normalised and converted. Buffers are reused.
#pragma once

#include <array>
#include <vector>

#include "data/image_format.h"
#include "data/jpeg_decoder.h"

namespace dlperf::data {

// out = v * scale[c] + shift[c] for v in [0, 255]: (v / 255 - mean) / std.
struct Normalization {
  std::array<float, 3> scale{}, shift{};
};
Normalization imagenet_normalization();

class Resampler {
 public:
  // Reserves the buffers for `format` and sources up to `max_source` pixels wide or high, so
  // run() does not allocate for such images.
  void reserve(const ImageBatchFormat& format, int max_source = 1024);
  // Writes one image (fmt.height x fmt.width) at `image` (the start of that image in the
  // batch: its 3 planes in nchw, its rows of RGB pixels in nhwc).
  void run(const DecodedRegion& src, bool flip, const ImageBatchFormat& fmt, const Normalization& norm, void* image);

  // Filter taps for one axis: output i reads source [start[i], start[i] + count[i]).
  struct Taps {
    std::vector<int> start, count;
    std::vector<float> weight;  // max_count per output, normalised to sum 1
    int max_count = 0;
  };
  // PIL's precompute_coeffs for the triangle filter over the source interval [in0, in0 + len)
  // of [lo, hi), `out` outputs. `bound`: the largest source length this Taps will see, so its
  // capacity is reserved once (no allocation per image in steady state).
  static void taps(double in0, double len, int lo, int hi, int out, int bound, Taps& t);

 private:
  Taps h_, v_;
  std::vector<float> row_;  // one vertically filtered source row, RGB
  std::vector<float> out_;  // one output row, RGB, normalised
};

}  // namespace dlperf::data
