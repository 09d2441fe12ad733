// Writes POSIX ustar archives: the WebDataset shards of dlperf-make-dataset (and test data).
// Deterministic bytes: fixed mode, owner and time, so one seed gives one file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace dlperf::data {

class TarWriter {
 public:
  explicit TarWriter(const std::string& path);  // throws Error(usage) when it cannot be created
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  // One regular file; name at most 100 bytes.
  void add(const std::string& name, std::span<const uint8_t> data);
  void close();  // the two zero blocks that end an archive; throws on a write error

 private:
  void write(const void* p, size_t n);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace dlperf::data
