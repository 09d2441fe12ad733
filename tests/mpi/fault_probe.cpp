// comm_fault_probe MODE VICTIM TIMEOUT_MS: a training-like loop of allreduces in which rank
// VICTIM, at step 20, dies (MODE die: SIGKILL), hangs in "computation" (hang) or is stopped
// (stop: SIGSTOP). The other ranks must fail their wait within TIMEOUT_MS and end the job
// through run_mpi_program (MPI_Abort). MODE none runs to completion (exit 0).
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/mpi_main.h"
#include "core/error.h"

int main(int argc, char** argv) {
  return dlperf::run_mpi_program(argc, argv, "comm_fault_probe", [&](dlperf::MpiSession& session) {
    if (argc != 4) dlperf::throw_usage_error("usage: comm_fault_probe die|hang|stop|none VICTIM TIMEOUT_MS");
    const std::string mode = argv[1];
    const int victim = std::atoi(argv[2]);
    dlperf::CommOptions options;
    options.timeout = std::chrono::milliseconds(std::atoi(argv[3]));
    options.heartbeat_period = std::chrono::milliseconds(200);
    dlperf::MpiCommunicator comm(session.world_comm(), session.world(), options);
    std::vector<float> grads(1 << 16, 1.0f);
    for (int step = 0; step < 40; ++step) {
      if (step == 20 && comm.rank() == victim) {
        if (mode == "die") std::raise(SIGKILL);
        if (mode == "stop") std::raise(SIGSTOP);
        if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
      }
      dlperf::CommRequest r = comm.allreduce_sum_start(grads.data(), grads.size());
      comm.wait(r);
      std::fill(grads.begin(), grads.end(), 1.0f);
    }
    comm.barrier();
    return 0;
  });
}
