// Megatron-LM / NeMo indexed datasets (megatron/core/datasets/indexed_dataset.py, the "mmap"
// format MLPerf's Llama 3.1 reference data for C4 comes in): PREFIX.bin holds every sequence's
// token ids back to back; PREFIX.idx describes them, all little-endian:
//   magic "MMIDIDX\0\0" (9 bytes), version u64 = 1, dtype code u8,
//   sequence count S u64, document count D u64 (D = documents + 1),
//   sequence lengths i32 (S), sequence byte offsets into .bin i64 (S),
//   document indices i64 (D): the first sequence of each document, 0 first, S last,
//   [sequence modes i8 (S): multimodal datasets only; ignored].
// Dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16;
// token ids must be an integer type.
//
// Both files are memory-mapped read-only and checked when opened: sizes, magic, version,
// dtype, counts, offsets consistent with the lengths and the .bin size, document indices, and
// (one pass over the tokens) every id inside the vocabulary. Any fault is a usage error naming
// the file and the fault. A file cut short or unreadable while mapped (SIGBUS on a read) ends
// the process with one line naming it, exit 3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlperf::data {

class IndexedDataset {
 public:
  // vocab > 0: token ids must lie in [0, vocab).
  IndexedDataset(const std::string& prefix, int64_t vocab);

  int64_t tokens() const { return tokens_; }        // all sequences concatenated in order
  int64_t sequences() const { return sequences_; }
  int64_t documents() const { return documents_; }
  int dtype_code() const { return dtype_; }
  // Token i of the concatenation (documents back to back, as Megatron's GPT dataset reads them).
  int64_t token(int64_t i) const;

 private:
  // A read-only mapping of one whole file, unmapped on destruction.
  struct Mapping {
    Mapping() = default;
    explicit Mapping(const std::string& path);
    ~Mapping();
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    void* data = nullptr;
    size_t bytes = 0;
    void* guard = nullptr;  // the SIGBUS guard's entry (a file cut short or unreadable while mapped: one line, exit 3)
  };
  void check_index(const std::string& idx);
  void check_tokens(const std::string& bin, int64_t vocab) const;

  Mapping idx_, bin_;
  int dtype_ = 0;
  size_t item_ = 0;
  int64_t sequences_ = 0, documents_ = 0, tokens_ = 0;
};

// Writes PREFIX.bin and PREFIX.idx (dtype code 8, uint16, when every id < 65,536; else 4, int32),
// one sequence per document, as Megatron's IndexedDatasetBuilder does.
void write_indexed_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& documents);

}  // namespace dlperf::data
