// The binding a rank records and checks (issue 27 item 1), on a hand-made sysfs tree: two NUMA
// nodes of four CPUs each, a GPU and an InfiniBand adapter on node 1, another adapter on node 0. A rank bound to node 0's
// cores gets a warning naming the far GPU and NIC; one on node 1's does not; the text lists
// cores, GPU and NIC with their nodes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "train/cluster/rank_binding.h"

namespace dlperf {
namespace {

namespace fs = std::filesystem;

struct FakeSysfs {
  fs::path root = fs::temp_directory_path() / ("dlperf_sysfs_" + std::to_string(::getpid()));
  FakeSysfs() {
    for (int c = 0; c < 8; ++c) fs::create_directories(root / "devices/system/cpu" / ("cpu" + std::to_string(c)) / ("node" + std::to_string(c / 4)));
    fs::create_directories(root / "bus/pci/devices/0000:65:00.0");
    std::ofstream(root / "bus/pci/devices/0000:65:00.0/numa_node") << "1\n";
    fs::create_directories(root / "class/infiniband/mlx5_1/device");
    std::ofstream(root / "class/infiniband/mlx5_1/device/numa_node") << "1\n";
    fs::create_directories(root / "class/infiniband/mlx5_0/device");
    std::ofstream(root / "class/infiniband/mlx5_0/device/numa_node") << "0\n";
  }
  ~FakeSysfs() { fs::remove_all(root); }
};

TEST(RankBinding, GpuOrNicOnAnotherNumaNodeIsNamed) {
  FakeSysfs sys;
  setenv("UCX_NET_DEVICES", "mlx5_1:1", 1);
  unsetenv("NCCL_IB_HCA");
  const RankBinding far = read_rank_binding({0, 1, 2, 3}, "0000:65:00.0", sys.root.string());
  EXPECT_EQ(to_string(far), "cpus 0-3 (numa 0); gpu 0000:65:00.0 (numa 1); nic mlx5_1 (numa 1)");
  const std::string w = binding_warning(far, 3, "node7");
  EXPECT_NE(w.find("rank 3 (node7): its GPU 0000:65:00.0 is on NUMA node 1 and NIC mlx5_1 on NUMA node 1, its cores 0-3 on NUMA node 0"),
            std::string::npos)
      << w;
  const RankBinding near = read_rank_binding({4, 5, 6, 7}, "0000:65:00.0", sys.root.string());
  EXPECT_EQ(binding_warning(near, 0, "node7"), "");
  // NCCL_IB_HCA names a prefix; the CPU backend has no GPU; unknown nodes are not judged.
  unsetenv("UCX_NET_DEVICES");
  setenv("NCCL_IB_HCA", "=mlx5_0", 1);
  const RankBinding cpu = read_rank_binding({0, 2, 3, 8}, "", sys.root.string());
  EXPECT_EQ(to_string(cpu), "cpus 0,2-3,8 (numa 0); nic mlx5_0 (numa 0)");
  EXPECT_EQ(binding_warning(cpu, 0, "n"), "");
  // Several adapters (a profile's UCX_NET_DEVICES=mlx5_1:1,mlx5_0:1, NCCL_IB_HCA=mlx5: every
  // mlx5): the one beside the rank's cores is its own, no warning; the transport's variable first.
  setenv("UCX_NET_DEVICES", "mlx5_1:1,mlx5_0:1", 1);
  unsetenv("NCCL_IB_HCA");
  EXPECT_EQ(to_string(read_rank_binding({0, 1}, "", sys.root.string())), "cpus 0-1 (numa 0); nic mlx5_0 (numa 0)");
  EXPECT_EQ(to_string(read_rank_binding({4, 5}, "", sys.root.string())), "cpus 4-5 (numa 1); nic mlx5_1 (numa 1)");
  // UCX names devices exactly: mlx5_1 is not mlx5_10 (here: not a prefix of mlx5_1's neighbour).
  setenv("UCX_NET_DEVICES", "mlx5:1", 1);
  EXPECT_EQ(to_string(read_rank_binding({0, 1}, "", sys.root.string())), "cpus 0-1 (numa 0); nic mlx5 (numa ?)");
  setenv("NCCL_IB_HCA", "mlx5", 1);
  setenv("UCX_NET_DEVICES", "mlx5_1:1", 1);
  const RankBinding gpu = read_rank_binding({0, 1}, "0000:65:00.0", sys.root.string());
  EXPECT_EQ(to_string(gpu), "cpus 0-1 (numa 0); gpu 0000:65:00.0 (numa 1); nic mlx5_0 (numa 0)");
  EXPECT_EQ(binding_warning(gpu, 0, "n").find("NIC"), std::string::npos);
  unsetenv("UCX_NET_DEVICES");
  unsetenv("NCCL_IB_HCA");
  EXPECT_EQ(binding_warning(read_rank_binding({0}, "0000:99:00.0", sys.root.string()), 0, "n"), "");
  EXPECT_FALSE(current_cpus().empty());
}

}  // namespace
}  // namespace dlperf
