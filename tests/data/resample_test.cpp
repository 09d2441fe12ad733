// The resampler against PIL: crop + resize(BILINEAR) of a fixed image (tests/golden/
// make_resize_fixture.py wrote the reference); and its stores: every type and layout holds
// the same image, flip mirrors it, normalisation is (v / 255 - mean) / std.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "data/resample.h"

namespace dlperf::data {
namespace {

constexpr int kW = 40, kH = 30;

int pixel(int x, int y, int c) { return (x * 6 + y * 5 + c * 40 + ((x / 7 + y / 5) % 2 ? 60 : 0)) % 256; }

std::vector<uint8_t> test_image() {
  std::vector<uint8_t> img(static_cast<size_t>(kW * kH * 3));
  for (int y = 0; y < kH; ++y)
    for (int x = 0; x < kW; ++x)
      for (int c = 0; c < 3; ++c) img[static_cast<size_t>((y * kW + x) * 3 + c)] = static_cast<uint8_t>(pixel(x, y, c));
  return img;
}

DecodedRegion region(const std::vector<uint8_t>& img, double x, double y, double w, double h) {
  DecodedRegion r;
  r.rgb = img.data();
  r.width = kW;
  r.height = kH;
  r.stride = kW * 3;
  r.crop_x = x;
  r.crop_y = y;
  r.crop_w = w;
  r.crop_h = h;
  return r;
}

Normalization identity() {
  Normalization n;
  n.scale = {1, 1, 1};
  n.shift = {0, 0, 0};
  return n;
}

TEST(Resample, MatchesPilBilinearCropResize) {
  std::ifstream in(std::string(DLPERF_GOLDEN_DIR) + "/resize_bilinear.txt");
  ASSERT_TRUE(in) << "missing fixture; run tests/golden/make_resize_fixture.py";
  const auto img = test_image();
  Resampler rs;
  int cases = 0;
  for (int x, y, w, h, ow, oh; in >> x >> y >> w >> h >> ow >> oh; ++cases) {
    ImageBatchFormat f;
    f.batch = 1;
    f.width = ow;
    f.height = oh;
    f.type = PixelType::f32;
    f.layout = PixelLayout::nhwc;
    std::vector<float> out(static_cast<size_t>(f.image_elems()));
    rs.run(region(img, x, y, w, h), false, f, identity(), out.data());
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      int want = 0;
      in >> want;
      worst = std::max(worst, static_cast<double>(std::abs(out[i] - static_cast<float>(want))));
    }
    // PIL computes in fixed point and rounds to 8 bits: within one level of the exact value.
    EXPECT_LE(worst, 1.0) << "crop " << x << "," << y << " " << w << "x" << h << " -> " << ow << "x" << oh;
  }
  EXPECT_EQ(cases, 4);
}

TEST(Resample, TypesLayoutsFlipAndNormalisationAgree) {
  const auto img = test_image();
  Resampler rs;
  const Normalization norm = imagenet_normalization();
  ImageBatchFormat f;
  f.batch = 1;
  f.width = 12;
  f.height = 9;
  const auto crop = region(img, 4.5, 3.25, 30, 22);
  std::vector<float> ref(static_cast<size_t>(f.image_elems())), flipped(ref.size());
  f.type = PixelType::f32;
  f.layout = PixelLayout::nchw;
  rs.run(crop, false, f, norm, ref.data());
  rs.run(crop, true, f, norm, flipped.data());
  const auto at = [&](const std::vector<float>& v, int c, int y, int x) { return v[static_cast<size_t>((c * 9 + y) * 12 + x)]; };
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 9; ++y)
      for (int x = 0; x < 12; ++x) EXPECT_EQ(at(flipped, c, y, x), at(ref, c, y, 11 - x));
  // Normalised range: (0 - mean) / std .. (1 - mean) / std.
  for (float v : ref) EXPECT_TRUE(v >= -2.2f && v <= 2.7f) << v;

  for (PixelType t : {PixelType::f32, PixelType::bf16, PixelType::f16}) {
    f.type = t;
    f.layout = PixelLayout::nhwc;
    std::vector<uint8_t> raw(f.image_bytes());
    rs.run(crop, false, f, norm, raw.data());
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 9; ++y)
        for (int x = 0; x < 12; ++x) {
          const size_t i = static_cast<size_t>((y * 12 + x) * 3 + c);
          uint16_t h16 = 0;
          if (t != PixelType::f32) std::memcpy(&h16, raw.data() + 2 * i, 2);
          float v = 0;
          if (t == PixelType::f32) std::memcpy(&v, raw.data() + 4 * i, 4);
          else v = t == PixelType::bf16 ? from_bf16(h16) : from_f16(h16);
          const float tol = t == PixelType::f32 ? 0.0f : t == PixelType::bf16 ? 0.0079f * 3 : 0.001f * 3;
          EXPECT_NEAR(v, at(ref, c, y, x), tol) << to_string(t) << " at " << c << "," << y << "," << x;
        }
  }
}

TEST(Resample, ConstantImageGivesTheNormalisedConstant) {
  std::vector<uint8_t> img(static_cast<size_t>(kW * kH * 3));
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(i % 3 == 0 ? 200 : i % 3 == 1 ? 100 : 0);
  Resampler rs;
  ImageBatchFormat f;
  f.batch = 1;
  f.width = f.height = 17;
  std::vector<float> out(static_cast<size_t>(f.image_elems()));
  rs.run(region(img, 1.7, 2.2, 33.1, 25.3), true, f, imagenet_normalization(), out.data());
  const float want[3] = {(200 / 255.0f - 0.485f) / 0.229f, (100 / 255.0f - 0.456f) / 0.224f, (0 - 0.406f) / 0.225f};
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i / (17 * 17)], 1e-5f);
}

TEST(PixelConversion, HalfAndBfloatRoundToNearestEven) {
  EXPECT_EQ(to_f16(1.0f), 0x3C00);
  EXPECT_EQ(to_f16(-2.0f), 0xC000);
  EXPECT_EQ(to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(to_f16(65520.0f), 0x7C00);         // rounds to infinity
  EXPECT_EQ(to_f16(1.0f + 1.0f / 2048), 0x3C00);  // tie: to even
  EXPECT_EQ(to_f16(1.0f + 3.0f / 2048), 0x3C02);  // tie: to even (up)
  EXPECT_EQ(to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(to_bf16(1.0f + 1.0f / 256), 0x3F80);  // tie: to even
  for (float v = -3.0f; v < 3.0f; v += 0.01f) {
    EXPECT_NEAR(from_f16(to_f16(v)), v, std::abs(v) / 2048 + 1e-7f);
    EXPECT_NEAR(from_bf16(to_bf16(v)), v, std::abs(v) / 256 + 1e-7f);
  }
}

}  // namespace
}  // namespace dlperf::data
