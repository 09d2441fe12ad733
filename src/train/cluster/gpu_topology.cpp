#include "train/cluster/gpu_topology.h"

#include <hwloc.h>

#include <algorithm>
#include <sstream>
#include <vector>

namespace dlperf {
namespace {

// RAII over an hwloc topology with its I/O devices.
class IoTopology {
 public:
  explicit IoTopology(const std::string* xml) {
    if (hwloc_topology_init(&t_) != 0) {
      t_ = nullptr;
      return;
    }
    hwloc_topology_set_io_types_filter(t_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if ((xml && hwloc_topology_set_xmlbuffer(t_, xml->data(), static_cast<int>(xml->size() + 1)) != 0) || hwloc_topology_load(t_) != 0)
      close();
  }
  ~IoTopology() { close(); }
  IoTopology(const IoTopology&) = delete;
  IoTopology& operator=(const IoTopology&) = delete;
  hwloc_topology_t get() const { return t_; }

 private:
  void close() {
    if (t_) hwloc_topology_destroy(t_);
    t_ = nullptr;
  }
  hwloc_topology_t t_ = nullptr;
};

bool is_host_bridge(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_BRIDGE && o->attr && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

// The nearest object that is an ancestor of both (hwloc_get_common_ancestor_obj compares
// depths, which I/O objects do not have: it is for the normal tree only).
hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
  std::vector<hwloc_obj_t> up;
  for (hwloc_obj_t p = a; p; p = p->parent) up.push_back(p);
  for (hwloc_obj_t p = b; p; p = p->parent)
    if (std::find(up.begin(), up.end(), p) != up.end()) return p;
  return nullptr;
}

// The nvidia-smi relation between two PCI devices.
std::string relation(hwloc_topology_t t, hwloc_obj_t a, hwloc_obj_t b) {
  hwloc_obj_t common = common_ancestor(a, b);
  if (common && common->type == HWLOC_OBJ_BRIDGE && !is_host_bridge(common)) {
    const auto bridges_below = [&](hwloc_obj_t o) {  // bridges between o and `common`
      int n = 0;
      for (hwloc_obj_t p = o->parent; p && p != common; p = p->parent) n += p->type == HWLOC_OBJ_BRIDGE;
      return n;
    };
    return bridges_below(a) == 0 && bridges_below(b) == 0 ? "PIX" : "PXB";
  }
  if (common && is_host_bridge(common)) return "PHB";
  hwloc_obj_t na = hwloc_get_non_io_ancestor_obj(t, a), nb = hwloc_get_non_io_ancestor_obj(t, b);
  if (na && nb && na->nodeset && nb->nodeset && hwloc_bitmap_weight(na->nodeset) == 1 && hwloc_bitmap_isequal(na->nodeset, nb->nodeset))
    return "NODE";
  return "SYS";
}

std::string bitmap_list(hwloc_const_bitmap_t b) {
  if (!b) return "";
  char buf[256] = {};
  hwloc_bitmap_list_snprintf(buf, sizeof buf, b);
  return buf;
}

std::string describe(hwloc_topology_t t, const std::vector<std::string>& gpu_bus_ids) {
  struct Dev {
    std::string name;
    hwloc_obj_t pci;
    bool gpu;
  };
  std::vector<Dev> devs;
  for (size_t i = 0; i < gpu_bus_ids.size(); ++i) {
    hwloc_obj_t pci = gpu_bus_ids[i].empty() ? nullptr : hwloc_get_pcidev_by_busidstring(t, gpu_bus_ids[i].c_str());
    if (pci) devs.push_back({"GPU" + std::to_string(i), pci, true});
  }
  if (devs.empty()) return "";
  // NICs: the RDMA adapters NCCL would use, else the PCI network interfaces.
  for (hwloc_obj_osdev_type_t kind : {HWLOC_OBJ_OSDEV_OPENFABRICS, HWLOC_OBJ_OSDEV_NETWORK}) {
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, nullptr); o; o = hwloc_get_next_osdev(t, o)) {
      if (o->attr->osdev.type != kind || !o->parent || o->parent->type != HWLOC_OBJ_PCI_DEVICE) continue;
      devs.push_back({o->name ? o->name : "nic", o->parent, false});
    }
    if (devs.size() > static_cast<size_t>(std::count_if(devs.begin(), devs.end(), [](const Dev& d) { return d.gpu; }))) break;
  }
  size_t width = 6;
  for (const auto& d : devs) width = std::max(width, d.name.size() + 2);
  std::ostringstream os;
  const auto cell = [&](const std::string& s) { os << s << std::string(width > s.size() ? width - s.size() : 1, ' '); };
  cell("");
  for (const auto& d : devs) cell(d.name);
  os << "CPU affinity  NUMA\n";
  for (const auto& row : devs) {
    cell(row.name);
    for (const auto& col : devs) cell(&row == &col ? "X" : relation(t, row.pci, col.pci));
    if (row.gpu) {
      hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(t, row.pci);
      os << bitmap_list(local ? local->cpuset : nullptr) << "  " << bitmap_list(local ? local->nodeset : nullptr);
    }
    os << '\n';
  }
  os << "X self; PIX one PCIe bridge; PXB several PCIe bridges; PHB a PCIe host bridge; NODE within a NUMA node; "
        "SYS across NUMA nodes (PCI paths from hwloc; NVLink not shown)\n";
  return os.str();
}

}  // namespace

std::string describe_gpu_topology(const std::vector<std::string>& gpu_bus_ids) {
  if (gpu_bus_ids.empty()) return "";
  IoTopology t(nullptr);
  return t.get() ? describe(t.get(), gpu_bus_ids) : "";
}

std::string describe_gpu_topology_xml(const std::vector<std::string>& gpu_bus_ids, const std::string& xml) {
  IoTopology t(&xml);
  return t.get() ? describe(t.get(), gpu_bus_ids) : "";
}

}  // namespace dlperf
