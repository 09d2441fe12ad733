// The flat parameter and gradient buffers. Parameters are laid out in *reverse* layer order,
// so the gradients backward finishes first sit at the front: a gradient bucket is then a
// contiguous slice that becomes final all at once, and its allreduce can start while
// backward continues. Each slice starts on a 64-byte boundary; padding stays zero.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace dlperf {

struct ParamEntry {
  Layer* layer = nullptr;
  size_t index = 0;   // in layer->params()
  size_t offset = 0;  // f32 elements from the start of the flat buffers
  size_t elems = 0;   // storage elements (padding included)
  bool decay = false;
};

class ParamStore {
 public:
  // gradients_decommitted: the gradient buffer starts decommitted (Backend::decommitted_buffer),
  // for ZeRO-2, which commits each bucket as backward writes it. values_releasable: the value
  // buffer is one whose ranges can be decommitted (Backend::releasable_buffer), for ZeRO's
  // sharded master weights.
  ParamStore(Backend& be, const std::vector<Layer*>& layers_forward_order, bool gradients_decommitted = false,
             bool values_releasable = false);

  Buffer& values() { return *values_; }
  Buffer& grads() { return *grads_; }
  size_t size() const { return values_->size(); }
  const std::vector<ParamEntry>& entries() const { return entries_; }  // flat order
  int64_t parameter_count() const { return count_; }  // logical elements, as frameworks count them
  bool gradients_decommitted() const { return gradients_decommitted_; }
  // [begin, end) of a layer's parameters in the flat buffers.
  std::pair<size_t, size_t> range_of(const Layer& l) const;

  // Moves all values or gradients to/from the canonical per-parameter layout, for tests,
  // fixtures and checksums: one vector per entry, in flat order.
  std::vector<std::vector<float>> read_values() const;
  std::vector<std::vector<float>> read_grads() const;
  // FNV-1a (64-bit) over the bits of every parameter value, canonical layout, flat order:
  // equal on two replicas exactly when their parameters are bit-identical (barring a
  // 2^-64 collision), whatever the backend's internal layout.
  uint64_t checksum() const;
  // FNV-1a over where every parameter element sits in the flat buffers: each entry's offset and
  // storage size, and the storage image of a probe written in canonical order. Equal on two
  // ranks exactly when their gradients can be averaged element by element (a backend may block
  // a weight differently per ISA). Overwrites the values: call it before init_params.
  uint64_t layout_signature();

 private:
  std::vector<ParamEntry> entries_;
  std::unique_ptr<Buffer> values_, grads_;
  int64_t count_ = 0;
  bool gradients_decommitted_ = false;
};

}  // namespace dlperf
