// A Buffer whose device memory is mapped chunk by chunk through CUDA's virtual memory management
// (cuMemAddressReserve / cuMemCreate / cuMemMap), so that ranges of it can be given back and
// mapped again while its address stays fixed: what Buffer::decommit and commit ask for (ZeRO's
// sharded f32 master weights and ZeRO-2's gradients, train/parallel/zero.h). A plain
// cudaMalloc'ed buffer cannot free part of itself.
//
// The chunk is the device's allocation granularity (2 MiB on Hopper). decommit and commit count
// 4 KiB pages as the CPU backend does: a chunk is unmapped once all its pages are decommitted
// (whichever ranges they came from), commit maps every such chunk the range touches, and those
// read as zero afterwards (a memset on the stream), as the CPU backend's pages do. The work
// queued on the stream may still use a range when it is decommitted (the host runs ahead of the
// device), so the unmap waits for it: decommit records an event, and the chunks are unmapped
// once it has completed, at the latest by the next commit that maps anything, in any buffer of
// the backend: it first waits for every earlier decommit's work (bounded by --timeout). The device memory held at once is then what is
// committed plus what the decommits since the last such commit still wait on.
//
// Unmapped chunks' physical allocations stay in a small pool for the next commit (creating one
// is slower than mapping it): at most the chunks the largest commit since construction mapped
// (ZeRO: one bucket); the rest are released, and all of them once the buffer's chunks take turns
// in a share pool (drop_cached: nothing maps after that). Every physical allocation, pooled or mapped, is in the context's
// memory counter (the memory plan's measured side).
//
// Buffer::share maps chosen decommitted chunks, once, to a pool of physical chunks (CudaSharePool,
// possibly shared with another buffer) that ranges with disjoint lifetimes take turns in (ZeRO's
// sharded master, ZeRO-2's gradients): commit and decommit then leave them mapped (a commit
// zero-fills them), and the steps call the driver for none of them.
//
// The driver functions are looked up through the runtime (cudaGetDriverEntryPointByVersion):
// nothing links libcuda, which only the GPU machine's driver provides.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/cuda/context.h"

namespace dlperf::cuda {

// True when the device supports virtual memory management (every GPU since Pascal with a
// recent driver); the backend then frees decommitted memory (Backend::frees_decommitted).
bool mapped_buffers_supported(const Context& ctx);

// The decommits of every mapped buffer of one backend, waiting for their work. timeout bounds a
// commit's wait for it (a peer that never completes a collective).
class MappingQueue;
std::shared_ptr<MappingQueue> make_mapping_queue(std::chrono::milliseconds timeout);

// elems f32 elements, committed and zero-filled, or with every chunk decommitted.
std::unique_ptr<Buffer> make_mapped_buffer(Ctx ctx, std::shared_ptr<MappingQueue> queue, size_t elems, bool committed);

// What the mapped buffers did so far in this process: for the run's summary (the cost of
// remapping is host time spent in the driver, between queued work).
struct MappingStats {
  int64_t maps = 0, unmaps = 0, grants = 0, creates = 0, releases = 0;
  double seconds = 0;  // host time inside the driver's map, unmap, create and release calls
  int64_t waits = 0;   // commits that waited for earlier decommits' work on the device
};
MappingStats mapping_stats();
MappingStats operator-(const MappingStats& a, const MappingStats& b);  // what happened between two snapshots
// The run's summary line: what the `measured` steps cost each (the counts since `at_start`, the
// snapshot taken when they began, divided by `measured`), then the whole run's totals (`whole`);
// only the totals where no step was measured. "" where nothing was mapped.
std::string mapping_summary(const MappingStats& whole, const MappingStats& at_start, int64_t measured);

}  // namespace dlperf::cuda
