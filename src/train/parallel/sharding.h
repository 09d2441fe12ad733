// How the flat gradient and parameter buffers (train/param_store.h) are cut for data-parallel
// communication, and which part of them each rank owns under the sharded optimizer (ZeRO,
// Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models").
//
// Buckets: contiguous slices of the flat buffers, cut at parameter boundaries in flat order
// (= reverse layer order, the order backward finishes them) once a slice reaches bucket_bytes.
// Alignment padding between parameters belongs to the bucket before it, so the buckets are a
// partition of the buffers. Both strategies (replicated allreduce, ZeRO) use the same cut.
//
// Shards: every bucket is split into one block per rank, in rank order (the block layout of a
// reduce-scatter / all-gather); rank r owns block r of every bucket. A bucket of L elements gives
// L / world elements to each rank and one more to L % world ranks, starting at rank (bucket
// index mod world), so no rank is always the one with more: every rank's total is within one
// element per bucket of every other's (balanced, and recorded in the trace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "train/param_store.h"

namespace dlperf {

// ZeRO-2 (train/parallel/zero.h): gradient buckets reduce-scattering at once; launching one more
// first frees the oldest. The memory plan bounds stage 2's gradients with it.
inline constexpr size_t kZeroBucketsInFlight = 2;

struct GradBucket {
  size_t begin = 0, end = 0;  // [begin, end) of the flat buffers
  int params = 0;             // parameters (store entries) in the bucket
};

struct BucketCut {
  std::vector<GradBucket> buckets;
  std::vector<size_t> bucket_of_entry;  // per store entry (flat order)
};
BucketCut cut_buckets(const ParamStore& store, size_t bucket_bytes);

// One contiguous piece of a rank's shard: flat [begin, begin + count) is stored at shard-local
// [local, local + count) in the shard-sized buffers (reduced gradients, optimizer state).
struct ShardPiece {
  size_t begin = 0, count = 0, local = 0;
};

struct ShardLayout {
  int world = 1, rank = 0;
  std::vector<std::vector<size_t>> counts;  // per bucket: the block of each rank (elements), rank order
  std::vector<ShardPiece> pieces;           // this rank's block of every bucket, bucket order
  size_t local_size = 0;                    // elements this rank owns
  std::vector<size_t> rank_elems;           // elements each rank owns
};
ShardLayout make_shard_layout(const std::vector<GradBucket>& buckets, int world, int rank);

// The flat buffer cut into ranges of one weight-decay setting (each store entry with the
// padding after it), intersected with the pieces: what a sharded optimizer steps over.
struct ShardRange {
  size_t begin = 0, count = 0, local = 0;
  bool decay = false;
};
std::vector<ShardRange> shard_ranges(const ParamStore& store, const ShardLayout& shard);

}  // namespace dlperf
