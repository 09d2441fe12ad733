// Indexing WebDataset-style tar shards: walk the 512-byte member headers with pread (the image
// data is never read here), group members by key (the name up to the first dot of its last
// component, as WebDataset does), keep groups with a .jpg/.jpeg image and read their .cls
// label. Formats: POSIX ustar, GNU (long names in 'L' members, base-256 sizes) and pax
// ('x' records overriding path and size), which covers Python's tarfile and GNU tar output.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "data/dataset.h"

namespace dlperf::data {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool pread_all(int fd, void* buf, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

// Octal ASCII (NUL/space padded) or GNU base-256 (high bit of the first byte set).
std::optional<uint64_t> parse_number(const char* p, size_t n) {
  if (static_cast<unsigned char>(p[0]) & 0x80) {
    uint64_t v = static_cast<unsigned char>(p[0]) & 0x7F;
    for (size_t i = 1; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i, any = true) v = v * 8 + static_cast<uint64_t>(p[i] - '0');
  if (i < n && p[i] != '\0' && p[i] != ' ') return std::nullopt;
  return any ? std::optional<uint64_t>(v) : std::optional<uint64_t>(0);
}

bool checksum_ok(const unsigned char* h) {
  const auto stored = parse_number(reinterpret_cast<const char*>(h) + 148, 8);
  if (!stored) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == *stored;
}

// pax records "LEN key=value\n": the path and size overrides for the next member.
void parse_pax(const std::string& body, std::string& path, std::optional<uint64_t>& size) {
  size_t at = 0;
  while (at < body.size()) {
    const size_t space = body.find(' ', at);
    if (space == std::string::npos) return;
    size_t len = 0;
    try {
      len = std::stoul(body.substr(at, space - at));
    } catch (const std::exception&) {
      return;
    }
    if (len == 0 || at + len > body.size()) return;
    const std::string rec = body.substr(space + 1, at + len - space - 2);  // without the newline
    const size_t eq = rec.find('=');
    if (eq != std::string::npos) {
      const std::string key = rec.substr(0, eq), value = rec.substr(eq + 1);
      if (key == "path") path = value;
      if (key == "size") size = parse_number(value.c_str(), value.size());
    }
    at += len;
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

int64_t index_tar_shard(const std::string& path, uint32_t shard, std::vector<SampleRef>& out, const WarnFn& warn) {
  // O_NONBLOCK: opening a FIFO named like a shard blocked for ever (no effect on regular files).
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) throw_usage_error("--data " + path + ": cannot open the shard (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw_usage_error("--data " + path + ": not a regular file (a FIFO, socket or device cannot be a shard)");
  const auto file_size = static_cast<uint64_t>(st.st_size);
  // A shard cut short (an interrupted copy) lost every sample after the cut without a word, or
  // named one as unlabelled: refused, since what is missing cannot be counted.
  const auto truncated = [&](uint64_t needs, const std::string& what) {
    throw_usage_error("--data " + path + ": truncated: " + what + " needs " + std::to_string(needs) + " bytes, the file has " +
                      std::to_string(file_size) + " (an interrupted copy?): copy the shard again");
  };
  const auto bad = [&](const std::string& what) { throw_usage_error("--data " + path + ": not a readable tar shard (" + what + ")"); };

  struct Group {
    std::string key;
    std::optional<SampleRef> image;
    std::optional<int32_t> label;
  } g;
  int64_t unlabelled = 0;
  const auto flush = [&]() {
    if (g.image && g.label) {
      g.image->label = *g.label;
      out.push_back(*g.image);
    } else if (g.image) {
      ++unlabelled;
      if (warn) warn("skipping " + path + ":" + g.key + ": an image without a readable .cls label");
    }
    g = Group{};
  };

  unsigned char h[512];
  uint64_t at = 0;
  std::string next_name;                 // from a GNU 'L' or pax 'x' member
  std::optional<uint64_t> next_size;     // from a pax 'x' member
  int members = 0;
  while (true) {
    if (!pread_all(f.fd, h, 512, at)) {
      if (members == 0) bad("shorter than one 512-byte header");
      if (at < file_size) truncated(at + 512, "the header at byte " + std::to_string(at));
      // Ends on a member boundary without the end-of-archive blocks: every member is whole;
      // kept, as GNU tar does, with a warning.
      if (warn) warn(path + " has no end-of-archive blocks after its " + std::to_string(members) + " members: it may have been cut short");
      break;
    }
    if (std::all_of(h, h + 512, [](unsigned char c) { return c == 0; })) break;  // end of archive
    if (!checksum_ok(h)) bad("bad header checksum at byte " + std::to_string(at));
    ++members;
    const auto size_field = parse_number(reinterpret_cast<const char*>(h) + 124, 12);
    if (!size_field) bad("bad size field at byte " + std::to_string(at));
    const char type = static_cast<char>(h[156]);
    const bool extended = type == 'L' || type == 'x' || type == 'g';  // headers about other members
    const uint64_t size = extended ? *size_field : next_size.value_or(*size_field);
    const uint64_t data = at + 512;
    if (data + size > file_size) {
      const std::string member(reinterpret_cast<const char*>(h), strnlen(reinterpret_cast<const char*>(h), 100));
      truncated(data + size, "member '" + (next_name.empty() ? member : next_name) + "' at byte " + std::to_string(at));
    }
    at = data + (size + 511) / 512 * 512;

    if (type == 'L' || type == 'x') {  // the next member's long name (GNU) or pax records
      std::string body(size, '\0');
      if (size > (1u << 20) || !pread_all(f.fd, body.data(), size, data)) bad("unreadable extended header");
      if (type == 'L') next_name = std::string(body.c_str());
      else parse_pax(body, next_name, next_size);
      continue;
    }
    std::string name = next_name;
    if (name.empty()) {
      name.assign(reinterpret_cast<const char*>(h), strnlen(reinterpret_cast<const char*>(h), 100));
      if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != 0)
        name = std::string(reinterpret_cast<const char*>(h) + 345, strnlen(reinterpret_cast<const char*>(h) + 345, 155)) + "/" + name;
    }
    next_name.clear();
    next_size.reset();
    if (type != '0' && type != '\0' && type != '7') continue;  // directories, links, global pax headers

    // WebDataset's split: key = up to the first dot of the last path component.
    const size_t slash = name.rfind('/');
    const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
    if (dot == std::string::npos) continue;
    const std::string key = name.substr(0, dot), ext = lower(name.substr(dot + 1));
    if (key != g.key) flush();
    g.key = key;
    if (ext == "jpg" || ext == "jpeg") {
      if (size > 0xFFFFFFFFull) bad("member " + name + " is larger than 4 GiB");
      SampleRef r;
      r.offset = data;
      r.size = static_cast<uint32_t>(size);
      r.file = shard;
      g.image = r;
    } else if (ext == "cls") {
      char text[32] = {};
      if (size > 0 && size < sizeof text && pread_all(f.fd, text, size, data)) {
        char* end = nullptr;
        const long v = std::strtol(text, &end, 10);
        while (end && (*end == '\n' || *end == ' ' || *end == '\r')) ++end;
        if (end && end != text && *end == '\0' && v >= 0 && v < (1L << 30)) g.label = static_cast<int32_t>(v);
      }
    }
  }
  flush();
  return unlabelled;
}

}  // namespace dlperf::data
