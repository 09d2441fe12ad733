// GoogleTest main for tests run under mpirun: MPI is initialised once around all tests
// (through the same top level as the programs), only rank 0 prints passing tests, and any
// rank's failure makes that rank, hence mpirun, exit non-zero.
#include <gtest/gtest.h>

#include "comm/mpi_main.h"
#include "mpi_test_env.h"

namespace dlperf::test {
namespace {
const WorldInfo* g_world = nullptr;  // the session outlives every test
}
const WorldInfo& world() { return *g_world; }
}  // namespace dlperf::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return dlperf::run_mpi_program(argc, argv, "comm_mpi_tests", [](dlperf::MpiSession& session) {
    dlperf::test::g_world = &session.world();
    if (session.world().rank != 0) GTEST_FLAG_SET(brief, true);
    return RUN_ALL_TESTS();
  });
}
