// How batches reach the model's input tensors, kept apart from the training loop so a data
// source (train/feed/data_source.h: synthetic, or the image loader) only hands over host batches;
// each batch is released as soon as its bytes are copied out of it (into the model's tensors
// or a pinned staging slot), so a loader holds at most one batch out:
//
//   direct     load(next batch) into the model's tensors at the start of each step, on the
//              training thread; the "data" phase is that copy. The CPU backend's mode (it has
//              no copy engine to overlap with), and the fallback of any backend.
//   pipelined  a backend InputPipe (backend/input_pipe.h): after step n is queued, batch n+1 is
//              written into pinned host memory and its host-to-device copy starts on a copy
//              stream, so it overlaps step n; deliver() at the start of step n+1 only makes the
//              compute stream wait for it. The "data" phase then measures only that wait (and a
//              device-to-device copy), as a real loader's. The CUDA backend's default.
//   resident   --data-on-device: one batch is loaded before the loop and stays on the device
//              (DLPerf's synthetic mode); nothing moves per step.
// The mode is recorded in the trace (input_mode).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "models/model.h"
#include "train/feed/data_source.h"

namespace dlperf {

enum class InputMode : uint8_t { automatic, direct, pipelined, resident };
const char* to_string(InputMode m);  // "direct", "pipelined", "resident"

class InputStage {
 public:
  virtual ~InputStage() = default;
  virtual InputMode mode() const = 0;
  // Before the loop: whatever the first step needs.
  virtual void prime() = 0;
  // At the start of a step: the step's batch becomes the model's input, ordered before the
  // work queued next. The only part of input handling inside a step.
  virtual void deliver() = 0;
  // After a step is queued: prepare the next step's batch (pipelined: stage and send it).
  virtual void prefetch() = 0;
};

// automatic: pipelined where the backend has an InputPipe, direct otherwise. `data` outlives
// the stage.
std::unique_ptr<InputStage> make_input_stage(InputMode mode, Model& model, Backend& be, DataSource& data);

}  // namespace dlperf
