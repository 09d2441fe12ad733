// InputPipe: moves input batches from host memory into a model's input tensors ahead of their
// use, the way a real data loader feeds a GPU. A batch is written into host staging tensors
// (host_slot), transferred by a copy engine while the device computes the previous step
// (send), and handed to the model's own tensors at the start of its step (deliver) without
// the host waiting for the device.
//
// CUDA (backend/cuda/input_pipe.cpp): two pinned host slots (a slot is written while the
// other's copy may still run), a copy stream, and one device staging set; deliver makes the
// compute stream wait for the copy and copies device to device into the model's tensors, so
// batch n+1's host-to-device copy overlaps step n. The policy (when to send, what the "data"
// phase measures) lives in train/feed/input_stage.h.
#pragma once

#include <span>

#include "backend/tensor.h"

namespace dlperf {

class InputPipe {
 public:
  virtual ~InputPipe() = default;
  // The staging tensors of the next free slot, shaped and typed like the model's inputs, in
  // the canonical layout; Model::load_into writes a batch into them. Waits only when that
  // slot's previous copy has not finished.
  virtual std::span<Tensor* const> host_slot() = 0;
  // Starts moving the slot just written towards the device; returns at once.
  virtual void send() = 0;
  // Makes the oldest sent batch the content of the model's input tensors, ordered before any
  // work queued after this call; returns without waiting for the device.
  virtual void deliver() = 0;
};

}  // namespace dlperf
