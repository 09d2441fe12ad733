// Core pinning helpers; see core_pinning.h.
#include "comm/core_pinning.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace dlperf {

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    throw Error(ErrorKind::library, std::string("sched_getaffinity failed: ") + std::strerror(errno));
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

std::vector<int> disjoint_core_range(const std::vector<int>& allowed, int local_rank, int local_size, int threads) {
  if (threads < 1) throw_usage_error("--threads must be at least 1 (got " + std::to_string(threads) + ")");
  const size_t need = static_cast<size_t>(local_size) * static_cast<size_t>(threads);
  if (need > allowed.size())
    throw_usage_error("pinning " + std::to_string(local_size) + " ranks x " + std::to_string(threads) +
                      " threads needs " + std::to_string(need) + " cores but this node allows " +
                      std::to_string(allowed.size()) + "; lower --threads or drop pinning");
  const auto first = static_cast<size_t>(local_rank) * static_cast<size_t>(threads);
  return {allowed.begin() + static_cast<std::ptrdiff_t>(first),
          allowed.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(threads))};
}

void pin_to_cores(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw Error(ErrorKind::library, std::string("sched_setaffinity failed: ") + std::strerror(errno));
}

}  // namespace dlperf
