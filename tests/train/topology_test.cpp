// The GPU/NIC topology text of a trace (train/cluster/gpu_topology.h), from a two-socket machine
// described in hwloc's XML: GPU0 and an InfiniBand adapter behind one PCIe switch of socket 0,
// GPU2 on socket 0's host bridge, GPU1 on socket 1. The relations must be those
// nvidia-smi topo -m prints for such a machine.
#include <gtest/gtest.h>

#include <sstream>

#include "backend/backend.h"
#include "train/cluster/cluster.h"
#include "train/cluster/gpu_topology.h"

namespace dlperf {
namespace {

const char* kTwoSockets = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
      </object>
      <object type="Bridge" gp_index="20" bridge_type="0-1" depth="0" bridge_pci="0000:[00-0f]">
        <object type="Bridge" gp_index="21" bridge_type="1-1" depth="1" bridge_pci="0000:[01-02]" pci_busid="0000:00:01.0" pci_type="0604 [10b5:8747] [0000:0000] ca" pci_link_speed="0.000000">
          <object type="PCIDev" gp_index="22" pci_busid="0000:01:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
          <object type="PCIDev" gp_index="23" pci_busid="0000:02:00.0" pci_type="0207 [15b3:101b] [15b3:0007] 00" pci_link_speed="0.000000">
            <object type="OSDev" gp_index="24" name="mlx5_0" osdev_type="3"/>
          </object>
        </object>
        <object type="PCIDev" gp_index="25" pci_busid="0000:03:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="7">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8" local_memory="1073741824"/>
      <object type="Core" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10"/>
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11"/>
      </object>
      <object type="Bridge" gp_index="30" bridge_type="0-1" depth="0" bridge_pci="0000:[80-8f]">
        <object type="PCIDev" gp_index="31" pci_busid="0000:81:00.0" pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="0.000000"/>
      </object>
    </object>
  </object>
</topology>
)";

// Rows of the matrix by name: the cells after the name.
std::vector<std::string> row(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ') continue;  // the header row starts with the empty corner cell
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first != name) continue;
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    return cells;
  }
  return {};
}

TEST(GpuTopology, RelationsAsNvidiaSmiPrintsThem) {
  const std::string t = describe_gpu_topology_xml({"0000:01:00.0", "0000:81:00.0", "0000:03:00.0"}, kTwoSockets);
  ASSERT_FALSE(t.empty()) << "hwloc did not load the XML";
  std::cout << t;
  // columns: GPU0 GPU1 GPU2 mlx5_0, then CPU affinity and NUMA for GPUs
  EXPECT_EQ(row(t, "GPU0"), (std::vector<std::string>{"X", "SYS", "PHB", "PIX", "0-1", "0"}));
  EXPECT_EQ(row(t, "GPU1"), (std::vector<std::string>{"SYS", "X", "SYS", "SYS", "2-3", "1"}));
  EXPECT_EQ(row(t, "GPU2"), (std::vector<std::string>{"PHB", "SYS", "X", "PHB", "0-1", "0"}));
  EXPECT_EQ(row(t, "mlx5_0"), (std::vector<std::string>{"PIX", "SYS", "PHB", "X"}));
  EXPECT_NE(t.find("NVLink not shown"), std::string::npos);
}

TEST(GpuTopology, NoGpuNoText) {
  EXPECT_EQ(describe_gpu_topology_xml({"0000:99:00.0"}, kTwoSockets), "");
  EXPECT_EQ(describe_gpu_topology({}), "");
  EXPECT_EQ(describe_gpu_topology_xml({"0000:01:00.0"}, "not xml"), "");
}

TEST(DeviceFacts, CpuBackendAddsNothing) {
  RunInfo info;
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  add_device_facts(info, be->device_facts());
  EXPECT_EQ(info.gpu_model, "");
  EXPECT_EQ(info.gpu_memory_bytes, 0);
  EXPECT_EQ(info.gpu_topology, "");
  EXPECT_TRUE(info.versions.empty());
}

TEST(DeviceFacts, TransportsOfEveryRankJoinDistinct) {
  EXPECT_EQ(join_distinct({"P2P", "P2P, IB", "", "SHM, IB"}), "P2P, IB, SHM");
  EXPECT_EQ(join_distinct({"", ""}), "");
}

TEST(DeviceFacts, PerRankValuesNameEveryRankWhenTheyDiffer) {
  EXPECT_EQ(per_rank_value({"avx2", "avx2", "avx2"}), "avx2");
  EXPECT_EQ(per_rank_value({}), "");
  EXPECT_EQ(per_rank_value({"amx", "amx", "avx2", "amx", "amx", "amx", "avx2"}), "amx (ranks 0-1, 3-5); avx2 (ranks 2, 6)");
  EXPECT_EQ(per_rank_value({"a", "b"}), "a (rank 0); b (rank 1)");
}

}  // namespace
}  // namespace dlperf
