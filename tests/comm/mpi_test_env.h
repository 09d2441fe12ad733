// What the multi-rank tests share: the world layout, set once by mpi_test_main.cpp, and short
// communicator options so a failing test ends in seconds, not the production 60 s.
#pragma once

#include "comm/communicator.h"
#include "comm/mpi_session.h"

namespace dlperf::test {

const WorldInfo& world();

inline CommOptions fast_options() {
  CommOptions o;
  o.timeout = std::chrono::seconds(20);
  o.heartbeat_period = std::chrono::milliseconds(100);
  return o;
}

}  // namespace dlperf::test
