// Builds lockstep synthetic runs (see synthetic_run.h).
#include "trace/synthetic_run.h"

#include <string>

namespace dlperf {

RunRecord make_synthetic_run(const SyntheticRunSpec& spec) {
  RunRecord rec;
  rec.info = spec.info;
  rec.info.iterations = spec.iterations;
  const int64_t world = rec.info.world_size;
  const int64_t per_node = rec.info.devices_per_node > 0 ? rec.info.devices_per_node : 1;
  rec.info.hosts.clear();
  rec.ranks.resize(static_cast<size_t>(world));
  const double s = spec.step_seconds;
  for (int64_t r = 0; r < world; ++r) {
    RankTrace& rank = rec.ranks[static_cast<size_t>(r)];
    rank.host = "node" + std::to_string(r / per_node);
    rec.info.hosts.push_back(rank.host);
    rank.clock_offset = 1e-6 * static_cast<double>(r);
    rank.peak_memory_bytes = (1ll << 30) + r;
    rank.iterations.resize(static_cast<size_t>(spec.iterations));
    const bool slow = r == spec.slow_rank;
    for (int64_t i = 0; i < spec.iterations; ++i) {
      IterationTiming& it = rank.iterations[static_cast<size_t>(i)];
      it.start = static_cast<double>(i) * s;
      it.end = static_cast<double>(i + 1) * s;
      const double base = s - spec.slow_extra;  // the fast ranks' compute + comm budget
      it.phase_seconds[0] = static_cast<float>(0.05 * base);
      it.phase_seconds[1] = static_cast<float>(0.30 * base + (slow ? spec.slow_extra : 0));
      it.phase_seconds[2] = static_cast<float>(0.45 * base);
      it.phase_seconds[3] = static_cast<float>(0.10 * base + (slow ? 0 : spec.slow_extra));
      it.phase_seconds[4] = static_cast<float>(0.10 * base);
      it.comm_seconds = static_cast<float>(0.30 * base);
      it.loss = static_cast<float>(7.0 / (1.0 + 0.01 * static_cast<double>(i)));
    }
  }
  return rec;
}

}  // namespace dlperf
