#include "comm/nccl_log.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <istream>
#include <vector>

namespace dlperf {

namespace {
// Process-wide, as NCCL's own settings are.
std::string g_path;
bool g_prepared = false;
bool g_owned = false;
std::string g_user_level;  // the user's NCCL_DEBUG ("" unset): the lines to replay at the end

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::string prepare_nccl_log(const std::string& host) {
  std::string& path = g_path;
  if (g_prepared) return path;
  g_prepared = true;
  const char* debug = std::getenv("NCCL_DEBUG");
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  g_user_level = debug ? upper(debug) : "";
  if (file && *file && (g_user_level == "INFO" || g_user_level == "TRACE")) {
    // The user's own INFO log in a file of theirs: read it there (expand %h and %p).
    std::string p = file;
    for (size_t i = p.find('%'); i != std::string::npos && i + 1 < p.size(); i = p.find('%', i)) {
      const std::string with = p[i + 1] == 'h' ? host : p[i + 1] == 'p' ? std::to_string(getpid()) : "%";
      p.replace(i, 2, with);
      i += with.size();
    }
    path = p;
    g_user_level.clear();  // nothing to replay: NCCL writes where the user asked
    return path;
  }
  const char* tmp = std::getenv("TMPDIR");
  path = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlperf-nccl." + host + "." + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  // INFO and TRACE: the user's subsystems too (replayed below); else only what dlperf reads.
  if (!(g_user_level == "INFO" || g_user_level == "TRACE") || !std::getenv("NCCL_DEBUG_SUBSYS")) setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  if (g_user_level == "TRACE") setenv("NCCL_DEBUG", "TRACE", 1);
  setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  g_owned = true;
  return path;
}

void discard_nccl_log(std::ostream& out) {
  if (!g_owned || g_path.empty()) return;
  if (!g_user_level.empty() && g_user_level != "NONE") {
    std::ifstream in(g_path);
    const bool all = g_user_level == "INFO" || g_user_level == "TRACE";
    for (std::string line; std::getline(in, line);)
      if (all || (g_user_level == "WARN" && line.find(" NCCL WARN ") != std::string::npos) ||
          (g_user_level == "VERSION" && line.rfind("NCCL version", 0) == 0))
        out << line << '\n';
    out.flush();
  }
  unlink(g_path.c_str());
  g_owned = false;
}

void discard_nccl_log() { discard_nccl_log(std::cout); }

std::string parse_nccl_transport(std::istream& log) {
  std::vector<std::string> found;
  const auto add = [&](std::string name) {
    if (std::find(found.begin(), found.end(), name) == found.end()) found.push_back(std::move(name));
  };
  bool roce = false;
  std::string line;
  while (std::getline(log, line)) {
    if (line.find("NCCL INFO") == std::string::npos) continue;
    if (line.find("NET/IB : Using") != std::string::npos && line.find("/RoCE") != std::string::npos) roce = true;
    const auto via = line.find(" via ");
    if (via == std::string::npos) continue;
    std::string path = line.substr(via + 5);
    path = path.substr(0, path.find_first_of(" \t\r"));
    const auto slash = path.find('/');
    const std::string kind = path.substr(0, slash);
    if (kind == "NET" && slash != std::string::npos) {
      const std::string net = path.substr(slash + 1, path.find('/', slash + 1) - slash - 1);
      add(net == "IB" && roce ? "RoCE" : net);
    } else if (kind == "COLLNET") {
      add("CollNet");
    } else if (!kind.empty()) {
      add(kind);  // P2P, SHM
    }
  }
  std::string out;
  for (const auto& f : found) out += (out.empty() ? "" : ", ") + f;
  return out;
}

std::string nccl_transport_from_file(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  return in ? parse_nccl_transport(in) : "";
}

}  // namespace dlperf
