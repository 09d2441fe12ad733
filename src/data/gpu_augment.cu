// The GPU decoder's augmentation kernel: one thread per output pixel of one image. Each output
// pixel is PIL's separable triangle filter (support max(1, scale) per axis, weights normalised
// per axis) over the crop only, as resample.cpp computes it on the CPU; then flip,
// (v / 255 - mean) / std, and the store in the batch's type and layout.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "data/gpu_augment.h"

namespace dlperf::data {
namespace {

struct Params {
  int out_w, out_h, type, nhwc;
  float scale[3], shift[3];
};

__device__ void filter_axis(float in0, float len, int lo, int hi, int out, int i, int& first, int& n, float& filterscale, float& center) {
  const float scale = len / out;
  filterscale = fmaxf(scale, 1.0f);
  center = in0 + (i + 0.5f) * scale;
  first = max(static_cast<int>(floorf(center - filterscale + 0.5f)), lo);
  const int last = min(static_cast<int>(floorf(center + filterscale + 0.5f)), hi);
  n = max(1, last - first);
}

__global__ void augment(const GpuCrop* crops, Params p, void* batch) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y;
  if (x >= p.out_w || y >= p.out_h) return;
  const GpuCrop c = crops[blockIdx.z];
  int fx, nx, fy, ny;
  float sx, sy, cx, cy;
  filter_axis(static_cast<float>(c.x), static_cast<float>(c.w), c.x, c.x + c.w, p.out_w, x, fx, nx, sx, cx);
  filter_axis(static_cast<float>(c.y), static_cast<float>(c.h), c.y, c.y + c.h, p.out_h, y, fy, ny, sy, cy);
  float acc[3] = {0, 0, 0}, wsum_y = 0;
  for (int ky = 0; ky < ny; ++ky) {
    const float wy = fmaxf(0.0f, 1.0f - fabsf((fy + ky - cy + 0.5f) / sy));
    if (wy == 0.0f) continue;
    const uint8_t* row = c.src + static_cast<size_t>(fy + ky) * c.pitch;
    float r[3] = {0, 0, 0}, wsum_x = 0;
    for (int kx = 0; kx < nx; ++kx) {
      const float wx = fmaxf(0.0f, 1.0f - fabsf((fx + kx - cx + 0.5f) / sx));
      const uint8_t* px = row + 3 * (fx + kx);
      r[0] += wx * px[0];
      r[1] += wx * px[1];
      r[2] += wx * px[2];
      wsum_x += wx;
    }
    const float w = wsum_x > 0 ? wy / wsum_x : 0.0f;
    for (int ch = 0; ch < 3; ++ch) acc[ch] += w * r[ch];
    wsum_y += wy;
  }
  const int ox = c.flip ? p.out_w - 1 - x : x;
  const size_t plane = static_cast<size_t>(p.out_w) * p.out_h;
  const size_t image = static_cast<size_t>(c.index) * plane * 3;
  for (int ch = 0; ch < 3; ++ch) {
    const float v = (wsum_y > 0 ? acc[ch] / wsum_y : 0.0f) * p.scale[ch] + p.shift[ch];
    const size_t at = image + (p.nhwc ? (static_cast<size_t>(y) * p.out_w + ox) * 3 + ch : ch * plane + static_cast<size_t>(y) * p.out_w + ox);
    if (p.type == 0) static_cast<float*>(batch)[at] = v;
    else if (p.type == 1) static_cast<__nv_bfloat16*>(batch)[at] = __float2bfloat16_rn(v);
    else static_cast<__half*>(batch)[at] = __float2half_rn(v);
  }
}

}  // namespace

int launch_gpu_augment(const GpuCrop* crops, int count, void* batch, const ImageBatchFormat& f, const float scale[3],
                       const float shift[3], void* stream) {
  if (count == 0) return cudaSuccess;
  Params p{};
  p.out_w = static_cast<int>(f.width);
  p.out_h = static_cast<int>(f.height);
  p.type = f.type == PixelType::f32 ? 0 : f.type == PixelType::bf16 ? 1 : 2;
  p.nhwc = f.layout == PixelLayout::nhwc;
  for (int c = 0; c < 3; ++c) {
    p.scale[c] = scale[c];
    p.shift[c] = shift[c];
  }
  const dim3 block(128);
  const dim3 grid((p.out_w + 127) / 128, p.out_h, count);
  augment<<<grid, block, 0, static_cast<cudaStream_t>(stream)>>>(crops, p, batch);
  return cudaGetLastError();
}

}  // namespace dlperf::data
