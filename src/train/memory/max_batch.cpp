#include "train/memory/max_batch.h"

#include <memory>
#include <ostream>

#include "core/check.h"
#include "core/error.h"
#include "train/memory/out_of_memory.h"
#include "train/setup.h"

namespace dlperf {

BatchSearch search_max_batch(int64_t start, int64_t cap, const std::function<bool(int64_t)>& fits) {
  DLPERF_ASSERT(start >= 1 && cap >= start, "a search from a positive batch up to the cap");
  BatchSearch s;
  int64_t b = start;
  for (;;) {
    const bool ok = fits(b);
    s.trials.emplace_back(b, ok);
    if (ok) s.largest_fitting = b;
    else s.smallest_failing = b;
    if (s.smallest_failing == 0) {  // still doubling
      if (b >= cap) break;
      b = std::min(2 * b, cap);
      continue;
    }
    if (s.smallest_failing - s.largest_fitting <= 1) break;
    b = (s.largest_fitting + s.smallest_failing) / 2;
    if (b == 0) break;  // batch 1 does not fit
  }
  return s;
}

namespace {

// One attempt at batch b: build everything, train three steps. False on running out of memory.
bool attempt(const TrainOptions& base, const WorldInfo& w, int64_t b) {
  TrainOptions o = base;
  o.batch_size = b;
  o.iterations = 3;
  o.warmup = 1;
  o.print_every = 0;
  o.profile_ops = 0;
  try {
    TrainingStack s = build_stack(o, w);
    // A trial trains alone, without the exchange that commits and frees ZeRO-2's gradient
    // buckets: it holds them all, as stage 1 does (a batch that fits that way fits stage 2).
    if (s.store->gradients_decommitted()) s.store->grads().commit(0, s.store->size());
    init_stack(s, o, w, nullptr);
    TrainConfig tc = train_config(o, 1, nullptr);
    tc.max_loss_growth = 0;  // a trial asks whether the batch fits, not whether 3 steps converge
    Trainer trainer(*s.model, s.be(), *s.optimizer, tc, &s.store->grads(), s.store.get());
    RankTrace trace;
    trainer.run(*s.data, nullptr, trace, {}, nullptr);
    return true;
  } catch (...) {
    if (is_out_of_memory(std::current_exception())) return false;
    throw;
  }
}

}  // namespace

int64_t find_max_batch(MpiSession& session, const TrainOptions& o, std::ostream& out) {
  const WorldInfo& w = session.world();
  const bool root = w.rank == 0;
  constexpr int64_t kCap = 1 << 20;
  if (root)
    out << "find-max-batch: " << o.model << ", " << to_string(o.precision) << ", " << to_string(o.backend)
        << (o.memory_limit_mb > 0 ? ", memory limit " + std::to_string(o.memory_limit_mb) + " MiB" : std::string()) << "\n"
        << std::flush;
  const auto fits = [&](int64_t b) {
    int mine = attempt(o, w, b) ? 1 : 0, all = 0;
    DLPERF_CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, session.world_comm()));  // fits on every rank
    if (root) out << "  batch " << b << ": " << (all ? "trains" : "out of memory") << "\n" << std::flush;
    return all == 1;
  };
  const BatchSearch s = search_max_batch(o.batch_size, std::max<int64_t>(kCap, o.batch_size), fits);
  if (root) {
    if (s.largest_fitting == 0)
      out << "largest batch per device that trains: none (batch 1 runs out of memory)\n";
    else if (s.smallest_failing == 0)
      out << "largest batch per device that trains: at least " << s.largest_fitting << " (the search stops there)\n";
    else
      out << "largest batch per device that trains: " << s.largest_fitting << " (" << s.smallest_failing << " runs out of memory; "
          << s.trials.size() << " attempts)\n";
    out << std::flush;
  }
  return s.largest_fitting;
}

}  // namespace dlperf
