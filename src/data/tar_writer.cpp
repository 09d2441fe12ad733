#include "data/tar_writer.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace dlperf::data {

TarWriter::TarWriter(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
  if (!f_) throw_usage_error(path + ": cannot create (" + std::strerror(errno) + ")");
}

TarWriter::~TarWriter() {
  if (f_) std::fclose(f_);
}

void TarWriter::write(const void* p, size_t n) {
  if (n > 0 && std::fwrite(p, 1, n, f_) != n) throw Error(ErrorKind::library, path_ + ": write failed (" + std::strerror(errno) + ")");
}

void TarWriter::add(const std::string& name, std::span<const uint8_t> data) {
  DLPERF_ASSERT(name.size() <= 100 && data.size() < (1ull << 33), "ustar member name <= 100 bytes and size < 8 GiB");
  char h[512] = {};
  std::memcpy(h, name.data(), name.size());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(data.size()));
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = '0';
  std::memcpy(h + 257, "ustar", 6);  // "ustar\0" then version "00"
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, then the space already there
  h[155] = ' ';
  write(h, 512);
  write(data.data(), data.size());
  static const char zeros[512] = {};
  write(zeros, (512 - data.size() % 512) % 512);
}

void TarWriter::close() {
  static const char zeros[1024] = {};
  write(zeros, sizeof zeros);
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    throw Error(ErrorKind::library, path_ + ": close failed (" + std::strerror(errno) + ")");
  }
  f_ = nullptr;
}

}  // namespace dlperf::data
