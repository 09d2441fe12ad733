// Ending the whole job from one rank that hit an error (MPI_Abort), with one rank doing it.
//
// Why not every failing rank at once: when several ranks call MPI_Abort together in a job whose
// runtime was told to keep going after a process ends (Open MPI 5.0's mpirun --enable-recovery,
// PRRTE), mpirun corrupted its heap and died (exit 134), hung, or exited 0 in 7 of 20 jobs
// (Debian 13, Open MPI 5.0.7; 0 of 16 with one aborting rank). So the lowest rank that is still
// alive aborts at once, and every other rank first gives it kAbortGrace to take the job down,
// then aborts too (that rank may itself be hung or stopped without looking silent yet).
// "Alive" is what this rank's heartbeats (comm/heartbeat.h) heard in the last two periods; a
// rank with no heartbeat running treats every lower rank as alive.
#pragma once

#include <chrono>

namespace dlperf {

class Heartbeat;

inline constexpr std::chrono::seconds kAbortGrace{3};

// MPI_Abort(MPI_COMM_WORLD, exit_code), now or after kAbortGrace as above; does not return.
[[noreturn]] void abort_job(int exit_code);

// Heartbeats register themselves while they run, so abort_job can ask them who is alive.
void register_heartbeat(const Heartbeat* h);
void unregister_heartbeat(const Heartbeat* h);

}  // namespace dlperf
