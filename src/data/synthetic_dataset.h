// A deterministic synthetic JPEG dataset for tests, the quickstart and the loader benchmark,
// when ImageNet is not at hand: `classes` x `per_class` images of width x height, real JPEG
// encoding (libjpeg-turbo's TurboJPEG, 4:2:0, the given quality), written in both layouts
// the loader reads:
//   DIR/train/n%08d/n%08d_%d.JPEG                       ImageNet-style folder tree
//   DIR/shards/train-%06d.tar  (KEY.jpg + KEY.cls)       WebDataset-style shards
// The content is ImageNet-like for the decoder (smooth structure, edges, texture and sensor-
// like noise, ~100 KB at 500x375 and quality 90) and learnable: each class has its own
// colour cast, which survives cropping and flipping. One seed always gives the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlperf::data {

struct SyntheticDatasetSpec {
  int classes = 10;
  int per_class = 100;
  int width = 500, height = 375;
  int quality = 90;
  uint64_t seed = 1;
  bool folder = true, shards = true;  // which layouts to write
  int shard_size = 1000;              // samples per tar shard
  int greyscale_every = 0;            // every k-th sample a greyscale JPEG (0: none)
  int cmyk_every = 0;                 // every k-th sample an (Adobe, inverted) CMYK JPEG (0: none)
  int threads = 1;                    // encoding threads
};

struct SyntheticDatasetSummary {
  int64_t samples = 0, bytes = 0;  // bytes: JPEG data of one layout
  std::vector<std::string> written;  // the folder tree and shard folder, as written
};

// Writes the dataset under `dir` (created; existing files of the same names are replaced).
// Throws Error(usage) on a bad spec or an unwritable directory.
SyntheticDatasetSummary write_synthetic_dataset(const std::string& dir, const SyntheticDatasetSpec& spec);

// One image of the dataset, RGB (height, width, 3): for tests that need pixels, not files.
std::vector<uint8_t> synthetic_image(const SyntheticDatasetSpec& spec, int cls, int index);

// JPEG-encodes an RGB image (TurboJPEG): subsampling 4:2:0, or greyscale, or CMYK.
enum class JpegColor : uint8_t { ycc420, grey, cmyk };
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality, JpegColor color);

}  // namespace dlperf::data
