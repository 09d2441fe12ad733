// Host-to-device copies of the real-data input path without a host synchronisation (review
// finding 8: write_bytes / write_indices used to end with a stream sync, so step n+1 was queued
// only after the GPU had drained step n, and the GPU then sat idle during the copy).
//
//   to_device(dst, src)  host:          src -> pinned slot n % 2 (memcpy; src is free on return)
//                        copy stream:   wait `consumed` (the staging buffer is free), slot ->
//                                       device staging (H2D on the copy engine), record `staged`
//                        compute stream: wait `staged`, staging -> dst (D2D), record `consumed`
// So the H2D of batch n+1 overlaps step n's compute (dst is still read by step n's backward:
// hence the device staging buffer), and the compute stream waits only when the copy is late.
// The host waits only before reusing a pinned slot, on the copy issued two batches earlier.
#pragma once

#include <cstddef>

#include "backend/cuda/handles.h"

namespace dlperf::cuda {

struct Context;

class HostUpload {
 public:
  HostUpload(Context& ctx, size_t bytes);
  ~HostUpload();
  HostUpload(const HostUpload&) = delete;
  HostUpload& operator=(const HostUpload&) = delete;
  size_t bytes() const { return bytes_; }
  // dst: `bytes` of device memory; src: `bytes` of host memory (pageable or pinned).
  void to_device(Context& ctx, void* dst, const void* src);

 private:
  size_t bytes_;
  Stream copy_;
  PinnedMemory host_[2];
  Event copied_[2];
  bool in_flight_[2] = {false, false};
  DeviceMemory staging_;
  Event staged_, consumed_;
  int64_t count_ = 0;
};

}  // namespace dlperf::cuda
