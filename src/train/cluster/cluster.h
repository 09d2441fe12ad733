// The run's view of the cluster, built on MPI: a clock common to all ranks, the facts that
// describe where and with what a run ran, gathering every rank's trace onto rank 0, and
// agreeing on when to stop.
#pragma once

#include <mpi.h>

#include <atomic>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "comm/mpi_session.h"
#include "trace/run_record.h"
#include "train/trainer.h"

namespace dlperf {

// Offset to add to this rank's steady clock to read rank 0's: the round trip with the
// smallest delay out of several ping-pongs with rank 0 (Cristian's method). Collective.
double measure_clock_offset(MPI_Comm comm, int rounds = 8);

// Host, CPU model, library versions, Slurm job, times: the attributes a trace carries.
// Fields that depend on the run's options are filled by the caller.
RunInfo describe_environment(const WorldInfo& world);
std::string utc_now_iso8601();

// Every rank's trace on rank 0 (others get an empty vector). Collective.
std::vector<RankTrace> gather_traces(MPI_Comm comm, const RankTrace& mine);

// Every rank's string on rank 0 (others get an empty vector). Collective.
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine);
// The distinct comma-separated items of `parts`, in order of first appearance:
// {"P2P", "P2P, IB", ""} -> "P2P, IB".
std::string join_distinct(const std::vector<std::string>& parts);

// What each rank reported, in one value: "X" when all agree, else every distinct value with
// its ranks, in order of first appearance: {"a", "a", "b", "a"} -> "a (ranks 0-1, 3); b (rank 2)".
std::string per_rank_value(const std::vector<std::string>& values);
// This machine's CPU model, from /proc/cpuinfo ("unknown" when it says none).
std::string cpu_model();

// The device's facts in the run's attributes (issue 13, item 6): GPU model and memory, the
// driver, CUDA, cuDNN, cuBLAS and NCCL versions, and this node's GPU/NIC topology (hwloc).
// Nothing changes for a backend without a device (its facts are empty).
void add_device_facts(RunInfo& info, const DeviceFacts& facts);

// SIGTERM / SIGINT / SIGUSR1 / SIGHUP set a flag instead of killing the process (Slurm sends SIGTERM before
// the time limit: the run stops at an iteration boundary, writes what it measured as
// partial, and exits). Installing is idempotent.
void install_stop_handlers();
const std::atomic<bool>& stop_requested();
int stop_signal();  // the signal seen, 0 if none

// The boundary decision of every rank (trainer.h): stop when any rank saw a stop signal,
// fail when any rank's loss diverged. Ranks must leave the loop at the same iteration, or
// the next allreduce would wait for a rank that has gone. Collective, through the (bounded,
// host-memory) control communicator.
BoundaryFlags agree_at_boundary(Communicator& control, const BoundaryFlags& mine);

}  // namespace dlperf
