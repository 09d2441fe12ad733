// Each file and each run once (see run_identity.h).
#include "run_identity.h"

#include <map>
#include <tuple>

#include "core/file_io.h"

namespace dlperf::analysis {
namespace {

// When and where it ran, what it ran, and the common-clock times of its first iteration on
// every rank (a copy taken mid-run has them too; another run, even of the same settings on
// the same hosts in the same second, does not).
using RunId = std::tuple<std::string, std::string, std::vector<std::string>, std::string, int64_t, std::string, int64_t,
                         std::vector<double>>;

RunId run_id(const RunRecord& r) {
  const RunInfo& i = r.info;
  std::vector<double> first;
  for (const auto& rank : r.ranks)
    if (!rank.iterations.empty()) first.insert(first.end(), {rank.iterations.front().start, rank.iterations.front().end});
  const std::string what = i.model + " " + i.precision + " " + i.backend + " " + i.variant + " " + std::to_string(i.batch_per_device);
  return {i.start_time_utc, i.command_line, i.hosts, i.slurm_job_id, i.repeat_index, what, i.world_size, first};
}

size_t recorded_iterations(const RunRecord& r) {
  size_t n = 0;
  for (const auto& rank : r.ranks) n += rank.iterations.size();
  return n;
}

// The record to keep of two of one run: complete over unfinished, then the longer.
bool better(const RunRecord& a, const RunRecord& b) {
  const bool ca = a.info.status == RunStatus::complete, cb = b.info.status == RunStatus::complete;
  if (ca != cb) return ca;
  return recorded_iterations(a) > recorded_iterations(b);
}

}  // namespace

std::vector<std::string> distinct_files(const std::vector<std::string>& files, std::vector<std::string>& notes) {
  std::map<FileId, std::string> seen;
  std::vector<std::string> out;
  for (const auto& f : files) {
    const auto id = file_id(f);
    if (id) {
      auto [it, fresh] = seen.emplace(*id, f);
      if (!fresh) {
        notes.push_back(f + " is the same file as " + it->second + ": read once");
        continue;
      }
    }
    out.push_back(f);
  }
  return out;
}

void drop_duplicate_runs(std::vector<RunRecord>& runs, std::vector<std::string>& notes) {
  std::map<RunId, size_t> first;  // run -> index of its kept record in `kept`
  std::vector<RunRecord> kept;
  kept.reserve(runs.size());
  for (auto& r : runs) {
    auto [it, fresh] = first.emplace(run_id(r), kept.size());
    if (fresh) {
      kept.push_back(std::move(r));
      continue;
    }
    RunRecord& other = kept[it->second];
    const std::string dropped = better(r, other) ? other.location : r.location;
    const std::string kept_at = better(r, other) ? r.location : other.location;
    if (better(r, other)) other = std::move(r);
    notes.push_back(dropped + " is the same run as " + kept_at + ": counted once");
  }
  runs = std::move(kept);
}

}  // namespace dlperf::analysis
