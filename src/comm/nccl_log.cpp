#include "comm/nccl_log.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <vector>

namespace dlperf {

namespace {
// Process-wide, as NCCL's own settings are.
std::string g_path;
bool g_prepared = false;
bool g_owned = false;
}  // namespace

std::string prepare_nccl_log(const std::string& host) {
  std::string& path = g_path;
  if (g_prepared) return path;
  g_prepared = true;
  const char* debug = std::getenv("NCCL_DEBUG");
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  if (debug) {
    // The user's settings win; their file is usable if it holds INFO lines (expand %h and %p).
    if (!file || std::string(debug) != "INFO") return path;
    std::string p = file;
    for (size_t i = p.find('%'); i != std::string::npos && i + 1 < p.size(); i = p.find('%', i)) {
      const std::string with = p[i + 1] == 'h' ? host : p[i + 1] == 'p' ? std::to_string(getpid()) : "%";
      p.replace(i, 2, with);
      i += with.size();
    }
    path = p;
    return path;
  }
  const char* tmp = std::getenv("TMPDIR");
  path = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlperf-nccl." + host + "." + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  g_owned = true;
  return path;
}

void discard_nccl_log() {
  if (g_owned && !g_path.empty()) unlink(g_path.c_str());
}

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
