// The crop decoder against libjpeg-turbo's own full decode (TurboJPEG tjDecompress2): a crop,
// with or without DCT downscaling, holds exactly the pixels of the full decode at that scale
// (4:4:4; with 4:2:0 the crop's left/right edge columns may differ, as libjpeg documents);
// greyscale and CMYK come out as RGB; corrupt data is a DecodeError, never a crash.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cmath>

#include "data/jpeg_decoder.h"
#include "data/synthetic_dataset.h"

namespace dlperf::data {
namespace {

std::vector<uint8_t> image(int w, int h) {
  SyntheticDatasetSpec s;
  s.width = w;
  s.height = h;
  return synthetic_image(s, 3, 7);
}

// TurboJPEG's full decode at scale 1/denom: (h, w, 3).
std::vector<uint8_t> full_decode(const std::vector<uint8_t>& jpeg, int denom, int& w, int& h, int pixel_format = TJPF_RGB) {
  tjhandle t = tjInitDecompress();
  int sub = 0, cs = 0;
  tjDecompressHeader3(t, jpeg.data(), jpeg.size(), &w, &h, &sub, &cs);
  w = (w + denom - 1) / denom;
  h = (h + denom - 1) / denom;
  std::vector<uint8_t> out(static_cast<size_t>(w * h * tjPixelSize[pixel_format]));
  EXPECT_EQ(tjDecompress2(t, jpeg.data(), jpeg.size(), out.data(), w, 0, h, pixel_format, 0), 0) << tjGetErrorStr2(t);
  tjDestroy(t);
  return out;
}

std::vector<uint8_t> encode(const std::vector<uint8_t>& rgb, int w, int h, int subsamp) {
  tjhandle t = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(t, rgb.data(), w, 0, h, TJPF_RGB, &buf, &size, subsamp, 92, 0), 0);
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  tjDestroy(t);
  return out;
}

// Compares the decoded region's crop columns [edge, w - edge) with the full decode.
void expect_crop_matches(const std::vector<uint8_t>& jpeg, const CropBox& crop, int min_size, int want_denom, int edge) {
  JpegDecoder d;
  const JpegHeader hd = d.read_header(jpeg.data(), jpeg.size());
  const DecodedRegion r = d.decode(crop, min_size, min_size);
  EXPECT_EQ(r.scale_denom, want_denom);
  int fw = 0, fh = 0;
  const auto full = full_decode(jpeg, r.scale_denom, fw, fh);
  ASSERT_EQ(fw, (hd.width + r.scale_denom - 1) / r.scale_denom);
  // The region starts at (crop_x0 - r.crop_x) in the full decode.
  const double sx = static_cast<double>(fw) / hd.width, sy = static_cast<double>(fh) / hd.height;
  const int x0 = static_cast<int>(std::lround(crop.x * sx - r.crop_x)), y0 = static_cast<int>(std::lround(crop.y * sy - r.crop_y));
  EXPECT_NEAR(r.crop_w, crop.w * sx, 1e-9);
  int mismatches = 0;
  for (int y = 0; y < r.height; ++y)
    for (int x = edge; x < r.width - edge; ++x)
      for (int c = 0; c < 3; ++c)
        mismatches += r.rgb[static_cast<size_t>(y) * r.stride + static_cast<size_t>(x * 3 + c)] !=
                      full[static_cast<size_t>(((y0 + y) * fw + x0 + x) * 3 + c)];
  EXPECT_EQ(mismatches, 0) << "crop " << crop.x << "," << crop.y << " " << crop.w << "x" << crop.h << " at 1/" << r.scale_denom;
}

TEST(JpegDecoder, CropEqualsFullDecodeAtEveryScale) {
  const auto rgb = image(500, 375);
  const auto j444 = encode(rgb, 500, 375, TJSAMP_444);
  expect_crop_matches(j444, {37, 21, 300, 250}, 224, 1, 0);    // no scaling: 300 / 2 < 224
  expect_crop_matches(j444, {0, 0, 500, 375}, 150, 2, 0);      // 1/2 keeps >= 150
  expect_crop_matches(j444, {101, 50, 350, 300}, 40, 4, 0);    // 1/4
  expect_crop_matches(j444, {8, 16, 480, 352}, 20, 8, 0);      // 1/8
  expect_crop_matches(j444, {400, 300, 100, 75}, 64, 1, 0);    // bottom-right corner
  const auto j420 = encode(rgb, 500, 375, TJSAMP_420);
  expect_crop_matches(j420, {37, 21, 300, 250}, 224, 1, 1);    // fancy upsampling: edge columns may differ
  expect_crop_matches(j420, {0, 0, 500, 375}, 100, 2, 1);
}

TEST(JpegDecoder, GreyscaleAndCmykBecomeRgb) {
  const auto rgb = image(64, 48);
  JpegDecoder d;
  const auto grey = encode_jpeg(rgb.data(), 64, 48, 95, JpegColor::grey);
  EXPECT_EQ(d.read_header(grey.data(), grey.size()).components, 1);
  DecodedRegion r = d.decode({0, 0, 64, 48}, 64, 48);
  int fw = 0, fh = 0;
  const auto g = full_decode(grey, 1, fw, fh, TJPF_GRAY);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(r.rgb[y * r.stride + static_cast<size_t>(x * 3 + c)], g[static_cast<size_t>(y * 64 + x)]);

  // CMYK (Adobe, inverted) of a smooth image, so chroma subsampling loses little: the RGB
  // decoded must be the RGB it was made from, within JPEG's error (an inversion or channel
  // mix-up would be off by ~100 levels).
  std::vector<uint8_t> smooth(64 * 48 * 3);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) {
      smooth[static_cast<size_t>((y * 64 + x) * 3)] = static_cast<uint8_t>(30 + 3 * x);
      smooth[static_cast<size_t>((y * 64 + x) * 3 + 1)] = static_cast<uint8_t>(200 - 3 * y);
      smooth[static_cast<size_t>((y * 64 + x) * 3 + 2)] = 90;
    }
  const auto cmyk = encode_jpeg(smooth.data(), 64, 48, 98, JpegColor::cmyk);
  EXPECT_EQ(d.read_header(cmyk.data(), cmyk.size()).components, 4);
  r = d.decode({0, 0, 64, 48}, 64, 48);
  double err = 0;
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x)
      for (int c = 0; c < 3; ++c)
        err += std::abs(r.rgb[y * r.stride + static_cast<size_t>(x * 3 + c)] - smooth[static_cast<size_t>((y * 64 + x) * 3 + c)]);
  EXPECT_LT(err / (64 * 48 * 3), 3.0) << "CMYK decoded far from the RGB it was made from";
}

TEST(JpegDecoder, CorruptDataIsADecodeErrorAndTheDecoderStaysUsable) {
  const auto rgb = image(96, 64);
  const auto good = encode(rgb, 96, 64, TJSAMP_420);
  JpegDecoder d;
  const auto expect_bad = [&](std::vector<uint8_t> bytes, const char* what) {
    try {
      d.read_header(bytes.data(), bytes.size());
      d.decode({0, 0, 96, 64}, 96, 64);
      ADD_FAILURE() << what << ": decoded without an error";
    } catch (const DecodeError& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
    }
    // The same decoder decodes a good image afterwards.
    d.read_header(good.data(), good.size());
    EXPECT_EQ(d.decode({0, 0, 96, 64}, 96, 64).width, 96) << "after " << what;
  };
  expect_bad({}, "empty");
  expect_bad({'n', 'o', 't', ' ', 'j', 'p', 'e', 'g'}, "text");
  expect_bad({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)}, "truncated");
  expect_bad({good.begin(), good.begin() + 200}, "truncated in the headers");
  auto garbled = good;
  for (size_t i = 20; i < 200 && i < garbled.size(); ++i) garbled[i] = static_cast<uint8_t>(i * 37);  // tables destroyed
  expect_bad(garbled, "garbled headers");
  // A frame header that claims more pixels than the data holds (its end-of-image marker intact):
  // libjpeg filled the missing rows with grey, a good sample; 65,000 x 65,000 took 12 GB.
  for (const int claimed : {640, 65000}) {
    auto inflated = good;
    for (size_t i = 2; i + 9 < inflated.size(); ++i)
      if (inflated[i] == 0xFF && inflated[i + 1] == 0xC0) {  // SOF0: length (2), precision (1), height (2), width (2)
        inflated[i + 5] = inflated[i + 7] = static_cast<uint8_t>(claimed >> 8);
        inflated[i + 6] = inflated[i + 8] = static_cast<uint8_t>(claimed & 0xFF);
        break;
      }
    try {
      const JpegHeader h = d.read_header(inflated.data(), inflated.size());
      EXPECT_EQ(h.width, claimed);
      d.decode({0, 0, claimed, claimed}, 224, 224);
      ADD_FAILURE() << claimed << " x " << claimed << " claimed by 96 x 64 pixels of data: decoded without an error";
    } catch (const DecodeError& e) {
      EXPECT_NE(std::string(e.what()).find("premature end of data segment"), std::string::npos) << e.what();
    }
    d.read_header(good.data(), good.size());
    EXPECT_EQ(d.decode({0, 0, 96, 64}, 96, 64).width, 96);
  }
}

}  // namespace
}  // namespace dlperf::data
