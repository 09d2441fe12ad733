// The binding each rank got (issue 27 item 1), recorded in the trace (schema 1.3, per rank
// `rank_binding`) and checked: the cores it may run on and their NUMA nodes, its GPU and the
// network adapter it uses, each with its NUMA node, read from Linux's sysfs:
//
//   "cpus 0-7 (numa 0); gpu 0000:17:00.0 (numa 0); nic mlx5_0 (numa 0)"
//
// A GPU or NIC on another NUMA node than the rank's cores crosses the socket interconnect for
// every transfer: binding_warning() says so in one line (dlperf-train prints it; the generated
// jobs' srun --cpu-bind=cores --distribution=block:block with cpus_per_task = cores / GPUs avoid it).
// The NIC: of the adapters NCCL_IB_HCA (GPU backend) or UCX_NET_DEVICES (CPU backend; the other
// when that one is unset) names, the first beside the rank's cores, else the first ("" when
// neither names one).
#pragma once

#include <string>
#include <vector>

namespace dlperf {

struct RankBinding {
  std::vector<int> cpus;        // the PUs the rank may run on, ascending
  std::vector<int> cpu_numa;    // their NUMA nodes, ascending (empty: unknown)
  std::string gpu;              // PCI bus id, "" on the CPU backend
  int gpu_numa = -1;            // -1: unknown
  std::string nic;              // "mlx5_0", "" when not named
  int nic_numa = -1;
};

// gpu_bus_id: the rank's GPU ("" for none); sysfs: "/sys" (tests give a tree of their own).
RankBinding read_rank_binding(const std::vector<int>& cpus, const std::string& gpu_bus_id, const std::string& sysfs = "/sys");
// The calling thread's CPUs (sched_getaffinity).
std::vector<int> current_cpus();
// OMP_PROC_BIND or OMP_PLACES make the OpenMP runtime bind the main thread to its first place
// before main() runs, so the thread count, --pin-threads and the trace saw one CPU where the
// launcher gave several. The launcher's set is the union of the OpenMP places: this widens the
// main thread's binding back to it (the OpenMP threads keep their places) and returns a note
// for the log; "" when the binding was already that (or no places are defined).
std::string restore_launcher_cpus();

std::string to_string(const RankBinding& b);
// "" when GPU and NIC are on one of the cores' NUMA nodes (or unknown), else one line.
std::string binding_warning(const RankBinding& b, int rank, const std::string& host);

// "0-3,8,10-11"
std::string cpu_list(const std::vector<int>& cpus);

}  // namespace dlperf
