// GraphSegment: work captured from the backend's compute queue once and replayed (CUDA graphs,
// --cuda-graph). Backend::begin_capture() starts recording what later calls queue instead of
// running it; end_capture() returns the instantiated segment, launch() queues all of it again
// with one call. Captured work reads and writes the same addresses on every launch, and any
// scalar it takes must live in device memory (the step gate) for a replay to differ from the
// capture. The trainer (train/step_graph.h) cuts a step into segments at the points where the
// host must act (timer marks, gradient bucket hand-offs).
#pragma once

namespace dlperf {

class GraphSegment {
 public:
  virtual ~GraphSegment() = default;
  virtual void launch() = 0;  // queued on the compute stream, in order with everything else
};

}  // namespace dlperf
