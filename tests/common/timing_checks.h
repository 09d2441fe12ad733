// A trainer's trace holds together in time, on any backend: each iteration's phases are not
// negative and add up to its span (consecutive marks of one step: trainer.cpp), and it starts no
// earlier than the iteration before it ended. On a GPU the marks are events the recorder places
// on the host's clock (backend/cuda/recorder.cpp); a sign or reference-event slip there would
// break one of these while every loss stays right.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>

#include "trace/run_record.h"

namespace dlperf::test {

inline void expect_timing_holds_together(const RankTrace& trace) {
  ASSERT_FALSE(trace.iterations.empty());
  for (size_t i = 0; i < trace.iterations.size(); ++i) {
    const IterationTiming& it = trace.iterations[i];
    const double span = it.end - it.start;
    EXPECT_GE(span, 0.0) << "iteration " << i;
    double sum = 0;
    for (float p : it.phase_seconds) {
      EXPECT_GE(p, -1e-6f) << "iteration " << i;
      sum += p;
    }
    EXPECT_NEAR(sum, span, 2e-6 + 1e-4 * span) << "iteration " << i << ": its phases against its span";
    if (i > 0) {
      EXPECT_GE(it.start, trace.iterations[i - 1].end - 1e-6) << "iteration " << i << " starts before the one before it ended";
    }
  }
}

}  // namespace dlperf::test
