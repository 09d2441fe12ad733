// BERT pretraining batches: synthetic token sequences (the default), or NVIDIA's pretraining
// shards (DeepLearningExamples' create_pretraining_data.py HDF5 layout) read with the HDF5 C API.
//
// Shard layout, per file (N samples, S = --seq-len, P = --max-predictions), any integer type:
//   input_ids, input_mask, segment_ids        (N, S)
//   masked_lm_positions, masked_lm_ids        (N, P)   position 0: an empty slot
//   next_sentence_labels                      (N) (or (N, 1))
// A missing dataset, a wrong shape, a truncated or unreadable file is a one-line usage error
// naming the file (and the dataset and the expected shape); every file is checked at start.
#pragma once

#include <string>
#include <vector>

#include "train/feed/synthetic_data.h"

namespace dlperf {

// Ids 0..4 are [PAD], [UNK], [CLS], [SEP] and [MASK] (the reduced vocabulary's, as BERT's
// own vocabulary starts with its special tokens); words are the ids from here on.
inline constexpr int32_t kBertFirstWord = 5;

struct BertDataShape {
  int64_t batch = 16, seq_len = 128, max_predictions = 20, vocab = 30522;
};

// A learnable synthetic task: each sequence is an arithmetic progression of token ids
// (start + step * t mod V, above the 5 reserved ids) whose second segment, for next-sentence
// label 1, continues with another step. About 15% of the tokens (at most P) are replaced by
// [MASK] (id 4), with the original token as the label: a masked token is a function of its
// neighbours. Sequence lengths vary, so padding and empty prediction slots occur. A few
// batches are generated up front and cycled, as SyntheticImages does.
class SyntheticTokens final : public DataSource {
 public:
  SyntheticTokens(const BertDataShape& shape, uint64_t seed, int pool = 4);
  const HostBatch& next() override;

 private:
  std::vector<HostBatch> pool_;
  size_t cursor_ = 0;
};

// Pretraining shards: `path` is one .hdf5/.h5 file or a directory of them (sorted by name; a
// file reached through several links is read once, with a warning). The files' samples, in
// order and cycling, are cut into batches dealt out to the ranks in turn: rank r reads batches
// r, r + world, r + 2 world, ..., so the replicas read disjoint samples (an epoch is shared, not
// read by every rank). Fewer samples than world x batch are refused. Every file's metadata is
// checked at start; its values when it is first read.
class BertShards final : public DataSource {
 public:
  BertShards(const std::string& path, const BertDataShape& shape, int rank, int world = 1);
  const HostBatch& next() override;
  const std::vector<std::string>& files() const { return files_; }
  std::string fingerprint() const override { return fingerprint_; }  // the shards' names, samples and sizes

 private:
  // Validates one file and reads it whole into memory (or only checks it); its sample count.
  int64_t load_file(size_t index, bool read = true);
  BertDataShape shape_;
  std::vector<std::string> files_;
  std::string fingerprint_;
  size_t file_ = 0;                  // the file in memory
  std::vector<int64_t> first_;       // first_[i]: the global index of file i's first sample; back(): all
  int64_t position_ = 0;             // the global index of this rank's next sample
  int64_t skip_ = 0;                 // samples of the other ranks' batches after each of this rank's
  std::vector<int32_t> ids_, mask_, segments_, positions_, lm_ids_, nsp_;  // current file
  HostBatch batch_;
};

}  // namespace dlperf
