#include "train/step_graph.h"

#include "core/error.h"

namespace dlperf {

StepGraph::~StepGraph() {
  if (state_ != State::capturing) return;
  try {
    be_.end_capture();
  } catch (const std::exception&) {  // the capture already failed; the original error propagates
  }
}

void StepGraph::begin_capture() {
  DLPERF_ASSERT(state_ == State::eager, "a step is captured once");
  be_.begin_capture();
  state_ = State::capturing;
}

void StepGraph::cut() {
  segments_.push_back(be_.end_capture());
  be_.begin_capture();
}

void StepGraph::act(std::function<void()> work) {
  if (state_ != State::capturing) return work();
  cut();
  actions_.push_back(std::move(work));
}

void StepGraph::end_capture() {
  DLPERF_ASSERT(state_ == State::capturing, "end_capture follows begin_capture");
  segments_.push_back(be_.end_capture());
  state_ = State::ready;
}

void StepGraph::replay() {
  DLPERF_ASSERT(state_ == State::ready && segments_.size() == actions_.size() + 1, "a captured step to replay");
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (segments_[i]) segments_[i]->launch();
    if (i < actions_.size()) actions_[i]();
  }
}

}  // namespace dlperf
