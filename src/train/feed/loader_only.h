// dlperf-train --loader-only: the image loader alone, without a model. Every rank runs its
// loader as training would (its share of the dataset, its threads, the model's input format)
// and takes batches as fast as they come; rank 0 prints the images/s of all ranks together.
// Set beside a training run's samples/s, it says at once whether storage and decoding or the
// compute limit this machine.
#pragma once

#include <iosfwd>

#include "comm/mpi_session.h"
#include "train/options.h"
#include "train/run.h"

namespace dlperf {

// Collective. Runs --warmup + --iterations batches (the first --warmup untimed); the summary's
// samples_per_s is images/s summed over the ranks.
RunSummary run_loader_only(MpiSession& session, const TrainOptions& o, std::ostream& out);

}  // namespace dlperf
