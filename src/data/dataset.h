// The index of an image dataset on disk, in one of the two layouts people have:
//   folder  ImageNet-style tree: ROOT/<class>/<image>.JPEG (ROOT = --data, or --data/train when
//           that exists). Class index = position of the folder in the sorted folder names, as
//           torchvision's ImageFolder numbers them (so labels match the standard ImageNet ones).
//   tar     WebDataset-style shards: <shard>.tar files (sorted by name) whose members come in
//           groups sharing a key: KEY.jpg (or .jpeg) and KEY.cls (the class index as text).
//           Packed shards spare a parallel file system millions of small-file opens.
// The index holds no per-sample strings (file names live in one pool), so ImageNet's 1.28 M
// samples take ~40 MB; it can be serialised so one rank builds it and broadcasts it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlperf::data {

using WarnFn = std::function<void(const std::string&)>;  // one line, no newline

enum class DatasetLayout : uint8_t { folder, tar };
const char* to_string(DatasetLayout l);

struct SampleRef {
  uint64_t offset = 0;  // tar: byte offset of the image data in its shard; folder: file name's offset in the name pool
  uint32_t size = 0;    // tar: image bytes; folder: 0 (the file's own size)
  uint32_t file = 0;    // tar: shard index; folder: class folder index
  int32_t label = 0;
};

// A sample that cannot be read: the reason, for the one warning line.
struct ReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Dataset {
 public:
  // `path`: a folder tree, a folder of *.tar shards, one .tar file, or a brace pattern
  // (shards/train-{000000..000146}.tar). Throws Error(usage), one line naming the path, when
  // it is missing, unreadable or holds no images. Empty class folders and shard members
  // without a label are reported through `warn` (the latter are counted in skipped()).
  static Dataset open(const std::string& path, const WarnFn& warn);
  static Dataset deserialize(std::span<const uint8_t> bytes);  // throws Error(usage) on damage
  std::vector<uint8_t> serialize() const;

  Dataset(Dataset&&) noexcept;
  Dataset& operator=(Dataset&&) noexcept;
  ~Dataset();

  DatasetLayout layout() const { return layout_; }
  const std::string& root() const { return root_; }
  size_t size() const { return samples_.size(); }
  int64_t num_classes() const { return num_classes_; }
  const SampleRef& sample(size_t i) const { return samples_[i]; }
  int64_t skipped() const { return skipped_; }
  size_t max_sample_bytes() const;  // the largest tar member; 0 for folder trees (sizes unknown until read)  // samples left out while indexing (unlabelled shard members)
  std::string describe(size_t i) const;          // the file, or shard.tar:member, for messages
  // What the dataset is, wherever it lies (16 hex digits): the same for a copy staged under
  // another path, different for other contents. It hashes the index (layout, class folder and
  // file names, shard names, members' offsets, sizes and labels) and, since a folder tree's
  // index holds no sizes, the sizes of 16 images spread over it (a resized copy keeps the names).
  std::string fingerprint() const;

  // Reads sample i's bytes into buf (grown when needed; capacity is kept, so a reused buffer
  // stops allocating). path is scratch for the file name, likewise reused. Thread-safe
  // (pread). Throws ReadError.
  size_t read(size_t i, std::vector<uint8_t>& buf, std::string& path) const;

 private:
  Dataset() = default;
  void open_shards();  // keeps one descriptor per shard open for the loader's preads

  DatasetLayout layout_ = DatasetLayout::folder;
  std::string root_;
  std::vector<std::string> files_;  // folder: class folder names (relative to root); tar: shard paths
  std::string names_;               // folder: image file names, each ended by '\0'
  std::vector<SampleRef> samples_;
  int64_t num_classes_ = 0;
  int64_t skipped_ = 0;
  std::vector<int> fds_;  // tar: one per shard
};

// Expands one {first..last} range of zero-padded decimals: a{01..03}b -> a01b a02b a03b.
// A pattern without braces is returned as is. Throws Error(usage) on a malformed range.
std::vector<std::string> expand_braces(const std::string& pattern);

// Indexes one tar shard: appends its samples (file = shard) and returns how many groups had
// an image but no readable .cls label (reported through warn).
int64_t index_tar_shard(const std::string& path, uint32_t shard, std::vector<SampleRef>& out, const WarnFn& warn);

}  // namespace dlperf::data
