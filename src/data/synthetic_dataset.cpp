#include "data/synthetic_dataset.h"

#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "data/random.h"
#include "data/tar_writer.h"

namespace fs = std::filesystem;

namespace dlperf::data {
namespace {

constexpr int kMaxClasses = 100'000;           // class folders are n%08d
constexpr int64_t kMaxImages = 100'000'000;    // 800 MB of shuffle table

// Value noise: a coarse grid of random values, bilinearly interpolated to (h, w). As in
// photographs, most of the variation is in brightness (`luma`, the same in every channel) and
// less in colour (`chroma`, per channel).
void add_value_noise(std::vector<float>& img, int w, int h, int cells_x, float luma, float chroma, SplitMix& rng) {
  const int cells_y = std::max(1, cells_x * h / w);
  std::vector<float> grid(static_cast<size_t>((cells_x + 1) * (cells_y + 1) * 3));
  for (size_t i = 0; i < grid.size(); i += 3) {
    const auto l = static_cast<float>(rng.uniform() * 2.0 - 1.0) * luma;
    for (size_t c = 0; c < 3; ++c) grid[i + c] = l + static_cast<float>(rng.uniform() * 2.0 - 1.0) * chroma;
  }
  for (int y = 0; y < h; ++y) {
    const float gy = static_cast<float>(y) * cells_y / h;
    const int y0 = static_cast<int>(gy);
    const float fy = gy - y0;
    for (int x = 0; x < w; ++x) {
      const float gx = static_cast<float>(x) * cells_x / w;
      const int x0 = static_cast<int>(gx);
      const float fx = gx - x0;
      for (int c = 0; c < 3; ++c) {
        const auto at = [&](int yy, int xx) { return grid[static_cast<size_t>((yy * (cells_x + 1) + xx) * 3 + c)]; };
        const float top = at(y0, x0) * (1 - fx) + at(y0, x0 + 1) * fx;
        const float bottom = at(y0 + 1, x0) * (1 - fx) + at(y0 + 1, x0 + 1) * fx;
        img[static_cast<size_t>((y * w + x) * 3 + c)] += top * (1 - fy) + bottom * fy;
      }
    }
  }
}

std::string class_name(int c) {
  char b[16];
  std::snprintf(b, sizeof b, "n%08d", c);
  return b;
}

std::string stem(int c, int k) { return class_name(c) + "_" + std::to_string(k); }

// The folders and files of the dataset under `root` (which exists).
SyntheticDatasetSummary write_dataset_files(const fs::path& root, const SyntheticDatasetSpec& s);

}  // namespace

std::vector<uint8_t> synthetic_image(const SyntheticDatasetSpec& s, int cls, int index) {
  const int w = s.width, h = s.height;
  SplitMix rng(mix64(s.seed ^ mix64((static_cast<uint64_t>(cls) << 32) | static_cast<uint32_t>(index))));
  // The class's colour cast: a fixed hue per class (golden-angle steps around the colour wheel).
  const double hue = std::fmod(cls * 2.399963, 6.283185);
  const float cast[3] = {static_cast<float>(60 * std::cos(hue)), static_cast<float>(60 * std::cos(hue - 2.094395)),
                         static_cast<float>(60 * std::cos(hue + 2.094395))};
  std::vector<float> img(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < img.size(); ++i) img[i] = 128.0f + cast[i % 3];
  add_value_noise(img, w, h, 4, 50, 15, rng);  // large shapes and shading
  add_value_noise(img, w, h, 24, 20, 6, rng);  // mid-size structure
  // A few solid ellipses: sharp edges, as objects have.
  for (int e = 0; e < 6; ++e) {
    const double cx = rng.uniform() * w, cy = rng.uniform() * h, rx = 10 + rng.uniform() * w / 6, ry = 10 + rng.uniform() * h / 6;
    float col[3];
    for (float& v : col) v = static_cast<float>(rng.uniform() * 160 - 80);
    for (int y = std::max(0, static_cast<int>(cy - ry)); y < std::min(h, static_cast<int>(cy + ry) + 1); ++y)
      for (int x = std::max(0, static_cast<int>(cx - rx)); x < std::min(w, static_cast<int>(cx + rx) + 1); ++x) {
        const double dx = (x - cx) / rx, dy = (y - cy) / ry;
        if (dx * dx + dy * dy < 1)
          for (int c = 0; c < 3; ++c) img[static_cast<size_t>((y * w + x) * 3 + c)] += col[c];
      }
  }
  // Fine texture and noise (what makes photographs cost entropy-decoding time): a sum of two
  // uniforms per pixel, roughly triangular with sigma ~ 21 levels.
  std::vector<uint8_t> out(img.size());
  for (size_t i = 0; i < img.size(); ++i) {
    const uint64_t r = rng.next();
    const float noise = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF)) / 65535.0f * 52.0f - 52.0f;
    out[i] = static_cast<uint8_t>(std::clamp(img[i] + noise, 0.0f, 255.0f));
  }
  return out;
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality, JpegColor color) {
  tjhandle t = tjInitCompress();
  if (!t) throw Error(ErrorKind::library, std::string("tjInitCompress: ") + tjGetErrorStr2(nullptr));
  std::vector<uint8_t> cmyk;
  const uint8_t* src = rgb;
  int format = TJPF_RGB, subsamp = TJSAMP_420;
  if (color == JpegColor::grey) subsamp = TJSAMP_GRAY;
  if (color == JpegColor::cmyk) {
    // TurboJPEG stores the four values as given, with an Adobe marker; in Adobe's inverted
    // convention (255 = no ink), which decoders assume then, C = R, M = G, Y = B, K = 255 is
    // the same colour.
    cmyk.resize(static_cast<size_t>(width) * height * 4);
    for (size_t i = 0; i < static_cast<size_t>(width) * height; ++i) {
      cmyk[4 * i] = rgb[3 * i];
      cmyk[4 * i + 1] = rgb[3 * i + 1];
      cmyk[4 * i + 2] = rgb[3 * i + 2];
      cmyk[4 * i + 3] = 255;
    }
    src = cmyk.data();
    format = TJPF_CMYK;
  }
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(t, src, width, 0, height, format, &jpeg, &size, subsamp, quality, TJFLAG_ACCURATEDCT);
  std::vector<uint8_t> out;
  if (rc == 0) out.assign(jpeg, jpeg + size);
  const std::string why = rc == 0 ? "" : tjGetErrorStr2(t);
  tjFree(jpeg);
  tjDestroy(t);
  if (rc != 0) throw Error(ErrorKind::library, "tjCompress2: " + why);
  return out;
}

SyntheticDatasetSummary write_synthetic_dataset(const std::string& dir, const SyntheticDatasetSpec& s) {
  if (s.classes <= 0 || s.per_class <= 0) throw_usage_error("--classes and --images-per-class must be positive");
  // ImageNet-21k has 21,841 classes and 14 M images; far beyond that the shuffle table alone ran
  // out of memory (65,536 x 65,537 images: std::bad_alloc after the class folders were made).
  if (s.classes > kMaxClasses || static_cast<int64_t>(s.classes) * s.per_class > kMaxImages)
    throw_usage_error("--classes x --images-per-class must be at most " + std::to_string(kMaxClasses) + " classes and " +
                      std::to_string(kMaxImages) + " images (got " + std::to_string(s.classes) + " x " + std::to_string(s.per_class) + ")");
  if (s.width < 8 || s.height < 8 || s.width > 8192 || s.height > 8192) throw_usage_error("--width and --height must be in 8..8192");
  if (s.quality < 1 || s.quality > 100) throw_usage_error("--quality must be in 1..100");
  if (s.shard_size <= 0) throw_usage_error("--shard-size must be positive");
  if (!s.folder && !s.shards) throw_usage_error("--layout writes nothing");
  std::error_code ec;
  const fs::path root = dir;
  // Writing over an earlier dataset would keep its files beside the new ones (other classes,
  // more shards): a dataset no seed describes. The folders this writes must be new or empty.
  for (const auto& [sub, used] : {std::pair{"train", s.folder}, std::pair{"shards", s.shards}})
    if (used && fs::exists(root / sub, ec) && !fs::is_empty(root / sub, ec) && !ec)
      throw_usage_error((root / sub).string() + " already holds files (an earlier dataset?): remove it or choose another --output");
  const bool root_existed = fs::exists(root, ec);
  fs::create_directories(root, ec);
  if (ec) throw_usage_error(dir + ": cannot create the folder (" + ec.message() + ")");
  // A dataset that stops half-written (a full disk) is removed: its folders were new or empty,
  // and a part of it would train without a word (a class with no images is only a warning).
  try {
    return write_dataset_files(root, s);
  } catch (...) {
    std::error_code ignored;
    if (s.folder) fs::remove_all(root / "train", ignored);
    if (s.shards) fs::remove_all(root / "shards", ignored);
    if (!root_existed) fs::remove(root, ignored);  // only if empty
    throw;
  }
}

namespace {

SyntheticDatasetSummary write_dataset_files(const fs::path& root, const SyntheticDatasetSpec& s) {
  std::error_code ec;
  const std::string dir = root.string();
  if (s.folder)
    for (int c = 0; c < s.classes; ++c) {
      fs::create_directories(root / "train" / class_name(c), ec);
      if (ec) throw_usage_error(dir + ": cannot create class folders (" + ec.message() + ")");
    }
  if (s.shards) fs::create_directories(root / "shards", ec);

  // Every sample, in a seeded shuffled order: shards then mix the classes, as WebDataset's do.
  const int64_t n = static_cast<int64_t>(s.classes) * s.per_class;
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  SplitMix shuffle(mix64(s.seed + 0x1234567ull));
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[shuffle.below(static_cast<uint64_t>(i + 1))]);

  SyntheticDatasetSummary sum;
  std::vector<std::vector<uint8_t>> jpegs;
  for (int64_t first = 0, shard = 0; first < n; first += s.shard_size, ++shard) {
    const int64_t count = std::min<int64_t>(s.shard_size, n - first);
    jpegs.assign(static_cast<size_t>(count), {});
    std::atomic<int64_t> next{0};
    const auto encode = [&] {
      for (int64_t j; (j = next.fetch_add(1)) < count;) {
        const int64_t id = order[static_cast<size_t>(first + j)];
        const int c = static_cast<int>(id / s.per_class), k = static_cast<int>(id % s.per_class);
        const JpegColor color = s.cmyk_every > 0 && id % s.cmyk_every == s.cmyk_every - 1             ? JpegColor::cmyk
                                : s.greyscale_every > 0 && id % s.greyscale_every == s.greyscale_every - 1 ? JpegColor::grey
                                                                                                          : JpegColor::ycc420;
        const auto rgb = synthetic_image(s, c, k);
        jpegs[static_cast<size_t>(j)] = encode_jpeg(rgb.data(), s.width, s.height, s.quality, color);
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < std::max(1, s.threads); ++t) pool.emplace_back(encode);
    encode();
    for (auto& t : pool) t.join();

    std::unique_ptr<TarWriter> tar;
    if (s.shards) {
      char name[32];
      std::snprintf(name, sizeof name, "train-%06lld.tar", static_cast<long long>(shard));
      tar = std::make_unique<TarWriter>((root / "shards" / name).string());
    }
    for (int64_t j = 0; j < count; ++j) {
      const int64_t id = order[static_cast<size_t>(first + j)];
      const int c = static_cast<int>(id / s.per_class), k = static_cast<int>(id % s.per_class);
      const auto& jpeg = jpegs[static_cast<size_t>(j)];
      sum.bytes += static_cast<int64_t>(jpeg.size());
      if (s.folder) {
        const fs::path file = root / "train" / class_name(c) / (stem(c, k) + ".JPEG");
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
        if (!out) throw_usage_error(file.string() + ": cannot write");
      }
      if (tar) {
        tar->add(stem(c, k) + ".jpg", jpeg);
        const std::string label = std::to_string(c);
        tar->add(stem(c, k) + ".cls", {reinterpret_cast<const uint8_t*>(label.data()), label.size()});
      }
    }
    if (tar) tar->close();
  }
  sum.samples = n;
  if (s.folder) sum.written.push_back((root / "train").string());
  if (s.shards) sum.written.push_back((root / "shards").string());
  return sum;
}

}  // namespace

}  // namespace dlperf::data
