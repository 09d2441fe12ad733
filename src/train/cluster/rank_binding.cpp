// Reads a rank's binding from sysfs (see rank_binding.h).
#include "train/cluster/rank_binding.h"

#include <sched.h>

#include <algorithm>
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

// The first adapter the job's settings name: UCX_NET_DEVICES=mlx5_0:1,... or
// NCCL_IB_HCA=[^|=]mlx5_0[:1],... (a prefix, matched against the node's adapters).
std::string named_nic(const std::string& sysfs) {
  std::string want;
  for (const char* var : {"UCX_NET_DEVICES", "NCCL_IB_HCA"}) {
    const char* v = std::getenv(var);
    if (!v || !*v || *v == '^') continue;  // unset, or an exclusion list
    want = v;
    if (want[0] == '=') want.erase(0, 1);
    want = want.substr(0, want.find(','));
    want = want.substr(0, want.find(':'));
    if (want == "all" || want.empty()) continue;
    break;
  }
  if (want.empty()) return "";
  std::vector<std::string> adapters;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "class/infiniband", ec)) adapters.push_back(e.path().filename().string());
  std::sort(adapters.begin(), adapters.end());
  for (const auto& a : adapters)
    if (a.rfind(want, 0) == 0) return a;
  return want;  // named but not an InfiniBand adapter here (an Ethernet device): no NUMA node known
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
  b.nic = named_nic(sysfs);
  if (!b.nic.empty()) b.nic_numa = read_int_file(fs::path(sysfs) / "class/infiniband" / b.nic / "device/numa_node");
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
         ": every transfer crosses the socket link (bind with srun --cpu-bind=cores --gpu-bind=closest --distribution=block:block)";
}

}  // namespace dlperf
