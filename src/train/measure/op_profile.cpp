// OpProfiler: the per-op table (see op_profile.h). The wrapped ops live in
// profiling_backend.cpp.
#include "train/measure/op_profile.h"

#include <algorithm>

#include "core/error.h"

namespace dlperf {

OpProfiler::OpProfiler(int64_t first_iteration, int64_t steps) : first_(first_iteration), steps_(steps), pending_(kRecorderDepth) {
  DLPERF_ASSERT(steps > 0 && first_iteration >= 0, "a profile of at least one step");
}

int OpProfiler::add_op(std::string name, std::string kind, std::string shape) {
  rows_.push_back({std::move(name), std::move(kind), std::move(shape), 0.0, 0.0, 0});
  return static_cast<int>(rows_.size()) - 1;
}

std::string OpProfiler::unnamed(const std::string& kind) {
  auto it = std::find(kinds_.begin(), kinds_.end(), kind);
  if (it == kinds_.end()) {
    kinds_.push_back(kind);
    kind_counts_.push_back(0);
    it = kinds_.end() - 1;
  }
  const auto i = static_cast<size_t>(it - kinds_.begin());
  return kind + "#" + std::to_string(kind_counts_[i]++);
}

int OpProfiler::convert_op(const Tensor& src, const Tensor& dst) {
  const std::string key = to_string(src.dims()) + " " + to_string(src.dtype()) + " -> " + to_string(dst.dims()) + " " + to_string(dst.dtype());
  for (const auto& [k, op] : converts_)
    if (k == key) return op;
  const int op = add_op(unnamed("convert"), "convert", key);
  converts_.emplace_back(key, op);
  return op;
}

void OpProfiler::begin_step(int64_t iteration, StepRecorder* recorder) {
  recorder_ = recorder;
  current_slot_ = static_cast<size_t>(iteration % kRecorderDepth);
  pending_[current_slot_].clear();
}

void OpProfiler::collect(int64_t iteration, const StepReadings& r, double clock_offset) {
  auto& calls = pending_[static_cast<size_t>(iteration % kRecorderDepth)];
  for (const Call& c : calls) {
    const double begin = r.marks.at(static_cast<size_t>(c.begin)), end = r.marks.at(static_cast<size_t>(c.end));
    OpProfileRow& row = rows_.at(static_cast<size_t>(c.op));
    const double ms = 1e3 * (end - begin);
    if (c.phase == Phase::backward) row.backward_ms += ms;
    else row.forward_ms += ms;  // forward, and the rare call outside forward/backward (none in the models)
    if (c.counted) row.calls += 1;
    events_.push_back({c.op, iteration, begin + clock_offset, end + clock_offset});
  }
  calls.clear();
  ++collected_;
}

OpProfile OpProfiler::result(int64_t rank) const {
  OpProfile p;
  p.rank = rank;
  p.first_iteration = first_;
  p.steps = collected_;
  if (collected_ == 0) return p;
  p.rows = rows_;
  const auto n = static_cast<double>(collected_);
  for (auto& row : p.rows) {  // per step
    row.forward_ms /= n;
    row.backward_ms /= n;
    row.calls = static_cast<int64_t>(static_cast<double>(row.calls) / n + 0.5);
  }
  p.events = events_;
  return p;
}

}  // namespace dlperf
