// This node's processor topology through hwloc: packages, NUMA nodes, cores and hardware
// threads (PUs), which of them this thread may run on, and which are close to a PCI device
// (a GPU). Used to pin ranks (core_pinning.h) and to describe the node. RAII over hwloc's
// topology and bitmap handles; every hwloc status goes through DLPERF_CHECK_HWLOC.
// PU numbers are the operating system's CPU ids (as in sched_setaffinity, /proc/cpuinfo).
#pragma once

#include <hwloc.h>

#include <optional>
#include <string>
#include <vector>

namespace dlperf {

class HwlocBitmap {
 public:
  HwlocBitmap();
  explicit HwlocBitmap(const std::vector<int>& pus);
  ~HwlocBitmap();
  HwlocBitmap(const HwlocBitmap&) = delete;
  HwlocBitmap& operator=(const HwlocBitmap&) = delete;

  hwloc_bitmap_t get() const { return bitmap_; }
  std::vector<int> pus() const;  // ascending OS indices

 private:
  hwloc_bitmap_t bitmap_ = nullptr;
};

class Topology {
 public:
  static Topology this_machine();
  // hwloc's synthetic description, e.g. "pack:2 numa:1 core:4 pu:2" (OS indices 0..15 in
  // that order): lets tests plan for machines they do not run on. Cannot bind.
  static Topology synthetic(const std::string& description);
  ~Topology();
  Topology(Topology&& o) noexcept;
  Topology& operator=(Topology&&) = delete;
  Topology(const Topology&) = delete;

  hwloc_topology_t get() const { return topo_; }
  bool is_this_machine() const { return this_machine_; }

 private:
  Topology(hwloc_topology_t t, bool this_machine) : topo_(t), this_machine_(this_machine) {}
  hwloc_topology_t topo_ = nullptr;
  bool this_machine_ = false;
};

// One core with at least one allowed PU: where it sits and its allowed PUs, ascending.
struct CoreSlot {
  int package = 0;        // logical index of its package (socket)
  int numa = 0;           // logical index of its NUMA node (0 when the machine reports none)
  std::vector<int> pus;   // allowed hardware threads of this core (OS indices)
};

// The cores holding at least one PU of `allowed`, in topology order (package, NUMA node, core).
std::vector<CoreSlot> cores_of(const Topology& topo, const std::vector<int>& allowed);

// Every PU of the machine (its complete cpuset), ascending OS indices.
std::vector<int> all_pus(const Topology& topo);

// The PUs the calling thread may run on: its binding (srun --cpu-bind, taskset, a cgroup)
// within the machine's allowed set.
std::vector<int> thread_binding(const Topology& topo);

// Binds the calling thread (and the threads it creates afterwards) to `pus`.
void bind_thread(const Topology& topo, const std::vector<int>& pus);

// A PCI device's address (a GPU's: cudaDevAttrPciDomainId, BusId, DeviceId).
struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0;
};

// The PUs the kernel reports as local to a PCI device (sysfs local_cpus), or nothing when it
// cannot be known here (no sysfs entry: a container, another OS). `sysfs` is for tests.
std::optional<std::vector<int>> pci_local_pus(const PciAddress& address, const std::string& sysfs = "/sys");

}  // namespace dlperf
