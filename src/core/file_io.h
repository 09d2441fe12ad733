// File-system facts and safe whole-file writes shared by the trace writer and dlperf-reduce:
// where a path really lives (symlinks followed), which file system a failed write filled,
// the identity of a file (device and inode, not its name), its attributes carried over to a
// replacement, and writing a file whole or not at all (temporary file, then rename).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <compare>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

namespace dlperf {

// `path` with every symlink followed, including a dangling last one (the file it would
// create). Relative link targets are taken from the link's directory. Throws Error(usage) on
// a symlink loop.
std::string resolve_symlinks(const std::string& path);

// "/scratch (lustre)": mount point and type of the file system holding `path` (or, when it
// does not exist, its directory). "" when /proc/self/mountinfo cannot say.
std::string describe_filesystem(const std::string& path);

// All of `in` when it holds at most `limit` bytes; nothing when it holds more (or never ends:
// /dev/zero given as a profile read for ever, its memory growing), so the caller refuses it.
std::optional<std::string> read_at_most(std::istream& in, size_t limit);

// "812 KiB", "3.2 GiB": sizes in messages.
std::string human_bytes(unsigned long long bytes);

// ENOSPC or EDQUOT: the write failed for lack of space (or quota), not for a broken file.
inline bool is_out_of_space(int err) { return err == ENOSPC || err == EDQUOT; }

// One line for a failed write of `file` (errno `err`, 0 when unknown), naming the file
// system when it is full: "no space left on /scratch (lustre) writing results.h5.tmp".
std::string write_failure_message(const std::string& file, int err, const std::string& doing = "writing");

// Device and inode of an existing file (symlinks followed); empty when it does not exist.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  auto operator<=>(const FileId&) const = default;
};
std::optional<FileId> file_id(const std::string& path);

// Gives the file open as `to_fd` the owner (where permitted), group, permission bits and
// POSIX access ACL of `from` (stat'ed as `st`). Throws Error(fault) naming `to_path` when the
// group or the ACL cannot be kept (a replacement must not silently widen or narrow access).
void copy_file_attributes(const std::string& from, const struct stat& st, int to_fd, const std::string& to_path);

// Creates `path` (which must not exist) with `data`, the owner, group, mode and ACL of `like`
// (stat'ed as `like_st`; none when null), synced and closed, every step checked. Throws
// Error(fault) with write_failure_message; the caller removes what is left.
void write_new_file(const std::string& path, std::string_view data, const std::string& like = "",
                    const struct stat* like_st = nullptr);

// Writes `contents` to `path` whole or not at all: into ".<name>.tmp.<host>.<pid>" in the
// target's directory (symlinks followed), flushed, synced, given the old file's mode, group
// and ACL, then renamed over it. On any failure the old file is untouched, the temporary
// removed, and Error(fault) thrown with one line (write_failure_message). Temporaries that
// killed writers on this host left for the same file are removed first.
void write_file_atomically(const std::string& path, const std::string& contents);

// "is write-protected (mode 0444)" for an existing file nobody may write or the caller may not
// (stat'ed as `st`), else "". Files are replaced by rename, which needs only the folder's
// permission: without this check a file its owner made read-only would be rewritten all the
// same. Root is refused too when no write bit is set (as rm asks before removing one).
std::string write_protection(const std::string& path, const struct stat& st);

// Why `path` cannot name an output file, or "": its last part is empty (a trailing '/'), only
// blanks, or holds a control character or invalid UTF-8 (a newline in a results file's name
// breaks every script and job log that lists it).
std::string file_name_problem(const std::string& path);

// Why write_file_atomically(path) would fail before writing a byte, or "" when it would not
// (as far as can be told in advance): file_name_problem, the target exists and is not a regular file or is
// write-protected (no write permission; refused for root too), or its folder is missing or not
// writable. Checked for every output first, so that a bad one among
// several leaves none of them written.
std::string output_file_problem(const std::string& path);

// Flushes std::cout and returns "" when everything printed reached it, else one line's
// reason ("cannot write to standard output: No space left on device"). Programs whose printed
// output is a result (a table, a list of files) turn that into exit 3 (issue 27 item 11).
std::string flush_stdout_error();
// For --help and --version: 0 when what was printed reached standard output, else the reason
// on stderr as "PROGRAM: ..." and 3 (`dlperf-x --help > /dev/full` exited 0 having printed nothing).
int exit_after_printing(const char* program);

}  // namespace dlperf
