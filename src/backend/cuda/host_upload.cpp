// HostUpload (host_upload.h): pinned double buffer, a copy stream, one device staging buffer.
#include "backend/cuda/host_upload.h"

#include <cstring>

#include "backend/cuda/context.h"

namespace dlperf::cuda {

HostUpload::HostUpload(Context& ctx, size_t bytes)
    : bytes_(bytes), host_{PinnedMemory(bytes), PinnedMemory(bytes)}, staging_(ctx.alloc(bytes)) {}

HostUpload::~HostUpload() {
  // A copy may still read a pinned slot or write the staging buffer; the D2D out of staging is
  // on the compute stream, before whatever frees dst.
  cudaStreamSynchronize(copy_.get());
}

void HostUpload::to_device(Context& ctx, void* dst, const void* src) {
  const auto slot = static_cast<size_t>(count_ % 2);
  if (in_flight_[slot]) DLPERF_CHECK(cudaEventSynchronize(copied_[slot].get()));  // issued two uploads ago: long done
  std::memcpy(host_[slot].get(), src, bytes_);
  DLPERF_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_.get(), 0));  // the last upload's D2D has read staging
  DLPERF_CHECK(cudaMemcpyAsync(staging_.get(), host_[slot].get(), bytes_, cudaMemcpyHostToDevice, copy_.get()));
  DLPERF_CHECK(cudaEventRecord(copied_[slot].get(), copy_.get()));
  in_flight_[slot] = true;
  DLPERF_CHECK(cudaEventRecord(staged_.get(), copy_.get()));
  DLPERF_CHECK(cudaStreamWaitEvent(ctx.s(), staged_.get(), 0));
  DLPERF_CHECK(cudaMemcpyAsync(dst, staging_.get(), bytes_, cudaMemcpyDeviceToDevice, ctx.s()));
  DLPERF_CHECK(cudaEventRecord(consumed_.get(), ctx.s()));
  ++count_;
}

}  // namespace dlperf::cuda
