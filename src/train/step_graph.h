// The steady-state step as CUDA graph segments (--cuda-graph, issue 13 item 2).
//
// The step is captured once: the trainer runs its ordinary step code with capture on, and at
// every point where the host must act — a recorder mark, copying the loss back, a gradient
// bucket's allreduce start, ordering the compute stream after the buckets, writing the
// learning rate into the step gate — act() cuts the capture: the work queued so far becomes
// one graph segment and the host's action is recorded. A replay launches segment 0, runs
// action 0, launches segment 1, and so on, so every action happens at the same point of the
// queue as in an eager step. Everything a segment reads that changes from step to step lives
// in device memory (the step gate: learning rate, loss scale, skip flag); the input batch is
// delivered by an action into the model's fixed input tensors.
//
// Why the NCCL allreduces stay outside the graphs, on their own stream (rather than being
// captured, which NCCL supports since 2.9):
//   * Correctness is the same either way: a bucket's collective is ordered after the segment
//     that produced its gradients by an event (NcclCommunicator::allreduce_sum_start), and
//     the compute stream waits for it before the optimizer segment (join()). Outside the graph
//     that ordering is built fresh each step from the same calls an eager step makes.
//   * Faults stay observable: each allreduce keeps its own request, events and sequence
//     number, so the heartbeat, the bounded host wait and ncclCommAbort work as in an eager
//     step; a collective captured inside a graph has none of these, only the step's end.
//   * The per-bucket allreduce times (events on the NCCL stream) come from fresh requests each
//     step; events inside a graph are the same events on every replay.
//   * --comm mpi (host staging) cannot be captured at all; one design serves both.
//   * The cost is one graph launch per bucket boundary (ResNet-50: 4 buckets of 25 MiB, so
//     about 10 launches per step, each a few microseconds), small beside a step of tens of
//     milliseconds. Whether one captured graph is measurably faster is a GPU measurement this
//     design leaves open (the "whichever is correct and faster").
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace dlperf {

class StepGraph {
 public:
  enum class State { eager, capturing, ready };

  explicit StepGraph(Backend& be) : be_(be) {}
  ~StepGraph();  // ends a capture an exception interrupted, so the stream is usable again
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  State state() const { return state_; }

  void begin_capture();
  // Eager: runs work now. Capturing: cuts the capture at this point and keeps work for the
  // replays (it does not run now: nothing captured has run either). Ready: not used.
  void act(std::function<void()> work);
  void end_capture();
  // Launches segment 0, runs action 0, launches segment 1, ...
  void replay();

  size_t segments() const { return segments_.size(); }

 private:
  void cut();

  Backend& be_;
  State state_ = State::eager;
  std::vector<std::unique_ptr<GraphSegment>> segments_;  // null: nothing was captured there
  std::vector<std::function<void()>> actions_;           // actions_[i] runs after segments_[i]
};

}  // namespace dlperf
