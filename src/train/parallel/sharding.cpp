#include "train/parallel/sharding.h"

#include <algorithm>

#include "core/error.h"

namespace dlperf {

BucketCut cut_buckets(const ParamStore& store, size_t bucket_bytes) {
  DLPERF_ASSERT(bucket_bytes > 0, "bucket size is positive");
  BucketCut cut;
  auto& buckets = cut.buckets;
  for (const auto& e : store.entries()) {
    const bool open_new = buckets.empty() || (buckets.back().end - buckets.back().begin) * sizeof(float) >= bucket_bytes;
    if (open_new) buckets.push_back({e.offset, e.offset, 0});
    GradBucket& b = buckets.back();
    b.end = e.offset + e.elems;
    b.params += 1;
    cut.bucket_of_entry.push_back(buckets.size() - 1);
  }
  // Padding between entries belongs to the bucket before it: it is zero on every rank, so
  // reducing it changes nothing, and it keeps the buckets a partition of the buffer.
  for (size_t b = 0; b + 1 < buckets.size(); ++b) buckets[b].end = buckets[b + 1].begin;
  if (!buckets.empty()) buckets.back().end = store.size();
  return cut;
}

ShardLayout make_shard_layout(const std::vector<GradBucket>& buckets, int world, int rank) {
  DLPERF_ASSERT(world >= 1 && rank >= 0 && rank < world, "a rank of the world");
  ShardLayout s;
  s.world = world;
  s.rank = rank;
  s.rank_elems.assign(static_cast<size_t>(world), 0);
  const auto W = static_cast<size_t>(world);
  for (size_t b = 0; b < buckets.size(); ++b) {
    const size_t len = buckets[b].end - buckets[b].begin;
    std::vector<size_t> counts(W, len / W);
    for (size_t k = 0; k < len % W; ++k) counts[(b + k) % W] += 1;  // the extra elements start at rank b mod world
    size_t off = 0;
    for (size_t r = 0; r < W; ++r) {
      if (r == static_cast<size_t>(rank) && counts[r] > 0) {
        s.pieces.push_back({buckets[b].begin + off, counts[r], s.local_size});
        s.local_size += counts[r];
      }
      s.rank_elems[r] += counts[r];
      off += counts[r];
    }
    s.counts.push_back(std::move(counts));
  }
  return s;
}

std::vector<ShardRange> shard_ranges(const ParamStore& store, const ShardLayout& shard) {
  // Each entry's decay holds from its offset to the next entry's (its padding included).
  const auto& entries = store.entries();
  std::vector<ShardRange> out;
  for (const ShardPiece& p : shard.pieces) {
    const size_t end = p.begin + p.count;
    for (size_t i = 0; i < entries.size(); ++i) {
      const size_t from = entries[i].offset, to = i + 1 < entries.size() ? entries[i + 1].offset : store.size();
      const size_t b = std::max(from, p.begin), e = std::min(to, end);
      if (b >= e) continue;
      if (!out.empty() && out.back().decay == entries[i].decay && out.back().begin + out.back().count == b &&
          out.back().local + out.back().count == p.local + (b - p.begin)) {
        out.back().count += e - b;  // merge neighbours of equal decay inside one piece
      } else {
        out.push_back({b, e - b, p.local + (b - p.begin), entries[i].decay});
      }
    }
  }
  return out;
}

}  // namespace dlperf
