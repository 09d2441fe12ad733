// Core pinning plans on machines this test does not run on: hwloc synthetic topologies
// (PU numbers follow the tree: "pack:2 core:4 pu:2" has PUs 0,1 on core 0 ... 14,15 on core 7).
// The hand-written pinning this replaced sliced the CPU-id list: 2 ranks x 2 threads on two
// sockets got PUs {0,1} and {2,3}, i.e. SMT siblings of one core, both ranks on socket 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "comm/core_pinning.h"
#include "comm/topology.h"
#include "core/error.h"

namespace dlperf {
namespace {

using Sets = std::vector<std::vector<int>>;

std::vector<int> range(int first, int last) {  // [first, last]
  std::vector<int> v(static_cast<size_t>(last - first + 1));
  std::iota(v.begin(), v.end(), first);
  return v;
}

PinPlan plan(const Topology& t, int ranks, int threads, Sets near = {}) {
  PinRequest r;
  r.threads = threads;
  r.bindings.assign(static_cast<size_t>(ranks), all_pus(t));
  r.near = std::move(near);
  return plan_pinning(t, r);
}

std::string usage_error_of(const Topology& t, const PinRequest& r) {
  try {
    plan_pinning(t, r);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    return e.what();
  }
  ADD_FAILURE() << "expected a usage error";
  return "";
}

TEST(Topology, SyntheticCoresInTreeOrder) {
  const auto t = Topology::synthetic("pack:2 numa:2 core:2 pu:2");
  const auto cores = cores_of(t, all_pus(t));
  ASSERT_EQ(cores.size(), 8u);
  EXPECT_EQ(cores[0].pus, (std::vector<int>{0, 1}));
  EXPECT_EQ(cores[5].package, 1);
  EXPECT_EQ(cores[5].numa, 2);
  EXPECT_EQ(cores_of(t, {3, 4, 5}).size(), 2u);  // cores 1 (PU 3) and 2 (PUs 4, 5)
  EXPECT_EQ(cores_of(t, {3, 4, 5})[1].pus, (std::vector<int>{4, 5}));
}

TEST(CorePinning, OneThreadPerCoreAndRanksSpreadOverSockets) {
  const auto t = Topology::synthetic("pack:2 core:4 pu:2");
  const PinPlan p = plan(t, 2, 2);
  EXPECT_EQ(p.pus, (Sets{{0, 2}, {8, 10}})) << p.how;  // cores 0,1 of socket 0; cores 4,5 of socket 1
  EXPECT_FALSE(p.own_sets);  // one set shared by the node's ranks: their spare cores are split
}

TEST(CorePinning, SlicesStayInsideNumaNodes) {
  const auto t = Topology::synthetic("pack:1 numa:2 core:4 pu:1");
  const PinPlan p = plan(t, 4, 2);
  EXPECT_EQ(p.pus, (Sets{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  const auto cores = cores_of(t, all_pus(t));
  for (const auto& rank : p.pus) EXPECT_EQ(cores[static_cast<size_t>(rank.front())].numa, cores[static_cast<size_t>(rank.back())].numa);
}

TEST(CorePinning, HardwareThreadsOnlyWhenCoresAreTooFew) {
  const auto t = Topology::synthetic("pack:1 core:2 pu:2");
  EXPECT_EQ(plan(t, 2, 1).pus, (Sets{{0}, {2}}));
  const PinPlan p = plan(t, 2, 2);
  EXPECT_EQ(p.pus, (Sets{{0, 1}, {2, 3}})) << p.how;
  EXPECT_NE(p.how.find("hardware thread"), std::string::npos) << p.how;
}

TEST(CorePinning, TooManyThreadsIsAUsageError) {
  const auto t = Topology::synthetic("pack:1 core:2 pu:1");
  PinRequest r;
  r.threads = 2;
  r.bindings.assign(2, all_pus(t));
  const std::string what = usage_error_of(t, r);
  EXPECT_NE(what.find("2 ranks x 2 threads need 4 cores but this node allows 2 cores"), std::string::npos) << what;
  r.threads = -1;
  EXPECT_NE(usage_error_of(t, r).find("--threads must be at least 1"), std::string::npos);
}

// --threads 0 under --pin-threads: ranks sharing the node's set (mpirun --bind-to none) took its
// every CPU each and were refused ("2 ranks x 16 threads need 32 cores"); now each takes its
// share of the cores, less the cores left to its image loader.
TEST(CorePinning, AutomaticThreadsTakeTheRanksShare) {
  const auto t = Topology::synthetic("pack:2 core:4 pu:2");
  PinPlan p = plan(t, 2, 0);
  EXPECT_EQ(p.pus, (Sets{{0, 2, 4, 6}, {8, 10, 12, 14}})) << p.how;
  EXPECT_NE(p.how.find("2 ranks x 4 cores, spread over 8 cores in topology order (--threads 0: equal shares)"), std::string::npos) << p.how;
  EXPECT_EQ(plan(t, 3, 0).pus, (Sets{{0, 2}, {4, 6}, {8, 10}}));        // 8 cores / 3: 2 each
  EXPECT_EQ(plan(t, 16, 0).pus.back(), (std::vector<int>{15}));        // more ranks than cores: hardware threads
  PinRequest r;
  r.threads = 0;
  r.spare = 1;
  r.bindings.assign(2, all_pus(t));
  EXPECT_EQ(plan_pinning(t, r).pus, (Sets{{0, 2, 4}, {8, 10, 12}}));  // one core each left to the loader
  r.bindings.assign(8, all_pus(t));
  EXPECT_EQ(plan_pinning(t, r).pus.size(), 8u);                        // 1 core each: at least one thread
  // Sets of their own: every core of each (SMT siblings left out), less the spare; counts may differ.
  r.bindings = {range(0, 5), range(8, 15)};
  p = plan_pinning(t, r);
  EXPECT_EQ(p.pus, (Sets{{0, 2}, {8, 10, 12}})) << p.how;
  EXPECT_NE(p.how.find("2 ranks x 2 to 3 threads, each within the CPU set the launcher bound it to (--threads 0)"), std::string::npos) << p.how;
}

TEST(CorePinning, NearTheirGpus) {
  const auto t = Topology::synthetic("pack:2 core:4 pu:1");
  // GPUs 0 and 1 hang off socket 1, GPUs 2 and 3 off socket 0.
  const Sets near{range(4, 7), range(4, 7), range(0, 3), range(0, 3)};
  const PinPlan p = plan(t, 4, 2, near);
  EXPECT_EQ(p.pus, (Sets{{4, 5}, {6, 7}, {0, 1}, {2, 3}})) << p.how;
  EXPECT_NE(p.how.find("near its GPU"), std::string::npos) << p.how;
  EXPECT_EQ(plan(t, 4, 2).pus, (Sets{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));  // locality unknown
}

TEST(CorePinning, LocalityThatDoesNotFitFallsBackToSpreading) {
  const auto t = Topology::synthetic("pack:2 core:4 pu:1");
  const PinPlan p = plan(t, 4, 2, Sets(4, range(0, 3)));  // 8 threads near 4 cores
  EXPECT_EQ(p.pus, (Sets{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_NE(p.how.find("too few cores near the GPUs"), std::string::npos) << p.how;
}

TEST(CorePinning, LauncherBindingsAreKeptWhenDisjoint) {
  const auto t = Topology::synthetic("pack:2 core:4 pu:2");
  PinRequest r;
  r.threads = 2;
  r.bindings = {range(0, 5), range(8, 13)};  // srun --cpu-bind: 3 cores each
  EXPECT_EQ(plan_pinning(t, r).pus, (Sets{{0, 2}, {8, 10}}));
  // What a rank leaves free is its own (its loader's), not a share of the node's.
  EXPECT_TRUE(plan_pinning(t, r).own_sets);
  r.threads = 4;  // 4 > 3 cores: SMT siblings of its own cores
  EXPECT_EQ(plan_pinning(t, r).pus, (Sets{{0, 1, 2, 3}, {8, 9, 10, 11}}));
  r.threads = 7;
  EXPECT_NE(usage_error_of(t, r).find("local rank 0 is bound by the launcher to 6 hardware threads, fewer than --threads 7"),
            std::string::npos);
  r.threads = 1;
  r.bindings = {range(0, 5), range(4, 9)};
  EXPECT_NE(usage_error_of(t, r).find("overlapping"), std::string::npos);
}

TEST(CorePinning, PlansAreDisjointAndRespectTheBinding) {
  std::mt19937 rng(7);
  for (const char* desc : {"pack:2 numa:2 core:3 pu:2", "pack:1 core:5 pu:1", "pack:4 core:2 pu:4"}) {
    const auto t = Topology::synthetic(desc);
    const auto all = all_pus(t);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<int> allowed;
      for (int pu : all)
        if (rng() % 4 != 0) allowed.push_back(pu);
      const int ranks = 1 + static_cast<int>(rng() % 4), threads = 1 + static_cast<int>(rng() % 3);
      if (allowed.size() < static_cast<size_t>(ranks * threads)) continue;
      PinRequest r;
      r.threads = threads;
      r.bindings.assign(static_cast<size_t>(ranks), allowed);
      const PinPlan p = plan_pinning(t, r);
      std::vector<int> used;
      for (const auto& s : p.pus) {
        EXPECT_EQ(s.size(), static_cast<size_t>(threads));
        used.insert(used.end(), s.begin(), s.end());
      }
      std::sort(used.begin(), used.end());
      EXPECT_EQ(std::adjacent_find(used.begin(), used.end()), used.end()) << desc << ": two ranks share a PU";
      EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), used.begin(), used.end())) << desc << ": outside the binding";
    }
  }
}

TEST(Topology, PciLocalityFromSysfs) {
  const auto dir = std::filesystem::temp_directory_path() / ("dlperf-sysfs-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir / "bus/pci/devices/0000:3b:00.0");
  std::ofstream(dir / "bus/pci/devices/0000:3b:00.0/local_cpulist") << "0-3,8-11\n";
  const auto near = pci_local_pus({0, 0x3b, 0}, dir.string());
  ASSERT_TRUE(near.has_value());
  EXPECT_EQ(*near, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_FALSE(pci_local_pus({0, 0x3c, 0}, dir.string()).has_value());
  std::filesystem::remove_all(dir);
}

TEST(Topology, ThisMachine) {
  const auto t = Topology::this_machine();
  const auto bound = thread_binding(t);
  ASSERT_FALSE(bound.empty());
  EXPECT_FALSE(cores_of(t, bound).empty());
}

}  // namespace
}  // namespace dlperf
