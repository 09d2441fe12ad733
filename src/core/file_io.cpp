// File-system helpers (see file_io.h). Only POSIX and Linux calls; ACLs are read and written
// as the "system.posix_acl_access" extended attribute, which is how the kernel stores them,
// so no libacl is needed.
#include "core/file_io.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace dlperf {
namespace fs = std::filesystem;

namespace {

constexpr const char* kAclXattr = "system.posix_acl_access";

[[noreturn]] void throw_fault(const std::string& message) { throw Error(ErrorKind::fault, message); }

// mountinfo escapes blanks in paths as \040 (and \011, \012, \134).
std::string unescape_mount(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::string existing_ancestor(const std::string& path) {
  fs::path p = fs::absolute(path);
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return p.string();
}

std::string errno_text(int err) { return err ? std::strerror(err) : "unknown error"; }

}  // namespace

std::string resolve_symlinks(const std::string& path) {
  fs::path p = fs::absolute(path);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) {
      // The directories above may be links too; resolve them where they exist.
      const fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
      return (ec ? p : dir / p.filename()).string();
    }
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw_usage_error(path + ": cannot read symlink " + p.string() + ": " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
    p = p.lexically_normal();
  }
  throw_usage_error(path + ": too many levels of symbolic links");
}

std::string describe_filesystem(const std::string& path) {
  const std::string where = fs::weakly_canonical(existing_ancestor(path)).string();
  struct stat st {};
  const bool have_dev = ::stat(where.c_str(), &st) == 0;
  std::ifstream in("/proc/self/mountinfo");
  std::string line, best_point, best_type;
  bool best_dev_match = false;
  while (std::getline(in, line)) {
    // 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    std::istringstream f(line);
    std::string id, parent, majmin, root, point;
    if (!(f >> id >> parent >> majmin >> root >> point)) continue;
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string type;
    tail >> type;
    point = unescape_mount(point);
    const bool prefix = where == point || point == "/" ||
                        (where.size() > point.size() && where.compare(0, point.size(), point) == 0 && where[point.size()] == '/');
    if (!prefix) continue;
    unsigned maj = 0, min = 0;
    const bool dev_match = have_dev && std::sscanf(majmin.c_str(), "%u:%u", &maj, &min) == 2 && major(st.st_dev) == maj &&
                           minor(st.st_dev) == min;
    // The deepest mount point holding the path; one on the path's own device wins.
    if ((dev_match && !best_dev_match) || (dev_match == best_dev_match && point.size() >= best_point.size())) {
      best_point = point;
      best_type = type;
      best_dev_match = dev_match;
    }
  }
  if (best_point.empty()) return "";
  return best_point + " (" + best_type + ")";
}

std::optional<std::string> read_at_most(std::istream& in, size_t limit) {
  std::string out;
  char buf[65536];
  while (in) {
    in.read(buf, sizeof buf);
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > limit) return std::nullopt;
  }
  return out;
}

std::string human_bytes(unsigned long long bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 || v >= 100 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string write_failure_message(const std::string& file, int err, const std::string& doing) {
  if (!is_out_of_space(err)) return "cannot finish " + doing + " " + file + ": " + errno_text(err);
  std::string fs_name = describe_filesystem(file);
  if (fs_name.empty()) fs_name = "the file system of " + file;
  std::string msg = "no space left on " + fs_name + " " + doing + " " + file;
  if (err == EDQUOT) msg += " (disk quota exceeded)";
  struct statvfs v {};
  if (::statvfs(existing_ancestor(file).c_str(), &v) == 0)
    msg += "; " + human_bytes(static_cast<unsigned long long>(v.f_bavail) * v.f_frsize) + " free";
  return msg;
}

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

void copy_file_attributes(const std::string& from, const struct stat& st, int to_fd, const std::string& to_path) {
  // Owner first (chown may clear mode bits), then mode, then the ACL (which sets the group
  // bits from its mask). Only root may give a file away: others keep their own uid.
  if (::fchown(to_fd, st.st_uid, st.st_gid) != 0 && ::fchown(to_fd, static_cast<uid_t>(-1), st.st_gid) != 0)
    throw_fault("cannot give " + to_path + " the group " + std::to_string(st.st_gid) + " of " + from + ": " +
                std::strerror(errno) + " (dlperf replaces the file; it must keep its group)");
  if (::fchmod(to_fd, st.st_mode & 07777) != 0)
    throw_fault("cannot give " + to_path + " the mode of " + from + ": " + std::strerror(errno));
  const ssize_t n = ::getxattr(from.c_str(), kAclXattr, nullptr, 0);
  if (n <= 0) return;  // no ACL, or a file system without them
  std::vector<char> acl(static_cast<size_t>(n));
  const ssize_t got = ::getxattr(from.c_str(), kAclXattr, acl.data(), acl.size());
  if (got <= 0) return;
  if (::fsetxattr(to_fd, kAclXattr, acl.data(), static_cast<size_t>(got), 0) != 0)
    throw_fault("cannot give " + to_path + " the ACL of " + from + ": " + std::strerror(errno));
}

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "host";
  for (char* c = name; *c; ++c)
    if (*c == '/' || *c == '.') *c = '_';
  return name;
}

// Temporaries ".<name>.tmp.<host>.<pid>" that a killed writer on this host left: its pid is gone.
void remove_stale_temporaries(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = n.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace

void write_new_file(const std::string& path, std::string_view data, const std::string& like, const struct stat* like_st) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int e = errno;
    throw_fault(is_out_of_space(e) ? write_failure_message(path, e, "creating") : "cannot create " + path + ": " + std::strerror(e));
  }
  int err = 0;
  std::string doing = "writing";
  try {
    if (like_st) copy_file_attributes(like, *like_st, fd, path);
    for (size_t done = 0; done < data.size() && !err;) {
      const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
      if (w >= 0) done += static_cast<size_t>(w);
      else if (errno != EINTR) err = errno;
    }
    if (!err && ::fsync(fd) != 0) {
      err = errno;
      doing = "syncing";
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0 && !err) {  // NFS and quotas can report a failed write only here
    err = errno;
    doing = "closing";
  }
  if (err) throw_fault(write_failure_message(path, err, doing));
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string target = resolve_symlinks(path);
  const fs::path t(target);
  const std::string prefix = "." + t.filename().string() + ".tmp." + host_name() + ".";
  remove_stale_temporaries(t.parent_path(), prefix);
  const std::string tmp = (t.parent_path() / (prefix + std::to_string(::getpid()))).string();
  struct stat old {};
  const bool exists = ::stat(target.c_str(), &old) == 0;
  if (exists && !S_ISREG(old.st_mode)) throw_usage_error(path + ": exists and is not a regular file");
  ::unlink(tmp.c_str());  // a leftover of an earlier process with this pid
  try {
    write_new_file(tmp, contents, target, exists ? &old : nullptr);
  } catch (const Error& e) {
    ::unlink(tmp.c_str());
    throw Error(e.kind(), std::string(e.what()) + " (" + path + ", if it exists, is unchanged)");
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw_fault("cannot rename " + tmp + " to " + target + ": " + std::strerror(e));
  }
}

std::string write_protection(const std::string& path, const struct stat& st) {
  if ((st.st_mode & 0222) != 0 && ::access(path.c_str(), W_OK) == 0) return "";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return std::string("is write-protected (mode ") + mode + ")";
}

std::string file_name_problem(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (name.empty()) return "names a folder, not a file";
  if (printable(path) != path) return "holds a control character or invalid UTF-8";
  if (name.find_first_not_of(" \t") == std::string::npos) return "has a blank file name";
  return "";
}

std::string output_file_problem(const std::string& path) {
  if (const std::string why = file_name_problem(path); !why.empty()) return why;
  const std::string target = resolve_symlinks(path);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return "exists and is not a regular file";
    if (const std::string p = write_protection(target, st); !p.empty()) return p + ": make it writable (chmod u+w) or choose another name";
  }
  const fs::path parent = fs::path(target).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (::stat(dir.c_str(), &st) != 0) return "its folder " + dir + " does not exist";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return "its folder " + dir + " is not writable (" + std::strerror(errno) + ")";
  return "";
}

int exit_after_printing(const char* program) {
  const std::string why = flush_stdout_error();
  if (why.empty()) return 0;
  std::cerr << program << ": " << why << '\n';
  return 3;
}

std::string flush_stdout_error() {
  errno = 0;
  std::cout.flush();
  if (std::cout) return "";
  const int e = errno;
  // errno belongs to the first failed write, which may be long past: then only "write error".
  return "cannot write to standard output: " + std::string(e ? std::strerror(e) : "write error (full disk or closed pipe?)");
}

}  // namespace dlperf
