// The CUDA backend's mapped buffers (backend/cuda/mapped_buffer.h, issue 25): device memory
// mapped in chunks, so ZeRO's sharded f32 master can give ranges back. Against the Buffer
// contract the CPU backend's pages keep: decommit gives back the whole chunks inside a range
// (and the allocation counter drops once the work queued on them is done), values outside it
// stay, a committed range reads as zero where it was given back, a buffer made decommitted
// holds nothing until committed, and an unmap waits for the kernels still using the memory.
// Skips without a GPU (the summary line's arithmetic runs anywhere).
#include <string>
#include <vector>

#include "backend/cuda/mapped_buffer.h"
#include "conformance_util.h"

namespace dlperf {
namespace {

#define SKIP_WITHOUT_MAPPING(be)                 \
  DLPERF_NEED_GPU();                             \
  auto be = make_backend(BackendKind::cuda, {}); \
  if (!be->frees_decommitted()) GTEST_SKIP() << "no virtual memory management"

constexpr size_t kMiB = 1u << 18;  // f32 elements in 1 MiB

TEST(MappedBuffer, DecommitGivesWholeChunksBackAndCommitReadsZero) {
  SKIP_WITHOUT_MAPPING(be);
  const int64_t base = be->allocated_bytes();
  auto buf = be->releasable_buffer(16 * kMiB);  // 16 MiB: 8 chunks of 2 MiB
  const int64_t whole = be->allocated_bytes() - base;
  EXPECT_GE(whole, 16 << 20);
  std::vector<float> v(16 * kMiB);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 1000) + 1.0f;
  buf->write(v);
  // [3 MiB, 11 MiB): the chunks at 4, 6 and 8 MiB lie wholly inside; those at 2 and 10 MiB do not.
  const size_t freed = buf->decommit(3 * kMiB, 8 * kMiB);
  EXPECT_EQ(freed, size_t{6} << 20);
  be->synchronize();
  buf->commit(0, 1);  // already mapped: only gives back what completed decommits freed
  EXPECT_EQ(be->allocated_bytes() - base, whole - (6 << 20)) << "the pool keeps nothing before a range comes back";
  EXPECT_EQ(buf->commit(3 * kMiB, 8 * kMiB), size_t{6} << 20);
  std::vector<float> got(v.size());
  buf->read(got);
  for (size_t i = 0; i < v.size(); ++i) {
    const bool given_back = i >= 4 * kMiB && i < 10 * kMiB;
    ASSERT_EQ(got[i], given_back ? 0.0f : v[i]) << "element " << i;
  }
  EXPECT_EQ(be->allocated_bytes() - base, whole);
}

// A chunk two ranges share (two buckets' gradients) goes once both are given back.
TEST(MappedBuffer, AChunkTwoRangesShareGoesWithTheSecond) {
  SKIP_WITHOUT_MAPPING(be);
  auto buf = be->releasable_buffer(8 * kMiB);
  EXPECT_EQ(buf->decommit(1 * kMiB, 2 * kMiB), size_t{0});        // half of chunks 0 and 1
  EXPECT_EQ(buf->decommit(3 * kMiB, 2 * kMiB), size_t{2} << 20);  // chunk 1 whole now; half of chunk 2
  EXPECT_EQ(buf->commit(2 * kMiB, 1 * kMiB), size_t{2} << 20);    // chunk 1 backed again
  EXPECT_EQ(buf->commit(3 * kMiB, 2 * kMiB), size_t{0});          // its other half: already backed
}

// Buffer::share (ZeRO's sharded master): decommitted chunks whose spans do not meet are mapped
// to the same pool chunk, once; committing and decommitting them maps nothing (a commit still
// zero-fills); a chunk still mapped is left alone; unshare unmaps them and frees the pool.
TEST(MappedBuffer, SharedChunksTakeTurnsInOnePoolWithoutRemapping) {
  SKIP_WITHOUT_MAPPING(be);
  const int64_t base = be->allocated_bytes();
  auto buf = be->releasable_buffer(16 * kMiB);  // 8 chunks of 2 MiB
  ASSERT_EQ(buf->share_granularity(), size_t{2} << 20);
  const int64_t whole = be->allocated_bytes() - base;
  std::vector<float> ones(16 * kMiB, 1.0f);
  buf->write(ones);
  ASSERT_EQ(buf->decommit(0, 4 * kMiB), size_t{4} << 20);         // chunks 0 and 1
  ASSERT_EQ(buf->decommit(8 * kMiB, 4 * kMiB), size_t{4} << 20);  // chunks 4 and 5
  std::vector<Buffer::Spans> live(8);
  live[0] = live[1] = {{0, 1}};
  live[4] = live[5] = {{2, 3}};
  live[2] = {{0, 3}};  // mapped: not shared
  EXPECT_EQ(buf->share(live), size_t{4} << 20);
  EXPECT_EQ(be->allocated_bytes() - base, whole - (4 << 20)) << "two chunks of pool in place of four";
  const cuda::MappingStats before = cuda::mapping_stats();
  EXPECT_EQ(buf->commit(0, 4 * kMiB), size_t{0});
  std::vector<float> sevens(4 * kMiB, 7.0f), got(4 * kMiB);
  buf->write(sevens, 0);
  buf->read(got, 8 * kMiB);
  EXPECT_EQ(got, sevens) << "the second range shows what was written through the first";
  EXPECT_EQ(buf->decommit(0, 4 * kMiB), size_t{0});
  EXPECT_EQ(buf->commit(8 * kMiB, 4 * kMiB), size_t{0});
  buf->read(got, 8 * kMiB);
  EXPECT_EQ(got, std::vector<float>(4 * kMiB, 0.0f)) << "a commit reads as zero, as a remapped chunk does";
  buf->read(got, 4 * kMiB);
  EXPECT_EQ(got, std::vector<float>(4 * kMiB, 1.0f)) << "a chunk still mapped is left alone";
  EXPECT_EQ(buf->decommit(8 * kMiB, 4 * kMiB), size_t{0});
  const cuda::MappingStats turns = cuda::mapping_stats() - before;
  EXPECT_EQ(turns.maps + turns.unmaps + turns.creates + turns.releases, 0) << "taking turns called the driver";
  buf->unshare();
  EXPECT_EQ(be->allocated_bytes() - base, whole - (8 << 20)) << "private and decommitted again";
  EXPECT_EQ(buf->commit(0, 4 * kMiB), size_t{4} << 20);
  buf->read(got, 0);
  EXPECT_EQ(got, std::vector<float>(4 * kMiB, 0.0f));
}

// A buffer keeps the chunks its decommits unmap for its next commits (as many as its largest
// partial commit mapped). Once its chunks take turns in a pool, those are given back: the pool
// is all it holds of them (ZeRO-2 on an 8B model cached GiBs beside the pool before).
TEST(MappedBuffer, SharingGivesTheCachedChunksBack) {
  SKIP_WITHOUT_MAPPING(be);
  const int64_t base = be->allocated_bytes();
  auto buf = be->decommitted_buffer(16 * kMiB);             // 8 chunks of 2 MiB, none mapped
  ASSERT_EQ(buf->commit(0, 8 * kMiB), size_t{8} << 20);    // chunks 0-3: a partial commit sizes the cache
  ASSERT_EQ(buf->decommit(0, 8 * kMiB), size_t{8} << 20);
  be->synchronize();
  std::vector<Buffer::Spans> live(8);
  live[0] = live[1] = {{0, 1}};
  live[2] = live[3] = {{2, 3}};
  EXPECT_EQ(buf->share(live), size_t{4} << 20);
  EXPECT_EQ(be->allocated_bytes() - base, 4 << 20) << "the pool's two chunks, no cached ones beside them";
  EXPECT_EQ(buf->commit(0, 4 * kMiB), size_t{0});
}

TEST(MappedBuffer, DecommittedBufferHoldsNothingUntilCommitted) {
  SKIP_WITHOUT_MAPPING(be);
  const int64_t base = be->allocated_bytes();
  auto buf = be->decommitted_buffer(8 * kMiB);
  EXPECT_EQ(be->allocated_bytes(), base);
  buf->zero();  // nothing mapped: nothing to clear, and no fault
  EXPECT_EQ(buf->commit(0, 8 * kMiB), size_t{8} << 20);
  EXPECT_EQ(be->allocated_bytes() - base, 8 << 20);
  std::vector<float> got(8 * kMiB, 1.0f);
  buf->read(got);
  for (float x : got) ASSERT_EQ(x, 0.0f);
}

TEST(MappedBuffer, UnmapWaitsForTheWorkStillUsingTheMemory) {
  SKIP_WITHOUT_MAPPING(be);
  auto a = be->releasable_buffer(64 * kMiB);
  auto b = be->decommitted_buffer(64 * kMiB);
  // Queue writes into a (3.4 GB, about a millisecond of an H200's time, where the decommit and
  // the commit take microseconds of the host's), give it back at once, then map b: the commit
  // must wait for the writes before a's chunks are unmapped (compute-sanitizer reports it
  // otherwise). Not more: racecheck runs each fill ~1,000x slower (200 fills passed the 60 s
  // bound on the wait there).
  for (int i = 0; i < 50; ++i) be->fill(a->data(), 64 * kMiB, static_cast<float>(i));
  a->decommit(0, 64 * kMiB);
  b->commit(0, 64 * kMiB);
  be->fill(b->data(), 64 * kMiB, 2.0f);
  std::vector<float> got(16);
  b->read(got, 64 * kMiB - 16);
  for (float x : got) EXPECT_EQ(x, 2.0f);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The summary line's arithmetic (no GPU needed): the counts since the measured steps began, per
// step, then the whole run's; the whole run's only where no step was measured.
TEST(MappedBuffer, SummaryGivesAMeasuredStepAndTheWholeRun) {
  using cuda::MappingStats;
  const MappingStats start{100, 60, 7, 40, 10, 0.5, 3};
  const MappingStats end{180, 140, 11, 40, 10, 0.9, 11};
  const std::string line = cuda::mapping_summary(end, start, 8);
  EXPECT_NE(line.find("a measured step 10.0 chunk maps, 10.0 unmaps, 0.0 creates, 0.0 releases, 1.0 waits for queued work, "
                      "50.00 ms in the driver; whole run 180 chunk maps, 140 unmaps, 40 creates, 10 releases, 11 waits"),
            std::string::npos)
      << line;
  const std::string totals = cuda::mapping_summary(end, start, 0);
  EXPECT_EQ(totals.find("measured"), std::string::npos) << totals;
  EXPECT_NE(totals.find("180 chunk maps"), std::string::npos) << totals;
  EXPECT_EQ(cuda::mapping_summary(MappingStats{}, MappingStats{}, 8), "");
}

}  // namespace
}  // namespace dlperf
