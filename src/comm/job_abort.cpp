#include "comm/job_abort.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/heartbeat.h"

namespace dlperf {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<const Heartbeat*>& registry() {
  static std::vector<const Heartbeat*> heartbeats;
  return heartbeats;
}

// True when some rank below `me` may still be alive: heard from lately by a heartbeat, or
// unknown to all of them.
bool lower_rank_alive(int me) {
  std::lock_guard lock(registry_mutex());
  for (int q = 0; q < me; ++q) {
    bool known = false, alive = false;
    for (const Heartbeat* h : registry()) {
      const auto heard = h->heard_from_world_rank(q);
      if (!heard) continue;
      known = true;
      alive = alive || *heard;
    }
    if (!known || alive) return true;
  }
  return false;
}

}  // namespace

void register_heartbeat(const Heartbeat* h) {
  std::lock_guard lock(registry_mutex());
  registry().push_back(h);
}

void unregister_heartbeat(const Heartbeat* h) {
  std::lock_guard lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), h), r.end());
}

void abort_job(int exit_code) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);  // local: safe in any state
  if (me > 0 && lower_rank_alive(me)) std::this_thread::sleep_for(kAbortGrace);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace dlperf
