// Megatron/NeMo indexed datasets (see indexed_dataset.h).
#include "data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace dlperf::data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr size_t kHeader = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, S, D

size_t item_size(int code) {
  switch (code) {
    case 1:
    case 2: return 1;
    case 3:
    case 8: return 2;
    case 4: return 4;
    case 5: return 8;
    default: return 0;  // 6 float64, 7 float32: not token ids; anything else unknown
  }
}

template <class T>
T read_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 and aarch64 are little-endian, as the format
  return v;
}

[[noreturn]] void fault(const std::string& file, const std::string& what) { throw_usage_error(file + ": " + what); }

// A mapped file cut short while mapped (a copy or a job rewriting it, a file system that
// dropped it) or unreadable (an I/O error on a network file system) turns a read into SIGBUS:
// the process died with MPI's backtrace and no word on the file. Each mapping registers its
// range and a message formatted in advance in a list the handler walks; for an address in one
// of them it writes that one line and exits 3 (the launcher ends the other ranks). Any other
// SIGBUS goes to the handler that was there. Entries are never freed (a run maps a few files;
// a blend of a thousand datasets, two thousand entries), so the handler never reads freed memory.
struct GuardedRange {
  std::atomic<uintptr_t> begin{0}, end{0};
  std::string message;
  GuardedRange* next = nullptr;
};
std::atomic<GuardedRange*> g_ranges{nullptr};
struct sigaction g_previous_bus {};

extern "C" void on_mapped_file_bus_error(int sig, siginfo_t* info, void* context) {
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const GuardedRange* r = g_ranges.load(std::memory_order_acquire); r; r = r->next) {
    const uintptr_t b = r->begin.load(std::memory_order_acquire), e = r->end.load(std::memory_order_acquire);
    if (b != 0 && at >= b && at < e) {
      const ssize_t ignored = ::write(STDERR_FILENO, r->message.data(), r->message.size());
      (void)ignored;
      ::_exit(3);
    }
  }
  // Not ours: as if this handler had never been installed.
  if (g_previous_bus.sa_flags & SA_SIGINFO) {
    if (g_previous_bus.sa_sigaction) return g_previous_bus.sa_sigaction(sig, info, context);
  } else if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN && g_previous_bus.sa_handler) {
    return g_previous_bus.sa_handler(sig);
  }
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

GuardedRange* guard_mapping(const void* data, size_t bytes, const std::string& path) {
  static std::mutex mu;
  static bool installed = false;
  std::lock_guard lock(mu);
  auto* r = new GuardedRange;
  r->message = "dlperf-train: " + printable(path) +
               " changed or failed while the run read it (cut short, or an I/O error reading it); the data must stay as it was for "
               "the run\n";
  const auto b = reinterpret_cast<uintptr_t>(data);
  r->end.store(b + bytes, std::memory_order_relaxed);
  r->begin.store(b, std::memory_order_relaxed);
  r->next = g_ranges.load(std::memory_order_relaxed);
  g_ranges.store(r, std::memory_order_release);  // complete before the handler can reach it
  if (!installed) {
    struct sigaction sa {};
    sa.sa_sigaction = on_mapped_file_bus_error;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous_bus);
    installed = true;
  }
  return r;
}

void unguard_mapping(void* guard) {
  if (auto* r = static_cast<GuardedRange*>(guard)) {
    r->begin.store(0, std::memory_order_release);
    r->end.store(0, std::memory_order_release);
  }
}

}  // namespace

IndexedDataset::Mapping::Mapping(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) fault(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fault(path, "not a regular file (a FIFO, socket or device cannot be mapped)");
  }
  bytes = static_cast<size_t>(st.st_size);
  if (bytes > 0) {
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fault(path, std::string("cannot map (") + std::strerror(errno) + ")");
    }
    data = p;
    guard = guard_mapping(p, bytes, path);
  }
  ::close(fd);
}

IndexedDataset::Mapping::~Mapping() {
  unguard_mapping(guard);
  if (data) ::munmap(data, bytes);
}

IndexedDataset::IndexedDataset(const std::string& prefix, int64_t vocab)
    : idx_(prefix + ".idx"), bin_(prefix + ".bin") {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  check_index(idx);
  if (static_cast<size_t>(tokens_) * item_ != bin_.bytes)
    fault(bin, std::to_string(bin_.bytes) + " bytes, but " + idx + " describes " + std::to_string(tokens_) + " tokens of " +
                   std::to_string(item_) + " bytes (" + std::to_string(static_cast<size_t>(tokens_) * item_) + "): truncated or mismatched");
  if (vocab > 0) check_tokens(bin, vocab);
}

void IndexedDataset::check_index(const std::string& idx) {
  const auto* p = static_cast<const unsigned char*>(idx_.data);
  if (idx_.bytes < kHeader) fault(idx, std::to_string(idx_.bytes) + " bytes, shorter than the " + std::to_string(kHeader) + "-byte header: truncated");
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) fault(idx, "wrong magic (want MMIDIDX\\0\\0: not a Megatron indexed dataset)");
  const auto version = read_le<uint64_t>(p + 9);
  if (version != 1) fault(idx, "version " + std::to_string(version) + " (this reader knows version 1)");
  dtype_ = p[17];
  item_ = item_size(dtype_);
  if (item_ == 0)
    fault(idx, "dtype code " + std::to_string(dtype_) + (dtype_ == 6 || dtype_ == 7 ? " is a float type, not token ids" : " is unknown") +
                   " (want 1-5 or 8)");
  const auto s = read_le<uint64_t>(p + 18), d = read_le<uint64_t>(p + 26);
  const uint64_t body = idx_.bytes - kHeader;
  if (s > body / 12 || d > body / 8 || s * 12 + d * 8 > body)
    fault(idx, std::to_string(s) + " sequences and " + std::to_string(d) + " document indices do not fit its " + std::to_string(idx_.bytes) +
                   " bytes: truncated");
  const uint64_t rest = body - s * 12 - d * 8;
  if (rest != 0 && rest != s) fault(idx, std::to_string(rest) + " bytes after the document indices (want 0, or one mode byte per sequence)");
  if (d < 1) fault(idx, "no document indices (want documents + 1, starting at 0)");
  sequences_ = static_cast<int64_t>(s), documents_ = static_cast<int64_t>(d - 1);
  const unsigned char* lengths = p + kHeader;
  const unsigned char* pointers = lengths + s * 4;
  const unsigned char* docs = pointers + s * 8;
  int64_t offset = 0;
  for (uint64_t i = 0; i < s; ++i) {
    const auto len = read_le<int32_t>(lengths + 4 * i);
    const auto ptr = read_le<int64_t>(pointers + 8 * i);
    if (len < 0) fault(idx, "sequence " + std::to_string(i) + " has length " + std::to_string(len));
    if (ptr != offset)
      fault(idx, "sequence " + std::to_string(i) + " starts at byte " + std::to_string(ptr) + ", want " + std::to_string(offset) +
                     " (the lengths before it)");
    offset += static_cast<int64_t>(len) * static_cast<int64_t>(item_);
    tokens_ += len;
  }
  int64_t prev = -1;
  for (uint64_t i = 0; i < d; ++i) {
    const auto v = read_le<int64_t>(docs + 8 * i);
    if ((i == 0 && v != 0) || v < prev || v > static_cast<int64_t>(s) || (i + 1 == d && v != static_cast<int64_t>(s)))
      fault(idx, "document index " + std::to_string(i) + " is " + std::to_string(v) + " (want non-decreasing from 0 to " + std::to_string(s) + ")");
    prev = v;
  }
}

int64_t IndexedDataset::token(int64_t i) const {
  const auto* p = static_cast<const unsigned char*>(bin_.data) + static_cast<size_t>(i) * item_;
  switch (dtype_) {
    case 1: return *p;
    case 2: return static_cast<int8_t>(*p);
    case 3: return read_le<int16_t>(p);
    case 4: return read_le<int32_t>(p);
    case 5: return read_le<int64_t>(p);
    default: return read_le<uint16_t>(p);  // 8
  }
}

void IndexedDataset::check_tokens(const std::string& bin, int64_t vocab) const {
  for (int64_t i = 0; i < tokens_; ++i) {
    const int64_t t = token(i);
    if (t < 0 || t >= vocab)
      fault(bin, "token " + std::to_string(i) + " is id " + std::to_string(t) + ", outside the vocabulary [0, " + std::to_string(vocab) +
                     ") (--llama-vocab)");
  }
}

void write_indexed_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& documents) {
  bool small = true;
  for (const auto& d : documents)
    for (int32_t t : d) small = small && t >= 0 && t < 65536;
  const uint8_t code = small ? 8 : 4;
  const size_t item = small ? 2 : 4;
  // An earlier dataset is never written over (its .bin was emptied when the .idx could not be
  // written); the pair is written under temporary names and renamed once both are complete.
  const std::string bin = prefix + ".bin", idx = prefix + ".idx";
  for (const auto& f : {bin, idx}) {
    std::error_code ec;
    if (std::filesystem::symlink_status(f, ec).type() != std::filesystem::file_type::not_found)
      throw_usage_error(f + " already exists (an earlier dataset?): remove it or choose another prefix");
  }
  const std::string tag = ".tmp" + std::to_string(::getpid());
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& p : paths) std::filesystem::remove(p, ec);
    }
  } cleanup{{bin + tag, idx + tag}};
  std::ofstream b(bin + tag, std::ios::binary);
  if (!b) throw_usage_error(bin + ": cannot write: " + std::strerror(errno));
  std::ofstream x(idx + tag, std::ios::binary);
  if (!x) throw_usage_error(idx + ": cannot write: " + std::strerror(errno));
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, doc_index{0};
  int64_t offset = 0;
  for (const auto& d : documents) {
    for (int32_t t : d) {
      if (small) {
        const auto v = static_cast<uint16_t>(t);
        b.write(reinterpret_cast<const char*>(&v), 2);
      } else {
        b.write(reinterpret_cast<const char*>(&t), 4);
      }
    }
    lengths.push_back(static_cast<int32_t>(d.size()));
    pointers.push_back(offset);
    offset += static_cast<int64_t>(d.size() * item);
    doc_index.push_back(static_cast<int64_t>(lengths.size()));
  }
  const uint64_t version = 1, s = lengths.size(), n = doc_index.size();
  x.write(kMagic, sizeof kMagic);
  x.write(reinterpret_cast<const char*>(&version), 8);
  x.write(reinterpret_cast<const char*>(&code), 1);
  x.write(reinterpret_cast<const char*>(&s), 8);
  x.write(reinterpret_cast<const char*>(&n), 8);
  x.write(reinterpret_cast<const char*>(lengths.data()), static_cast<std::streamsize>(lengths.size() * 4));
  x.write(reinterpret_cast<const char*>(pointers.data()), static_cast<std::streamsize>(pointers.size() * 8));
  x.write(reinterpret_cast<const char*>(doc_index.data()), static_cast<std::streamsize>(doc_index.size() * 8));
  b.close();
  x.close();
  if (!b || !x) throw_usage_error(prefix + ".bin/.idx: write failed (disk full?)");
  std::error_code ec;
  std::filesystem::rename(bin + tag, bin, ec);
  if (!ec) std::filesystem::rename(idx + tag, idx, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(bin, ignored);  // ours: it did not exist before
    throw_usage_error(prefix + ".bin/.idx: cannot rename into place: " + ec.message());
  }
  cleanup.paths.clear();
}

}  // namespace dlperf::data
