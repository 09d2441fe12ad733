// CPU JPEG decoding of just what a crop needs, with libjpeg-turbo's libjpeg API:
//   * DCT-domain downscaling (1/2, 1/4, 1/8: the factors with SIMD inverse DCTs; 3/8, 5/8...
//     use C code and measured slower than a full decode) when the crop stays at least the
//     output size, so a 1000-pixel crop for a 224-pixel output costs a quarter of the IDCT;
//   * jpeg_crop_scanline: only the iMCU columns covering the crop are inverse-transformed,
//     upsampled and colour-converted;
//   * jpeg_skip_scanlines / early stop: rows above the crop are entropy-decoded only, rows
//     below it are not touched.
// TurboJPEG 2.1's tjDecompress2 has the scaling but neither crop, and measured ~25% more CPU
// per ImageNet-like image (500x375, RandomResizedCrop to 224) than this path.
//
// Greyscale is expanded to RGB by libjpeg; CMYK/YCCK (Adobe, inverted) is converted here.
// A corrupt or truncated file (libjpeg error, premature end, no end-of-image marker) throws
// DecodeError; libjpeg's other warnings (extraneous bytes) are ignored, as PIL does.
// One decoder per loader thread: the libjpeg state and buffers are reused across images.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "data/random_resized_crop.h"

namespace dlperf::data {

struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct JpegHeader {
  int width = 0, height = 0;
  int components = 0;  // 1 greyscale, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
};

// Decoded 8-bit RGB pixels covering a crop, and where the crop lies inside them (in decoded
// pixels: fractional after DCT scaling).
struct DecodedRegion {
  const uint8_t* rgb = nullptr;  // (height, width, 3), rows `stride` bytes apart
  int width = 0, height = 0;
  size_t stride = 0;
  double crop_x = 0, crop_y = 0, crop_w = 0, crop_h = 0;
  int scale_denom = 1;  // DCT downscaling used: 1, 2, 4 or 8
  int image_width = 0, image_height = 0;  // the whole image, undecoded: bounds any region of it
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Starts an image: parses the headers. `data` must stay valid until decode() returns.
  JpegHeader read_header(const uint8_t* data, size_t size);
  // Decodes the started image's pixels covering `crop`, downscaled by the largest 1/2^k
  // (k <= 3) that keeps the crop at least min_w x min_h (1 x 1: the smallest). The region
  // stays valid until the next read_header.
  DecodedRegion decode(const CropBox& crop, int min_w, int min_h);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlperf::data
