// --find-max-batch: the largest batch per device that trains (issue 13, item 7). Doubling
// from --batch-size until a batch does not fit, then bisection between the largest that fit
// and the smallest that did not. Each attempt builds the whole run (backend, model, input
// staging, optimizer state) for that batch and trains three steps; running out of memory
// anywhere (OutOfMemoryError, std::bad_alloc, oneDNN's out_of_memory) counts as "does not
// fit", after the attempt's objects have unwound and freed everything. Every rank takes part
// and a batch fits only if it fits on every rank.
#pragma once

#include <functional>
#include <iosfwd>
#include <vector>

#include "comm/mpi_session.h"
#include "train/options.h"

namespace dlperf {

struct BatchSearch {
  int64_t largest_fitting = 0;   // 0: not even batch 1 fits
  int64_t smallest_failing = 0;  // 0: nothing up to the cap failed
  std::vector<std::pair<int64_t, bool>> trials;  // (batch, fits) in the order tried
};

// The search alone: fits(b) answers one attempt. Stops at `cap` when everything fits.
BatchSearch search_max_batch(int64_t start, int64_t cap, const std::function<bool(int64_t)>& fits);

// Collective: runs the search with real training attempts; prints each attempt and the result
// on rank 0. Returns the largest batch that fits.
int64_t find_max_batch(MpiSession& session, const TrainOptions& o, std::ostream& out);

}  // namespace dlperf
