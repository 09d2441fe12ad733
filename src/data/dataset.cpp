// Dataset: detection of the layout, the folder-tree index, reads, and (de)serialisation.
// The tar-shard index is tar_index.cpp.
#include "data/dataset.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/fnv.h"

namespace fs = std::filesystem;

namespace dlperf::data {
namespace {

constexpr int64_t kMaxShards = 1'000'000;  // names one --data pattern may expand to

bool is_jpeg_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg";
}

bool is_tar_name(const fs::path& p) { return p.extension() == ".tar"; }

std::vector<fs::path> sorted_entries(const fs::path& dir, bool want_dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    const bool is_dir = it->is_directory(ec2);
    if (is_dir == want_dirs && (want_dirs || is_tar_name(it->path()))) out.push_back(it->path());
  }
  if (ec) throw_usage_error("--data " + dir.string() + ": cannot list the folder (" + ec.message() + ")");
  std::sort(out.begin(), out.end());
  return out;
}

// Raises the soft limit on open files towards the hard one when `needed` descriptors must stay open.
void ensure_open_files(size_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= needed + 64) return;
  lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, needed + 64);
  setrlimit(RLIMIT_NOFILE, &lim);
}

// Byte (de)serialisation of the index: little-endian PODs and length-prefixed strings.
struct Writer {
  std::vector<uint8_t> out;
  template <class T>
  void pod(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
};
struct Reader {
  std::span<const uint8_t> in;
  size_t at = 0;
  void need(size_t n) {
    if (n > in.size() - at) throw_usage_error("dataset index: truncated while reading it back");
  }
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = pod<uint64_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return s;
  }
};

}  // namespace

const char* to_string(DatasetLayout l) { return l == DatasetLayout::folder ? "folder" : "tar"; }

std::vector<std::string> expand_braces(const std::string& pattern) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  const size_t close = pattern.find('}', open);
  const size_t dots = pattern.find("..", open);
  if (close == std::string::npos || dots == std::string::npos || dots > close)
    throw_usage_error("--data " + pattern + ": a shard pattern needs one {first..last} range, e.g. train-{000000..000146}.tar");
  const std::string a = pattern.substr(open + 1, dots - open - 1), b = pattern.substr(dots + 2, close - dots - 2);
  const auto digits = [](const std::string& s) { return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit); };
  if (!digits(a) || !digits(b) || std::stol(a) > std::stol(b))
    throw_usage_error("--data " + pattern + ": the range {" + a + ".." + b + "} needs two increasing decimal numbers");
  // WebDataset's largest public sets have tens of thousands of shards; a typo such as
  // {0..9999999} expanded ten million names (and held that many descriptors) before the first
  // missing shard was reported.
  const std::string rest_pattern = pattern.substr(close + 1);
  const int64_t count = std::stol(b) - std::stol(a) + 1;  // below 10^9 (9 digits at most)
  const std::vector<std::string> rests = expand_braces(rest_pattern);
  if (count * static_cast<int64_t>(rests.size()) > kMaxShards)
    throw_usage_error("--data " + pattern + ": the pattern names " + std::to_string(count * static_cast<int64_t>(rests.size())) +
                      " shards, more than " + std::to_string(kMaxShards));
  std::vector<std::string> out;
  const size_t width = a.size();
  for (long v = std::stol(a); v <= std::stol(b); ++v) {
    std::string num = std::to_string(v);
    if (num.size() < width) num.insert(0, width - num.size(), '0');
    for (const auto& rest : rests) out.push_back(pattern.substr(0, open) + num + rest);
  }
  return out;
}

Dataset Dataset::open(const std::string& path, const WarnFn& report) {
  Dataset d;
  // Warnings are held back until the dataset turns out usable: an empty one is one line.
  std::vector<std::string> warnings;
  const WarnFn warn = [&warnings](const std::string& m) { warnings.push_back(m); };
  std::vector<std::string> shards;
  std::error_code ec;
  if (path.find('{') != std::string::npos) {
    shards = expand_braces(path);
    d.root_ = path;
  } else {
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) throw_usage_error("--data " + path + ": no such file or directory");
    if (fs::is_regular_file(st)) {
      if (!is_tar_name(path)) throw_usage_error("--data " + path + ": expected a folder tree, a folder of .tar shards or a .tar file");
      shards = {path};
      d.root_ = path;
    } else if (!fs::is_directory(st)) {
      throw_usage_error("--data " + path + ": not a regular file (a FIFO, socket or device cannot be a shard) nor a folder");
    } else {
      fs::path root = path;
      if (fs::is_directory(root / "train", ec)) root /= "train";  // ImageNet: train/ and val/ side by side
      d.root_ = root.string();
      for (const auto& p : sorted_entries(root, false)) shards.push_back(p.string());
    }
  }

  if (!shards.empty()) {
    d.layout_ = DatasetLayout::tar;
    for (size_t s = 0; s < shards.size(); ++s) {
      d.skipped_ += index_tar_shard(shards[s], static_cast<uint32_t>(s), d.samples_, warn);
      d.files_.push_back(shards[s]);
    }
    int32_t top = -1;
    for (const auto& r : d.samples_) top = std::max(top, r.label);
    d.num_classes_ = top + 1;
  } else {
    d.layout_ = DatasetLayout::folder;
    int64_t ignored = 0, not_files = 0, revisited = 0;
    const fs::path root = d.root_;
    // Every folder and image once, by device and inode: a link to a folder above (a loop) listed
    // the same images dozens of times, and one into another class filed its images twice.
    std::set<std::pair<dev_t, ino_t>> seen;
    const auto first_visit = [&](const fs::path& p) {
      struct stat st {};
      return ::stat(p.c_str(), &st) != 0 || seen.insert({st.st_dev, st.st_ino}).second;  // unstat-able: kept, a bad sample later
    };
    const std::vector<fs::path> class_dirs = sorted_entries(root, true);
    first_visit(root);
    for (const auto& dir : class_dirs) first_visit(dir);
    for (const auto& dir : class_dirs) {
      const auto label = static_cast<int32_t>(d.files_.size());
      d.files_.push_back(dir.filename().string());
      std::vector<std::string> names;
      for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end; !ec && it != end;
           it.increment(ec)) {
        std::error_code ec2;
        if (it->is_directory(ec2)) {
          if (!first_visit(it->path())) {
            it.disable_recursion_pending();
            ++revisited;
          }
          continue;
        }
        // A FIFO would block its reader, a socket or device never reads: skipped. What cannot be
        // stat'ed (a dangling link) stays, a bad sample counted under --max-bad-samples.
        if (const fs::file_status st = it->status(ec2); !ec2 && fs::exists(st) && !fs::is_regular_file(st)) {
          ++not_files;
          continue;
        }
        if (!is_jpeg_name(it->path())) {
          ++ignored;
          continue;
        }
        if (!first_visit(it->path())) {
          ++revisited;
          continue;
        }
        names.push_back(fs::relative(it->path(), dir, ec2).string());
      }
      if (ec) throw_usage_error("--data " + dir.string() + ": cannot list the folder (" + ec.message() + ")");
      if (names.empty()) warn("class folder " + dir.string() + " has no .jpg/.jpeg images (class " + std::to_string(label) + " is kept, empty)");
      std::sort(names.begin(), names.end());
      for (const auto& n : names) {
        SampleRef r;
        r.offset = d.names_.size();
        r.file = static_cast<uint32_t>(label);
        r.label = label;
        d.names_ += n;
        d.names_ += '\0';
        d.samples_.push_back(r);
      }
    }
    d.num_classes_ = static_cast<int64_t>(d.files_.size());
    if (ignored > 0)
      warn("ignored " + std::to_string(ignored) + " file(s) under " + d.root_ + " without a .jpg/.jpeg extension");
    if (not_files > 0)
      warn("ignored " + std::to_string(not_files) + " entries under " + d.root_ + " that are not regular files (FIFOs, sockets, devices)");
    if (revisited > 0)
      warn("listed each image once: " + std::to_string(revisited) + " link(s) under " + d.root_ +
           " lead to a folder or image already listed (a loop, or a second path into a class)");
  }
  if (d.samples_.empty())
    throw_usage_error("--data " + path + ": no images found (expected <class>/*.JPEG folders, or .tar shards of KEY.jpg + KEY.cls)");
  if (report)
    for (const auto& w : warnings) report(w);
  d.open_shards();
  return d;
}

void Dataset::open_shards() {
  if (layout_ != DatasetLayout::tar) return;
  ensure_open_files(files_.size());
  for (const auto& f : files_) {
    const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_usage_error("--data " + f + ": cannot open the shard (" + std::strerror(errno) + ")");
    fds_.push_back(fd);
  }
}

Dataset::Dataset(Dataset&& o) noexcept { *this = std::move(o); }
Dataset& Dataset::operator=(Dataset&& o) noexcept {
  if (this != &o) {
    for (int fd : fds_) ::close(fd);
    layout_ = o.layout_;
    root_ = std::move(o.root_);
    files_ = std::move(o.files_);
    names_ = std::move(o.names_);
    samples_ = std::move(o.samples_);
    num_classes_ = o.num_classes_;
    skipped_ = o.skipped_;
    fds_ = std::move(o.fds_);
    o.fds_.clear();
  }
  return *this;
}
Dataset::~Dataset() {
  for (int fd : fds_) ::close(fd);
}

size_t Dataset::max_sample_bytes() const {
  size_t m = 0;
  for (const auto& r : samples_) m = std::max<size_t>(m, r.size);
  return m;
}

std::string Dataset::describe(size_t i) const {
  const SampleRef& r = samples_[i];
  if (layout_ == DatasetLayout::folder) return root_ + "/" + files_[r.file] + "/" + (names_.c_str() + r.offset);
  // The member's name is in the 512-byte header just before its data.
  char header[512] = {};
  std::string name = "byte " + std::to_string(r.offset);
  if (r.offset >= 512 && ::pread(fds_[r.file], header, 512, static_cast<off_t>(r.offset - 512)) == 512)
    name = std::string(header, strnlen(header, 100));
  return files_[r.file] + ":" + name;
}

std::string Dataset::fingerprint() const {
  Fnv1a h;
  h.number(static_cast<uint64_t>(layout_)).number(static_cast<uint64_t>(num_classes_)).number(samples_.size());
  for (const auto& f : files_) h.text(layout_ == DatasetLayout::folder ? f : fs::path(f).filename().string());
  h.text(names_);
  for (const auto& r : samples_) h.number(r.offset).number(r.size, 4).number(r.file, 4).number(static_cast<uint32_t>(r.label), 4);
  if (layout_ == DatasetLayout::folder && !samples_.empty()) {
    constexpr size_t kProbes = 16;
    for (size_t k = 0; k < kProbes; ++k) {
      struct stat st {};
      const std::string path = describe(k * samples_.size() / kProbes);
      h.number(::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : ~uint64_t{0});
    }
  }
  return h.hex();
}

size_t Dataset::read(size_t i, std::vector<uint8_t>& buf, std::string& path) const {
  const SampleRef& r = samples_[i];
  int fd = -1;
  size_t size = r.size;
  off_t offset = static_cast<off_t>(r.offset);
  if (layout_ == DatasetLayout::folder) {
    path.assign(root_).append("/").append(files_[r.file]).append("/").append(names_.c_str() + r.offset);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO put there since indexing must not block
    if (fd < 0) throw ReadError(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw ReadError("not a regular file");
    }
    size = static_cast<size_t>(st.st_size);
    offset = 0;
  } else {
    fd = fds_[r.file];
  }
  if (buf.size() < size) buf.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, buf.data() + done, size - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n == 0 ? "file ends early" : std::strerror(errno);
      if (layout_ == DatasetLayout::folder) ::close(fd);
      throw ReadError("read failed: " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (layout_ == DatasetLayout::folder) ::close(fd);
  return size;
}

std::vector<uint8_t> Dataset::serialize() const {
  Writer w;
  w.pod<uint32_t>(0x444C5844);  // "DXLD"
  w.pod<uint8_t>(static_cast<uint8_t>(layout_));
  w.str(root_);
  w.pod<uint64_t>(files_.size());
  for (const auto& f : files_) w.str(f);
  w.str(names_);
  w.pod<int64_t>(num_classes_);
  w.pod<int64_t>(skipped_);
  w.pod<uint64_t>(samples_.size());
  const auto* p = reinterpret_cast<const uint8_t*>(samples_.data());
  w.out.insert(w.out.end(), p, p + samples_.size() * sizeof(SampleRef));
  return std::move(w.out);
}

Dataset Dataset::deserialize(std::span<const uint8_t> bytes) {
  Reader r{bytes};
  if (r.pod<uint32_t>() != 0x444C5844) throw_usage_error("dataset index: not a dlperf dataset index");
  Dataset d;
  d.layout_ = static_cast<DatasetLayout>(r.pod<uint8_t>());
  d.root_ = r.str();
  d.files_.resize(r.pod<uint64_t>());
  for (auto& f : d.files_) f = r.str();
  d.names_ = r.str();
  d.num_classes_ = r.pod<int64_t>();
  d.skipped_ = r.pod<int64_t>();
  const auto n = r.pod<uint64_t>();
  if (n > (bytes.size() - r.at) / sizeof(SampleRef)) throw_usage_error("dataset index: truncated while reading it back");
  d.samples_.resize(n);
  std::memcpy(d.samples_.data(), bytes.data() + r.at, n * sizeof(SampleRef));
  d.open_shards();
  return d;
}

}  // namespace dlperf::data
