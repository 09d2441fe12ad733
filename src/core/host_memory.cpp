#include "core/host_memory.h"

#include <cstdlib>
#include <new>

namespace dlperf {

HostMemory aligned_host_memory(size_t bytes) {
  constexpr size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign + (bytes == 0 ? kAlign : 0));
  if (!p) throw std::bad_alloc();
  return HostMemory(p, std::free);
}

}  // namespace dlperf
