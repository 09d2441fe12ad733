// Reads a rank's binding from sysfs (see rank_binding.h).
#include "train/cluster/rank_binding.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace dlperf {
namespace {
namespace fs = std::filesystem;

int read_int_file(const fs::path& p) {
  std::ifstream in(p);
  int v = -1;
  return (in >> v) ? v : -1;
}

// The NUMA node of a CPU: sysfs links cpuN/nodeM.
int cpu_numa_node(int cpu, const std::string& sysfs) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "devices/system/cpu" / ("cpu" + std::to_string(cpu)), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.rfind("node", 0) == 0 && name.find_first_not_of("0123456789", 4) == std::string::npos)
      return std::atoi(name.c_str() + 4);
  }
  return -1;
}

// The adapters the job's settings name, in the order named: UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1
// or NCCL_IB_HCA=[=]mlx5 (prefixes, matched against the node's adapters: "mlx5" is every mlx5
// adapter, of which NCCL takes the nearest to each GPU). The transport's own variable first:
// NCCL's on the GPU backend, UCX's (MPI) on the CPU one. A name that is no InfiniBand adapter
// here (an Ethernet device) is kept as named, with no NUMA node known.
std::vector<std::string> named_nics(const std::string& sysfs, bool gpu) {
  std::vector<std::string> adapters, out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "class/infiniband", ec)) adapters.push_back(e.path().filename().string());
  std::sort(adapters.begin(), adapters.end());
  const std::array<const char*, 2> vars = gpu ? std::array<const char*, 2>{"NCCL_IB_HCA", "UCX_NET_DEVICES"}
                                              : std::array<const char*, 2>{"UCX_NET_DEVICES", "NCCL_IB_HCA"};
  for (const char* var : vars) {
    const char* v = std::getenv(var);
    if (!v || !*v || *v == '^') continue;  // unset, or an exclusion list
    std::string list = v;
    // UCX names devices exactly; NCCL by prefix unless the list starts with '=' (mlx5_1 is not mlx5_10).
    const bool exact = std::string(var) == "UCX_NET_DEVICES" || list[0] == '=';
    if (list[0] == '=') list.erase(0, 1);
    for (size_t from = 0; from <= list.size();) {
      const size_t comma = std::min(list.find(',', from), list.size());
      std::string want = list.substr(from, comma - from);
      want = want.substr(0, want.find(':'));
      from = comma + 1;
      if (want.empty() || want == "all") continue;
      bool matched = false;
      for (const auto& a : adapters)
        if (exact ? a == want : a.rfind(want, 0) == 0) {
          matched = true;
          if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
        }
      if (!matched && std::find(out.begin(), out.end(), want) == out.end()) out.push_back(want);
    }
    if (!out.empty()) break;
  }
  return out;
}

std::string numa_text(int n) { return n < 0 ? "numa ?" : "numa " + std::to_string(n); }

}  // namespace

std::vector<int> current_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

std::string restore_launcher_cpus() {
  const int places = omp_get_num_places();
  if (places <= 0) return "";
  std::set<int> launcher;
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(static_cast<size_t>(std::max(0, omp_get_place_num_procs(p))));
    if (!ids.empty()) omp_get_place_proc_ids(p, ids.data());
    launcher.insert(ids.begin(), ids.end());
  }
  const std::vector<int> now = current_cpus();
  if (launcher.empty() || std::vector<int>(launcher.begin(), launcher.end()) == now) return "";
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : launcher)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return "";
  std::string why;
  for (const char* var : {"OMP_PROC_BIND", "OMP_PLACES"})
    if (const char* v = std::getenv(var)) why += (why.empty() ? "" : " ") + std::string(var) + "=" + v;
  return "note: " + (why.empty() ? std::string("the OpenMP runtime") : why) + " had bound the main thread to cpus " + cpu_list(now) +
         "; dlperf-train counts and binds within the launcher's cpus " + cpu_list({launcher.begin(), launcher.end()}) +
         " (the OpenMP places; the main thread now runs on all of them, the other OpenMP threads keep their places)";
}

RankBinding read_rank_binding(const std::vector<int>& cpus, const std::string& gpu_bus_id, const std::string& sysfs) {
  RankBinding b;
  b.cpus = cpus;
  std::set<int> nodes;
  for (int c : cpus)
    if (const int n = cpu_numa_node(c, sysfs); n >= 0) nodes.insert(n);
  b.cpu_numa.assign(nodes.begin(), nodes.end());
  b.gpu = gpu_bus_id;
  if (!b.gpu.empty()) {
    std::string bus = b.gpu;
    std::transform(bus.begin(), bus.end(), bus.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    b.gpu_numa = read_int_file(fs::path(sysfs) / "bus/pci/devices" / bus / "numa_node");
  }
  // Of several adapters, the rank's own is the one beside its cores, if any is.
  for (const auto& nic : named_nics(sysfs, !b.gpu.empty())) {
    const int numa = read_int_file(fs::path(sysfs) / "class/infiniband" / nic / "device/numa_node");
    const bool near = std::find(b.cpu_numa.begin(), b.cpu_numa.end(), numa) != b.cpu_numa.end();
    if (b.nic.empty() || near) b.nic = nic, b.nic_numa = numa;
    if (near) break;
  }
  return b;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

std::string to_string(const RankBinding& b) {
  std::string nodes;
  for (int n : b.cpu_numa) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
  std::string s = "cpus " + cpu_list(b.cpus) + " (numa " + (nodes.empty() ? "?" : nodes) + ")";
  if (!b.gpu.empty()) s += "; gpu " + b.gpu + " (" + numa_text(b.gpu_numa) + ")";
  if (!b.nic.empty()) s += "; nic " + b.nic + " (" + numa_text(b.nic_numa) + ")";
  return s;
}

std::string binding_warning(const RankBinding& b, int rank, const std::string& host) {
  if (b.cpu_numa.empty()) return "";
  const auto far = [&](int n) { return n >= 0 && std::find(b.cpu_numa.begin(), b.cpu_numa.end(), n) == b.cpu_numa.end(); };
  std::string what;
  if (far(b.gpu_numa)) what += "GPU " + b.gpu + " is on NUMA node " + std::to_string(b.gpu_numa);
  if (far(b.nic_numa)) what += (what.empty() ? "" : " and ") + ("NIC " + b.nic + " on NUMA node " + std::to_string(b.nic_numa));
  if (what.empty()) return "";
  std::string nodes;
  for (int n : b.cpu_numa) nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
  return "rank " + std::to_string(rank) + " (" + host + "): its " + what + ", its cores " + cpu_list(b.cpus) + " on NUMA node " + nodes +
         ": every transfer crosses the socket link (srun --cpu-bind=cores --distribution=block:block with --cpus-per-task = the node's cores / "
         "its GPUs keeps local rank i beside GPU i)";
}

}  // namespace dlperf
