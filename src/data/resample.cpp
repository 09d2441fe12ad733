#include "data/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dlperf::data {

Normalization imagenet_normalization() {
  Normalization n;
  for (int c = 0; c < 3; ++c) {
    n.scale[static_cast<size_t>(c)] = 1.0f / (255.0f * kImageNetStd[static_cast<size_t>(c)]);
    n.shift[static_cast<size_t>(c)] = -kImageNetMean[static_cast<size_t>(c)] / kImageNetStd[static_cast<size_t>(c)];
  }
  return n;
}

void Resampler::reserve(const ImageBatchFormat& f, int max_source) {
  for (auto* t : {&h_, &v_}) {
    const auto out = static_cast<size_t>(t == &h_ ? f.width : f.height);
    t->start.reserve(out);
    t->count.reserve(out);
    t->weight.reserve(out * static_cast<size_t>(2 * ((max_source + static_cast<int>(out) - 1) / static_cast<int>(out)) + 1));
  }
  row_.reserve(static_cast<size_t>(max_source) * 3);
  out_.reserve(static_cast<size_t>(f.width) * 3);
}

void Resampler::taps(double in0, double len, int lo, int hi, int out, int bound, Taps& t) {
  const double scale = len / out;
  const double filterscale = std::max(scale, 1.0);
  const double support = filterscale;  // the triangle filter's support is 1
  t.max_count = static_cast<int>(std::ceil(support)) * 2 + 1;
  const int max_bound = static_cast<int>(std::ceil(std::max(1.0, static_cast<double>(std::max(bound, hi)) / out))) * 2 + 1;
  t.weight.reserve(static_cast<size_t>(out) * static_cast<size_t>(std::max(max_bound, t.max_count)));
  t.start.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.weight.assign(static_cast<size_t>(out) * static_cast<size_t>(t.max_count), 0.0f);
  for (int i = 0; i < out; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    const int first = std::max(static_cast<int>(std::floor(center - support + 0.5)), lo);
    const int last = std::min(static_cast<int>(std::floor(center + support + 0.5)), hi);
    const int n = std::max(1, std::min(last - first, t.max_count));
    float* w = &t.weight[static_cast<size_t>(i) * static_cast<size_t>(t.max_count)];
    double sum = 0;
    for (int k = 0; k < n; ++k) {
      const double x = (first + k - center + 0.5) / filterscale;
      const double v = std::max(0.0, 1.0 - std::abs(x));
      w[k] = static_cast<float>(v);
      sum += v;
    }
    if (sum > 0) {
      for (int k = 0; k < n; ++k) w[k] = static_cast<float>(w[k] / sum);
    } else {
      w[0] = 1.0f;  // a degenerate 1-pixel source
    }
    t.start[static_cast<size_t>(i)] = std::min(first, hi - 1);
    t.count[static_cast<size_t>(i)] = first < hi ? n : 1;
  }
}

namespace {

void store_row(const float* rgb, int width, int y, const ImageBatchFormat& fmt, void* image) {
  const size_t plane = static_cast<size_t>(fmt.height * fmt.width);
  const size_t row = static_cast<size_t>(y) * static_cast<size_t>(fmt.width);
  if (fmt.layout == PixelLayout::nchw) {
    for (int c = 0; c < 3; ++c) {
      const size_t base = static_cast<size_t>(c) * plane + row;
      switch (fmt.type) {
        case PixelType::f32: {
          float* o = static_cast<float*>(image) + base;
          for (int x = 0; x < width; ++x) o[x] = rgb[3 * x + c];
          break;
        }
        case PixelType::bf16: {
          uint16_t* o = static_cast<uint16_t*>(image) + base;
          for (int x = 0; x < width; ++x) o[x] = to_bf16(rgb[3 * x + c]);
          break;
        }
        case PixelType::f16: {
          uint16_t* o = static_cast<uint16_t*>(image) + base;
          for (int x = 0; x < width; ++x) o[x] = to_f16(rgb[3 * x + c]);
          break;
        }
      }
    }
    return;
  }
  const size_t n = static_cast<size_t>(width) * 3, base = row * 3;
  switch (fmt.type) {
    case PixelType::f32: std::memcpy(static_cast<float*>(image) + base, rgb, n * sizeof(float)); break;
    case PixelType::bf16: {
      uint16_t* o = static_cast<uint16_t*>(image) + base;
      for (size_t i = 0; i < n; ++i) o[i] = to_bf16(rgb[i]);
      break;
    }
    case PixelType::f16: {
      uint16_t* o = static_cast<uint16_t*>(image) + base;
      for (size_t i = 0; i < n; ++i) o[i] = to_f16(rgb[i]);
      break;
    }
  }
}

}  // namespace

void Resampler::run(const DecodedRegion& src, bool flip, const ImageBatchFormat& fmt, const Normalization& norm, void* image) {
  const int ow = static_cast<int>(fmt.width), oh = static_cast<int>(fmt.height);
  // The crop's whole pixels inside the region bound the taps (torchvision crops, then resizes).
  const int x_lo = std::max(0, static_cast<int>(std::floor(src.crop_x)));
  const int x_hi = std::min(src.width, std::max(x_lo + 1, static_cast<int>(std::ceil(src.crop_x + src.crop_w))));
  const int y_lo = std::max(0, static_cast<int>(std::floor(src.crop_y)));
  const int y_hi = std::min(src.height, std::max(y_lo + 1, static_cast<int>(std::ceil(src.crop_y + src.crop_h))));
  taps(src.crop_x, src.crop_w, x_lo, x_hi, ow, src.image_width, h_);
  taps(src.crop_y, src.crop_h, y_lo, y_hi, oh, src.image_height, v_);
  // Source columns the horizontal taps read: only those are filtered vertically.
  int col_lo = h_.start[0], col_hi = h_.start[0] + 1;
  for (int x = 0; x < ow; ++x) {
    col_lo = std::min(col_lo, h_.start[static_cast<size_t>(x)]);
    col_hi = std::max(col_hi, h_.start[static_cast<size_t>(x)] + h_.count[static_cast<size_t>(x)]);
  }
  const size_t span = static_cast<size_t>(col_hi - col_lo) * 3;
  if (row_.size() < span) row_.resize(std::max(span, static_cast<size_t>(std::max(src.image_width, src.width)) * 3));
  if (out_.size() < static_cast<size_t>(ow) * 3) out_.resize(static_cast<size_t>(ow) * 3);

  for (int y = 0; y < oh; ++y) {
    // Vertical: row_ = sum_k w_k * src[start + k], over the needed columns.
    const int first = v_.start[static_cast<size_t>(y)], n = v_.count[static_cast<size_t>(y)];
    const float* w = &v_.weight[static_cast<size_t>(y) * static_cast<size_t>(v_.max_count)];
    float* acc = row_.data();
    const uint8_t* s0 = src.rgb + static_cast<size_t>(first) * src.stride + static_cast<size_t>(col_lo) * 3;
    for (size_t j = 0; j < span; ++j) acc[j] = w[0] * s0[j];
    for (int k = 1; k < n; ++k) {
      const uint8_t* s = s0 + static_cast<size_t>(k) * src.stride;
      const float wk = w[k];
      for (size_t j = 0; j < span; ++j) acc[j] += wk * s[j];
    }
    // Horizontal, flip and normalisation: out_[x] for output column x (mirrored when flip).
    for (int x = 0; x < ow; ++x) {
      const int start = h_.start[static_cast<size_t>(x)] - col_lo, cnt = h_.count[static_cast<size_t>(x)];
      const float* hw = &h_.weight[static_cast<size_t>(x) * static_cast<size_t>(h_.max_count)];
      const float* p = acc + static_cast<size_t>(start) * 3;
      float r = 0, g = 0, b = 0;
      for (int k = 0; k < cnt; ++k) {
        r += hw[k] * p[3 * k];
        g += hw[k] * p[3 * k + 1];
        b += hw[k] * p[3 * k + 2];
      }
      float* o = &out_[static_cast<size_t>(flip ? ow - 1 - x : x) * 3];
      o[0] = r * norm.scale[0] + norm.shift[0];
      o[1] = g * norm.scale[1] + norm.shift[1];
      o[2] = b * norm.scale[2] + norm.shift[2];
    }
    store_row(out_.data(), ow, y, fmt, image);
  }
}

}  // namespace dlperf::data
