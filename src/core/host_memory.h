// Host memory with a matching release function: 64-byte aligned on the CPU backend, page-
// locked (cudaHostAlloc) where a CUDA backend hands it out, so copies to the device are DMA
// transfers that can run asynchronously. Data loaders write step inputs into such buffers.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace dlperf {

using HostMemory = std::unique_ptr<void, void (*)(void*)>;
using HostAllocator = std::function<HostMemory(size_t bytes)>;

// Plain aligned memory (std::aligned_alloc, size rounded up to the alignment); throws
// std::bad_alloc when the allocation fails.
HostMemory aligned_host_memory(size_t bytes);

}  // namespace dlperf
