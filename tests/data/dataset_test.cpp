// Dataset layouts, the epoch order across ranks, and RandomResizedCrop's parameters:
//  * the folder tree and the tar shards of one generated dataset index the same samples
//    (same labels, same bytes), whatever the shard size;
//  * brace patterns, missing and empty datasets (one-line usage errors), unlabelled members;
//  * ranks' shares of an epoch are disjoint, cover all but N mod world, change every epoch;
//  * crops stay inside the image and follow torchvision's ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/random_resized_crop.h"
#include "data/sampler.h"
#include "data/synthetic_dataset.h"
#include "data/tar_writer.h"

namespace fs = std::filesystem;

namespace dlperf::data {
namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("dlperf_dataset_test_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// Bytes (as a string: GCC 12 warns falsely on comparing vectors of bytes) -> label.
std::map<std::string, int32_t> contents(const Dataset& d) {
  std::map<std::string, int32_t> out;
  std::vector<uint8_t> buf;
  std::string scratch;
  for (size_t i = 0; i < d.size(); ++i) {
    const size_t n = d.read(i, buf, scratch);
    out[std::string(reinterpret_cast<const char*>(buf.data()), n)] = d.sample(i).label;
  }
  return out;
}

// 3 classes x 7 images of 40x30: 21 samples over 5 shards, the last one short.
SyntheticDatasetSpec small_spec() {
  SyntheticDatasetSpec s;
  s.classes = 3;
  s.per_class = 7;
  s.width = 40;
  s.height = 30;
  s.shard_size = 5;
  return s;
}

TEST(Dataset, FolderTreeAndShardsHoldTheSameSamples) {
  TempDir t;
  const SyntheticDatasetSpec s = small_spec();
  write_synthetic_dataset(t.path.string(), s);
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& m) { warnings.push_back(m); };
  const Dataset folder = Dataset::open(t.path.string(), warn);  // finds train/
  const Dataset tar = Dataset::open((t.path / "shards").string(), warn);
  EXPECT_EQ(folder.layout(), DatasetLayout::folder);
  EXPECT_EQ(tar.layout(), DatasetLayout::tar);
  EXPECT_EQ(folder.size(), 21u);
  EXPECT_EQ(folder.num_classes(), 3);
  EXPECT_EQ(tar.num_classes(), 3);
  EXPECT_EQ(contents(folder), contents(tar));
  EXPECT_TRUE(warnings.empty());
  // A brace pattern naming two of the shards; one shard file.
  const Dataset two = Dataset::open((t.path / "shards" / "train-{000001..000002}.tar").string(), warn);
  EXPECT_EQ(two.size(), 10u);
  EXPECT_EQ(Dataset::open((t.path / "shards" / "train-000004.tar").string(), warn).size(), 1u);
  // The index survives serialisation (one rank indexes, the others read it).
  const Dataset copy = Dataset::deserialize(tar.serialize());
  EXPECT_EQ(contents(copy), contents(tar));
  EXPECT_EQ(copy.describe(3), tar.describe(3));
  // Same seed, same bytes.
  TempDir again;
  again.path += "_b";
  fs::create_directories(again.path);
  write_synthetic_dataset(again.path.string(), s);
  EXPECT_EQ(contents(Dataset::open(again.path.string(), warn)), contents(folder));
  fs::remove_all(again.path);
}

// A copy staged under another path is the same dataset (dlperf-reduce pools its runs); the same
// names with other bytes (a resized copy) or another layout are not.
TEST(Dataset, FingerprintFollowsTheContentsNotThePath) {
  TempDir t;
  SyntheticDatasetSpec s = small_spec();
  const fs::path original = t.path / "original", staged = t.path / "staged" / "job_17", resized = t.path / "resized";
  write_synthetic_dataset(original.string(), s);
  fs::create_directories(staged);
  fs::copy(original, staged, fs::copy_options::recursive);
  s.width = 64;
  s.height = 48;
  write_synthetic_dataset(resized.string(), s);
  const auto print = [](const fs::path& p) { return Dataset::open(p.string(), nullptr).fingerprint(); };
  const std::string folder = print(original);
  EXPECT_EQ(folder.size(), 16u);
  EXPECT_EQ(print(staged), folder);
  EXPECT_EQ(print(staged / "shards"), print(original / "shards"));
  EXPECT_NE(print(original / "shards"), folder);
  EXPECT_NE(print(resized), folder);
  EXPECT_NE(print(resized / "shards"), print(original / "shards"));
  EXPECT_NE(print(original / "shards" / "train-{000000..000002}.tar"), print(original / "shards"));
  const Dataset tar = Dataset::open((original / "shards").string(), nullptr);
  EXPECT_EQ(Dataset::deserialize(tar.serialize()).fingerprint(), tar.fingerprint());
}

TEST(Dataset, BadDatasetsAreOneLineUsageErrors) {
  TempDir t;
  const auto expect_usage = [](const std::string& path, const std::string& needle) {
    try {
      Dataset::open(path, nullptr);
      ADD_FAILURE() << path << " opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      const std::string m = e.what();
      EXPECT_NE(m.find(needle), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  };
  expect_usage((t.path / "missing").string(), "no such file");
  expect_usage(t.path.string(), "no images found");
  fs::create_directories(t.path / "a");
  fs::create_directories(t.path / "b");
  expect_usage(t.path.string(), "no images found");  // empty class folders only
  {
    std::ofstream(t.path / "junk.tar") << "this is not a tar file, but it has a .tar name and some length to it......";
  }
  expect_usage(t.path.string(), "not a readable tar shard");
  expect_usage((t.path / "x{1..}.tar").string(), "increasing");
  // A typo'd range is refused before ten million names are made; a FIFO named like a shard is
  // refused at once (opening it blocked for ever).
  expect_usage((t.path / "x{0..9999999}.tar").string(), "names 10000000 shards, more than 1000000");
  expect_usage((t.path / "x{0..999}-{0..9999}.tar").string(), "names 10000000 shards");
  fs::remove(t.path / "junk.tar");
  ASSERT_EQ(::mkfifo((t.path / "fifo.tar").c_str(), 0600), 0);
  expect_usage(t.path.string(), "fifo.tar: not a regular file");
  expect_usage((t.path / "fifo.tar").string(), "fifo.tar: not a regular file");
}

// A shard cut short (an interrupted copy) lost every sample after the cut silently, or named one
// as unlabelled: refused. One that ends on a member boundary without its end blocks is kept, noted.
TEST(Dataset, ATruncatedShardIsRefusedAndOneWithoutEndBlocksNoted) {
  TempDir t;
  const std::vector<uint8_t> img = encode_jpeg(std::vector<uint8_t>(16 * 16 * 3, 90).data(), 16, 16, 90, JpegColor::ycc420);
  const auto pad = [](size_t n) { return (n + 511) / 512 * 512; };
  const auto shard = [&](const std::string& dir, uintmax_t cut) {
    fs::create_directories(t.path / dir);
    const fs::path p = t.path / dir / "s.tar";
    {
      TarWriter w(p.string());
      for (const char* k : {"k1", "k2"}) {
        w.add(std::string(k) + ".jpg", img);
        w.add(std::string(k) + ".cls", std::vector<uint8_t>{'1', '\n'});
      }
      w.close();
    }
    fs::resize_file(p, cut);
    return (t.path / dir).string();
  };
  const size_t whole = 4 * 512 + 2 * pad(img.size()) + 2 * pad(2);  // every member, no end blocks
  for (const uintmax_t cut : {whole - 512 - 1, whole - pad(2) - 512 + 100, uintmax_t{512 + 100}}) {
    try {
      Dataset::open(shard("cut" + std::to_string(cut), cut), nullptr);
      ADD_FAILURE() << "a shard cut at byte " << cut << " opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      EXPECT_NE(std::string(e.what()).find("s.tar: truncated: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("the file has " + std::to_string(cut)), std::string::npos) << e.what();
    }
  }
  std::vector<std::string> warnings;
  const Dataset d = Dataset::open(shard("whole", whole), [&](const std::string& m) { warnings.push_back(m); });
  EXPECT_EQ(d.size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("has no end-of-archive blocks after its 4 members"), std::string::npos) << warnings[0];
}

TEST(Dataset, BracePatternsExpandInOrder) {
  EXPECT_EQ(expand_braces("s-{08..10}-{1..2}.tar"),
            (std::vector<std::string>{"s-08-1.tar", "s-08-2.tar", "s-09-1.tar", "s-09-2.tar", "s-10-1.tar", "s-10-2.tar"}));
  EXPECT_EQ(expand_braces("plain.tar"), std::vector<std::string>{"plain.tar"});
}

// A link to a folder above listed its images dozens of times (8 images became 328), and one into
// another class filed that class's images twice, each without a word.
TEST(Dataset, LinkedFoldersAndImagesAreListedOnce) {
  TempDir t;
  const std::vector<uint8_t> img = encode_jpeg(std::vector<uint8_t>(16 * 16 * 3, 90).data(), 16, 16, 90, JpegColor::ycc420);
  for (const char* c : {"a", "b"}) {
    fs::create_directories(t.path / "tree" / c);
    for (const char* n : {"1.jpg", "2.jpg"})
      std::ofstream(t.path / "tree" / c / n, std::ios::binary).write(reinterpret_cast<const char*>(img.data()), static_cast<long>(img.size()));
  }
  fs::create_directory_symlink("..", t.path / "tree" / "a" / "loop");     // the root again, and a and b below it
  fs::create_directory_symlink("../b", t.path / "tree" / "a" / "other");  // class b's images under class a
  fs::create_symlink("1.jpg", t.path / "tree" / "b" / "again.jpg");       // one image under two names
  std::vector<std::string> warnings;
  const Dataset d = Dataset::open((t.path / "tree").string(), [&](const std::string& m) { warnings.push_back(m); });
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.num_classes(), 2);
  std::map<int32_t, int> per_class;
  for (size_t i = 0; i < d.size(); ++i) ++per_class[d.sample(i).label];
  EXPECT_EQ(per_class[0], 2);
  EXPECT_EQ(per_class[1], 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("listed each image once: 3 link(s) under"), std::string::npos) << warnings[0];
}

TEST(Dataset, EmptyClassFoldersKeepTheirIndexAndUnlabelledMembersAreSkipped) {
  TempDir t;
  const std::vector<uint8_t> img = encode_jpeg(std::vector<uint8_t>(16 * 16 * 3, 90).data(), 16, 16, 90, JpegColor::ycc420);
  fs::create_directories(t.path / "tree" / "a");
  fs::create_directories(t.path / "tree" / "b");  // empty: class 1 stays, so c is class 2
  fs::create_directories(t.path / "tree" / "c");
  std::ofstream(t.path / "tree" / "a" / "x.JPEG", std::ios::binary).write(reinterpret_cast<const char*>(img.data()), 100);
  std::ofstream(t.path / "tree" / "c" / "y.jpg", std::ios::binary).write(reinterpret_cast<const char*>(img.data()), 100);
  std::ofstream(t.path / "tree" / "c" / "notes.txt") << "ignored";
  ASSERT_EQ(::mkfifo((t.path / "tree" / "c" / "z.jpg").c_str(), 0600), 0);  // would block its reader
  std::vector<std::string> warnings;
  const Dataset d = Dataset::open((t.path / "tree").string(), [&](const std::string& m) { warnings.push_back(m); });
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.num_classes(), 3);
  EXPECT_EQ(d.sample(1).label, 2);
  ASSERT_EQ(warnings.size(), 3u);  // the empty folder; the ignored file; the FIFO
  EXPECT_NE(warnings[0].find("/b has no"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[2].find("ignored 1 entries under"), std::string::npos) << warnings[2];
  EXPECT_NE(warnings[2].find("not regular files"), std::string::npos) << warnings[2];

  fs::create_directories(t.path / "shards");
  {
    TarWriter w((t.path / "shards" / "s.tar").string());
    w.add("dir/k1.jpg", img);
    w.add("dir/k1.cls", std::vector<uint8_t>{'4', '\n'});
    w.add("dir/k2.jpg", img);  // no label
    w.add("k3.seg.jpg", img);  // key "k3" (up to the first dot), extension "seg.jpg": not an image
    w.add("k4.jpeg", img);
    w.add("k4.cls", std::vector<uint8_t>{'x'});  // unreadable label
    w.close();
  }
  warnings.clear();
  const Dataset s = Dataset::open((t.path / "shards").string(), [&](const std::string& m) { warnings.push_back(m); });
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s.sample(0).label, 4);
  EXPECT_EQ(s.num_classes(), 5);
  EXPECT_EQ(s.skipped(), 2);
  EXPECT_EQ(warnings.size(), 2u);
  EXPECT_NE(s.describe(0).find("s.tar:dir/k1.jpg"), std::string::npos) << s.describe(0);
}

TEST(ShardedOrder, RanksReadDisjointSharesReshuffledEveryEpoch) {
  const uint64_t n = 103;
  for (int world : {1, 2, 3, 4}) {
    std::vector<std::set<uint32_t>> epoch0(static_cast<size_t>(world));
    std::vector<std::vector<uint32_t>> order0(static_cast<size_t>(world)), order1(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      ShardedOrder o(n, world, r, 42);
      EXPECT_EQ(o.per_rank(), n / static_cast<uint64_t>(world));
      for (uint64_t p = 0; p < o.per_rank(); ++p) order0[static_cast<size_t>(r)].push_back(o.at(p));
      for (uint64_t p = o.per_rank(); p < 2 * o.per_rank(); ++p) order1[static_cast<size_t>(r)].push_back(o.at(p));
      epoch0[static_cast<size_t>(r)] = {order0[static_cast<size_t>(r)].begin(), order0[static_cast<size_t>(r)].end()};
      EXPECT_EQ(epoch0[static_cast<size_t>(r)].size(), o.per_rank()) << "a sample twice in one rank's share";
      EXPECT_NE(order0[static_cast<size_t>(r)], order1[static_cast<size_t>(r)]) << "epoch 1 repeats epoch 0";
      ShardedOrder again(n, world, r, 42);
      EXPECT_EQ(again.at(5), order0[static_cast<size_t>(r)][5]) << "not deterministic";
    }
    std::set<uint32_t> all;
    for (const auto& s : epoch0) all.insert(s.begin(), s.end());
    EXPECT_EQ(all.size(), (n / static_cast<uint64_t>(world)) * static_cast<uint64_t>(world)) << "shares overlap (world " << world << ")";
  }
  EXPECT_THROW(ShardedOrder(3, 4, 0, 1), Error);  // fewer samples than ranks
}

TEST(RandomResizedCrop, InsideTheImageWithTorchvisionRanges) {
  SplitMix rng(9);
  const CropRange r;
  double area_sum = 0;
  int n = 0;
  for (int i = 0; i < 20000; ++i) {
    const int w = 40 + static_cast<int>(rng.below(600)), h = 40 + static_cast<int>(rng.below(600));
    const CropBox c = random_resized_crop(w, h, r, rng);
    ASSERT_TRUE(c.x >= 0 && c.y >= 0 && c.w > 0 && c.h > 0 && c.x + c.w <= w && c.y + c.h <= h);
    const double frac = static_cast<double>(c.w) * c.h / (static_cast<double>(w) * h);
    EXPECT_GE(frac, 0.06);  // 0.08 less rounding of small images
  }
  // On 500x375 images the mean area fraction is 0.433 (torchvision's get_params simulated
  // with Python's random, 10^6 draws): large draws often miss the image and are redrawn.
  for (int i = 0; i < 20000; ++i, ++n) {
    const CropBox c = random_resized_crop(500, 375, r, rng);
    area_sum += static_cast<double>(c.w) * c.h / (500.0 * 375.0);
  }
  EXPECT_NEAR(area_sum / n, 0.433, 0.012);
  // A very wide image: the fallback is a centre crop at the ratio limit.
  SplitMix one(1);
  const CropBox c = random_resized_crop(1000, 10, {1.0, 1.0, 0.75, 4.0 / 3}, one);
  EXPECT_EQ(c.h, 10);
  EXPECT_EQ(c.w, 13);
  EXPECT_EQ(c.x, (1000 - 13) / 2);
}

}  // namespace
}  // namespace dlperf::data
