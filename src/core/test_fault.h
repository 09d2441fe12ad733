// Test-only fault injection: lets the fault tests stop or kill one rank at an exact point of
// a run (a phase of dlperf-train, or while the results file's lock is held), which a test
// driving the processes from outside cannot hit reliably. Off unless the environment holds
//   DLPERF_TEST_FAULT=POINT:RANK:SIGNAL[:N]
// POINT names a fault point (the phases in watchdog.h, "lock" in trace_file.cpp), RANK the
// world rank that raises it, SIGNAL is STOP, KILL or a number, N (default 1) the occurrence
// of that point that fires. The rank announces it on stderr first, with the wall-clock time,
// so a test can measure how long the job takes to end after the fault. Not for users: a
// malformed value is ignored with one warning.
#pragma once

#include <string_view>

namespace dlperf {

// The world rank the points compare against (set once MPI is up; -1 before: nothing fires).
void set_test_fault_rank(int rank);

// Raises the configured signal here when POINT, this rank and the occurrence match.
void test_fault_point(std::string_view point);

}  // namespace dlperf
