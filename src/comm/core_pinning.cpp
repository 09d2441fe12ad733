// Rank pinning over the hwloc topology; the policy is explained in core_pinning.h.
#include "comm/core_pinning.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "comm/mpi_comm_handle.h"
#include "core/check.h"
#include "core/error.h"

namespace dlperf {
namespace {

bool contains(const std::vector<int>& sorted, int pu) { return std::binary_search(sorted.begin(), sorted.end(), pu); }

std::string plural(size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

// Where threads may go within `allowed`, in topology order: one PU per core (its first
// allowed one) when `need` of them fit, otherwise every allowed PU (SMT siblings side by side).
struct Units {
  std::vector<int> pus;
  const char* kind = "core";
};

Units units_of(const Topology& topo, const std::vector<int>& allowed, size_t need) {
  Units u;
  const std::vector<CoreSlot> cores = cores_of(topo, allowed);
  for (const auto& c : cores) u.pus.push_back(c.pus.front());
  if (u.pus.size() >= need) return u;
  Units threads;
  threads.kind = "hardware thread";
  for (const auto& c : cores) threads.pus.insert(threads.pus.end(), c.pus.begin(), c.pus.end());
  return threads.pus.size() > u.pus.size() ? threads : u;
}

// `ranks` share `units`: slice it into equal contiguous parts, rank k takes `threads` units
// from the start of part k. Empty when they do not fit.
std::vector<std::vector<int>> slices(const std::vector<int>& units, size_t ranks, size_t threads) {
  if (ranks == 0 || ranks * threads > units.size()) return {};
  const size_t part = units.size() / ranks;
  std::vector<std::vector<int>> out(ranks);
  for (size_t k = 0; k < ranks; ++k)
    out[k].assign(units.begin() + static_cast<std::ptrdiff_t>(k * part),
                  units.begin() + static_cast<std::ptrdiff_t>(k * part + threads));
  return out;
}

// Ranks sharing one binding: by GPU locality when it is known and fits, else over all of it.
PinPlan plan_shared(const Topology& topo, const PinRequest& r, const std::vector<int>& set) {
  const size_t n = r.bindings.size(), t = static_cast<size_t>(r.threads);
  const Units units = units_of(topo, set, n * t);
  if (n * t > units.pus.size())
    throw_usage_error("--pin-threads: " + plural(n, "rank") + " x " + plural(t, "thread") + " need " +
                      std::to_string(n * t) + " cores but this node allows " + plural(units.pus.size(), units.kind) +
                      " to these ranks; " + (t > 1 ? "lower --threads, start fewer ranks per node" : "start fewer ranks per node") +
                      " or drop --pin-threads");
  PinPlan plan;
  plan.pus.resize(n);
  const bool locality = !r.near.empty() && std::all_of(r.near.begin(), r.near.end(), [](const auto& v) { return !v.empty(); });
  if (locality) {
    // Ranks whose GPUs share a locality share its cores (std::map: the same order everywhere).
    std::map<std::vector<int>, std::vector<size_t>> groups;
    for (size_t k = 0; k < n; ++k) groups[r.near[k]].push_back(k);
    bool fits = true;
    for (const auto& [near, members] : groups) {
      std::vector<int> close;
      for (int pu : units.pus)
        if (contains(near, pu)) close.push_back(pu);
      const auto parts = slices(close, members.size(), t);
      if (parts.empty()) {
        fits = false;
        break;
      }
      for (size_t i = 0; i < members.size(); ++i) plan.pus[members[i]] = parts[i];
    }
    // Localities of different GPUs may overlap (a GPU close to every core): keep slices disjoint.
    std::vector<int> used;
    for (const auto& p : plan.pus) used.insert(used.end(), p.begin(), p.end());
    std::sort(used.begin(), used.end());
    if (fits && std::adjacent_find(used.begin(), used.end()) == used.end()) {
      plan.how = plural(n, "rank") + " x " + plural(t, units.kind) + ", each near its GPU (" +
                 plural(groups.size(), "GPU locality group") + ")";
      return plan;
    }
  }
  plan.pus = slices(units.pus, n, t);
  plan.how = plural(n, "rank") + " x " + plural(t, units.kind) + ", spread over " +
             plural(units.pus.size(), units.kind) + " in topology order" +
             (locality ? " (too few cores near the GPUs to follow their locality)" : "");
  return plan;
}

// threads 0: what a share of `units` leaves after `spare`, at least 1.
size_t automatic_share(size_t units, size_t ranks, int spare) {
  const size_t share = units / std::max<size_t>(ranks, 1), keep = static_cast<size_t>(std::max(spare, 0));
  return share > keep ? share - keep : 1;
}

}  // namespace

PinPlan plan_pinning(const Topology& topo, const PinRequest& request) {
  if (request.threads < 0) throw_usage_error("--threads must be at least 1 (got " + std::to_string(request.threads) + ")");
  if (request.bindings.empty()) throw Error(ErrorKind::internal, "plan_pinning without ranks");
  if (!request.near.empty() && request.near.size() != request.bindings.size()) throw Error(ErrorKind::internal, "plan_pinning: near[] size");
  const bool automatic = request.threads == 0;
  const auto& first = request.bindings.front();
  if (std::all_of(request.bindings.begin(), request.bindings.end(), [&](const auto& b) { return b == first; })) {
    PinRequest r = request;
    const size_t n = r.bindings.size();
    if (automatic) r.threads = static_cast<int>(automatic_share(units_of(topo, first, n).pus.size(), n, r.spare));
    PinPlan plan = plan_shared(topo, r, first);
    if (automatic) plan.how += " (--threads 0: equal shares)";
    return plan;
  }
  const PinRequest& r = request;

  // The launcher bound the ranks itself: only disjoint sets are a layout we can keep.
  std::vector<int> all;
  for (const auto& b : r.bindings) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  if (std::adjacent_find(all.begin(), all.end()) != all.end())
    throw_usage_error("--pin-threads: the ranks on this node are bound to different but overlapping CPU sets by the "
                      "launcher; launch with --cpu-bind=none (srun) or --bind-to none (mpirun), or drop --pin-threads");
  PinPlan plan;
  for (size_t k = 0; k < r.bindings.size(); ++k) {
    const size_t t = automatic ? automatic_share(units_of(topo, r.bindings[k], 1).pus.size(), 1, r.spare) : static_cast<size_t>(r.threads);
    const Units units = units_of(topo, r.bindings[k], t);
    std::vector<int> pick;
    if (k < r.near.size() && !r.near[k].empty()) {
      for (int pu : units.pus)
        if (contains(r.near[k], pu) && pick.size() < t) pick.push_back(pu);
      if (pick.size() < t) pick.clear();  // not enough close to the GPU: ignore locality
    }
    for (size_t i = 0; pick.size() < t && i < units.pus.size(); ++i) pick.push_back(units.pus[i]);
    if (pick.size() < t)
      throw_usage_error("--pin-threads: local rank " + std::to_string(k) + " is bound by the launcher to " +
                        plural(units.pus.size(), units.kind) + ", fewer than --threads " + std::to_string(t) +
                        "; bind it to more CPUs (srun --cpus-per-task, mpirun --map-by slot:PE=N) or lower --threads");
    std::sort(pick.begin(), pick.end());
    plan.pus.push_back(pick);
  }
  const size_t fewest = std::min_element(plan.pus.begin(), plan.pus.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); })->size(),
               most = std::max_element(plan.pus.begin(), plan.pus.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); })->size();
  plan.how = plural(r.bindings.size(), "rank") + " x " + (fewest == most ? plural(most, "thread") : std::to_string(fewest) + " to " + std::to_string(most) + " threads") +
             ", each within the CPU set the launcher bound it to" + (automatic ? " (--threads 0)" : "");
  plan.own_sets = true;
  return plan;
}

PinPlan pin_local_ranks(MPI_Comm world, const WorldInfo& w, int threads, int spare, const std::vector<std::vector<int>>& near) {
  const Topology topo = Topology::this_machine();
  // Every rank of a node sees the same machine: one byte per PU of its complete cpuset.
  const std::vector<int> machine = all_pus(topo);
  const size_t width = machine.empty() ? 1 : static_cast<size_t>(machine.back()) + 1;
  std::vector<uint8_t> mine(width, 0);
  for (int pu : thread_binding(topo)) mine[static_cast<size_t>(pu)] = 1;

  const MpiComm local = MpiComm::node(world);
  std::vector<uint8_t> every(width * static_cast<size_t>(w.local_size));
  DLPERF_CHECK_MPI(MPI_Allgather(mine.data(), static_cast<int>(width), MPI_UINT8_T, every.data(), static_cast<int>(width),
                                 MPI_UINT8_T, local.get()));
  PinRequest request;
  request.threads = threads;
  request.spare = spare;
  request.near = near;
  request.bindings.resize(static_cast<size_t>(w.local_size));
  for (size_t k = 0; k < request.bindings.size(); ++k)
    for (size_t pu = 0; pu < width; ++pu)
      if (every[k * width + pu]) request.bindings[k].push_back(static_cast<int>(pu));
  PinPlan plan = plan_pinning(topo, request);
  bind_thread(topo, plan.pus[static_cast<size_t>(w.local_rank)]);
  return plan;
}

}  // namespace dlperf
