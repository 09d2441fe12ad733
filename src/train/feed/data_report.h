// What a run's data is, said three ways: the trace attributes (data_source, data_path,
// decoder, loader_threads), the banner line, and the loader's summary after the run.
#pragma once

#include <string>
#include <vector>

#include "comm/mpi_session.h"
#include "data/dataset.h"
#include "models/model.h"
#include "trace/run_record.h"
#include "train/feed/data_source.h"
#include "train/options.h"

namespace dlperf {

void describe_data(const TrainOptions& o, const WorldInfo& w, const data::Dataset* dataset, RunInfo& info);

// "data: ..." after the banner's colon: the source, and for image files the dataset's size,
// the decoder, threads, prefetch and the batch format.
std::string data_banner(const TrainOptions& o, const WorldInfo& w, const data::Dataset* dataset, const Model& model);

// The loader's line after a run with image files, from the gathered traces (rank 0): images/s
// decoded and MB/s read over the measured window (all ranks), ready batches when the step
// asked, the data wait, bad samples; and how busy rank 0's loader threads were (`mine`: its
// busy and running seconds over the loop, loop_stats).
std::string loader_summary(const std::vector<RankTrace>& ranks, int64_t warmup, const DataStats& mine, int threads);
// `end` with the loader's busy and running seconds since `start` (the loop's): set-up before it
// (the lock, NCCL, the broadcast) and the run's end after it leave the threads idle on a full queue.
inline DataStats loop_stats(DataStats end, const DataStats& start) {
  end.busy_seconds -= start.busy_seconds;
  end.running_seconds -= start.running_seconds;
  return end;
}

}  // namespace dlperf
