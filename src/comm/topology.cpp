// Topology through hwloc; see topology.h.
#include "comm/topology.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>

#include "core/check.h"
#include "core/error.h"

namespace dlperf {

HwlocBitmap::HwlocBitmap() : bitmap_(hwloc_bitmap_alloc()) {
  if (!bitmap_) throw Error(ErrorKind::library, "hwloc_bitmap_alloc: out of memory");
}

HwlocBitmap::HwlocBitmap(const std::vector<int>& pus) : HwlocBitmap() {
  for (int pu : pus) DLPERF_CHECK_HWLOC(hwloc_bitmap_set(bitmap_, static_cast<unsigned>(pu)));
}

HwlocBitmap::~HwlocBitmap() { hwloc_bitmap_free(bitmap_); }

std::vector<int> HwlocBitmap::pus() const {
  std::vector<int> out;
  if (hwloc_bitmap_weight(bitmap_) < 0) throw Error(ErrorKind::internal, "infinite hwloc bitmap");
  for (int i = hwloc_bitmap_first(bitmap_); i >= 0; i = hwloc_bitmap_next(bitmap_, i)) out.push_back(i);
  return out;
}

namespace {

hwloc_topology_t new_topology() {
  hwloc_topology_t t = nullptr;
  DLPERF_CHECK_HWLOC(hwloc_topology_init(&t));
  return t;
}

// The logical index of the closest ancestor of `obj` of `type`, 0 when there is none.
int ancestor_index(hwloc_topology_t topo, hwloc_obj_t obj, hwloc_obj_type_t type) {
  hwloc_obj_t a = hwloc_get_ancestor_obj_by_type(topo, type, obj);
  return a ? static_cast<int>(a->logical_index) : 0;
}

// NUMA nodes are memory children in hwloc 2: the one whose cpuset covers the core.
int numa_index(hwloc_topology_t topo, hwloc_obj_t core) {
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    if (node->cpuset && hwloc_bitmap_isincluded(core->cpuset, node->cpuset)) return static_cast<int>(node->logical_index);
  }
  return 0;
}

}  // namespace

Topology Topology::this_machine() {
  hwloc_topology_t t = new_topology();
  Topology topo(t, true);
  DLPERF_CHECK_HWLOC(hwloc_topology_load(t));
  return topo;
}

Topology Topology::synthetic(const std::string& description) {
  hwloc_topology_t t = new_topology();
  Topology topo(t, false);
  if (hwloc_topology_set_synthetic(t, description.c_str()) != 0)
    throw Error(ErrorKind::usage, "hwloc cannot parse the synthetic topology '" + description + "'");
  DLPERF_CHECK_HWLOC(hwloc_topology_load(t));
  return topo;
}

Topology::~Topology() {
  if (topo_) hwloc_topology_destroy(topo_);
}

Topology::Topology(Topology&& o) noexcept : topo_(std::exchange(o.topo_, nullptr)), this_machine_(o.this_machine_) {}

std::vector<CoreSlot> cores_of(const Topology& topo, const std::vector<int>& allowed) {
  const HwlocBitmap allow(allowed);
  std::vector<CoreSlot> slots;
  hwloc_topology_t t = topo.get();
  // Cores in logical order follow the tree: package by package, NUMA node by NUMA node.
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    HwlocBitmap mine;
    DLPERF_CHECK_HWLOC(hwloc_bitmap_and(mine.get(), core->cpuset, allow.get()));
    if (hwloc_bitmap_iszero(mine.get())) continue;
    slots.push_back({ancestor_index(t, core, HWLOC_OBJ_PACKAGE), numa_index(t, core), mine.pus()});
  }
  return slots;
}

std::vector<int> all_pus(const Topology& topo) {
  HwlocBitmap all;
  DLPERF_CHECK_HWLOC(hwloc_bitmap_copy(all.get(), hwloc_topology_get_complete_cpuset(topo.get())));
  return all.pus();
}

std::vector<int> thread_binding(const Topology& topo) {
  HwlocBitmap bound;
  DLPERF_CHECK_HWLOC(hwloc_get_cpubind(topo.get(), bound.get(), HWLOC_CPUBIND_THREAD));
  DLPERF_CHECK_HWLOC(hwloc_bitmap_and(bound.get(), bound.get(), hwloc_topology_get_allowed_cpuset(topo.get())));
  return bound.pus();
}

void bind_thread(const Topology& topo, const std::vector<int>& pus) {
  if (!topo.is_this_machine()) throw Error(ErrorKind::internal, "bind_thread on a synthetic topology");
  const HwlocBitmap set(pus);
  DLPERF_CHECK_HWLOC(hwloc_set_cpubind(topo.get(), set.get(), HWLOC_CPUBIND_THREAD));
}

std::optional<std::vector<int>> pci_local_pus(const PciAddress& a, const std::string& sysfs) {
  char name[32];
  std::snprintf(name, sizeof name, "%04x:%02x:%02x.0", a.domain, a.bus, a.device);
  std::ifstream in(sysfs + "/bus/pci/devices/" + name + "/local_cpulist");
  if (!in) return std::nullopt;
  const std::string list((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  HwlocBitmap set;
  if (hwloc_bitmap_list_sscanf(set.get(), list.c_str()) != 0 || hwloc_bitmap_iszero(set.get())) return std::nullopt;
  return set.pus();
}

}  // namespace dlperf
