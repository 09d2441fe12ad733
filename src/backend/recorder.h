// StepRecorder: timestamps and scalar values taken in the backend's work order and read back
// a step later, so that timing a step and reading its loss never make the host wait for the
// device inside the step (issue 13).
//
//   CUDA  a mark is a timing event recorded on the compute stream; a value is an asynchronous
//         copy of a device float into pinned host memory. read() waits for the step's last
//         operation and converts the events to the host's steady clock (see
//         backend/cuda/recorder.cpp for how: elapsed times between events, anchored where the
//         host saw a completion).
//   CPU   every op has finished when it returns, so a mark is the steady clock (after waiting
//         for the oneDNN stream) and a value is read at once.
//
// Use, per step: begin(step); then mark() and value(p) in queue order, any number of times
// (the per-op profile adds two marks per op call); read(step) once, in step order, while at
// most kRecorderDepth steps have been begun and not read. The trainer reads step n right after
// queueing step n+1, so the device always has a step of work queued while the host reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace dlperf {

inline constexpr int kRecorderDepth = 4;

struct StepReadings {
  std::vector<double> marks;  // s on this process's steady clock (steady_seconds()), in mark() order
  std::vector<float> values;  // in value() order
};

class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  virtual void begin(int64_t step) = 0;
  // Index of the mark among this step's marks.
  virtual int mark() = 0;
  // Snapshot of *p (a float in the backend's memory) as the queue reaches this point; index
  // among this step's values.
  virtual int value(const float* p) = 0;
  // Waits until every mark and value of `step` has completed and returns them. The wait is
  // bounded: `poll` runs between checks (a communicator's fault check, which throws when a
  // peer died) and after `timeout` Error(fault) is thrown.
  virtual StepReadings read(int64_t step, const std::function<void()>& poll, std::chrono::milliseconds timeout) = 0;
  // When an event recorded during `step` on another queue of the same device completed (CUDA:
  // a cudaEvent_t created with timing, e.g. on the NCCL stream), in s on the steady clock.
  // Valid after read(step) until step + kRecorderDepth begins. NaN on backends without events.
  virtual double event_time(int64_t step, void* event) = 0;
};

}  // namespace dlperf
