// Launch geometry of the CUDA backend's kernels at the largest shapes a user can ask for,
// checked against CUDA's limits (gridDim.x < 2^31, gridDim.y and .z <= 65,535) without a GPU:
// the launchers compute their grids with the host functions tested here. A launch past a
// limit fails with cudaErrorInvalidConfiguration on the GPU, after hours of queueing a job.
//
// "Largest": well past what fits on a 141 GB H200 — ResNet-50 at batch 8192 (the first batch
// norm sees 8192 x 112 x 112 rows), BERT with batch 8192 x 512 tokens, 16 heads, a 4096-wide
// hidden layer and a 1,000,000-word vocabulary.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "backend/cuda/kernels.h"
#include "backend/cuda/llama_kernels.h"
#include "gpu_presence.h"

namespace dlperf::cuda {
namespace {

constexpr int kSms = 132;  // H100 SXM; the geometry only grows with fewer SMs where it matters
constexpr int64_t kImages = 8192, kTokens = 8192LL * 512, kHeads = 16, kSeq = 512, kHidden = 4096, kVocab = 1000000;

void expect_x(int64_t blocks, const char* what) {
  EXPECT_GE(blocks, 1) << what;
  EXPECT_LE(blocks, kMaxGridX) << what;
}

TEST(KernelLimits, BatchNormGridStaysWithinGridDimY) {
  for (int64_t rows : {int64_t{1}, int64_t{64}, kImages * 112 * 112, kImages * 7 * 7})
    for (int64_t c : {int64_t{3}, int64_t{64}, int64_t{2048}})
      for (int sms : {1, kSms, 1000}) {
        const BnNhwcGrid g = bn_nhwc_grid(rows, c, sms);
        EXPECT_LE(g.row_blocks, kMaxGridYZ) << rows << " x " << c;
        EXPECT_GE(g.row_blocks, 1u);
        EXPECT_EQ(g.tiles, static_cast<unsigned>((c + 31) / 32));
        expect_x(g.tiles, "batch norm tiles");
      }
  // the worst case for y: one tile of channels, as many rows as a user can give, many SMs
  EXPECT_LE(bn_nhwc_grid(int64_t{1} << 40, 1, 1 << 20).row_blocks, kMaxGridYZ);
}

TEST(KernelLimits, LayerNormGridUsesCompiledShapes) {
  // Each width gets the smallest columns-per-thread variant compiled for it (layer_norm.cu);
  // a 16 x 256 launch of 155 registers was the review's finding 1.
  const struct {
    int64_t cols;
    int per;
    unsigned threads;
  } want[] = {{768, 4, 256}, {1024, 4, 256}, {1025, 8, 256}, {2048, 8, 256}, {4096, 16, 256}, {4097, 16, 1024}, {5120, 16, 1024},
              {16384, 16, 1024}};
  for (const auto& w : want) {
    const AddNormGrid g = add_norm_grid(kTokens, w.cols, kSms);
    EXPECT_EQ(g.per_thread, w.per) << w.cols;
    EXPECT_EQ(g.threads, w.threads) << w.cols;
    EXPECT_GE(int64_t{g.per_thread} * g.threads, w.cols);
  }
}

// Every launch in the table is well formed (runs everywhere), and on a GPU fits what
// cudaFuncGetAttributes reports for the compiled kernel: threads within its maxThreadsPerBlock
// (which already accounts for registers), registers x threads within the SM's per-block file
// (allocated per warp in units of 256), static + dynamic shared memory within the block limit.
// Register spills are caught at compile time (-Xptxas -warn-spills, an error under
// DLPERF_WERROR); local memory itself is allowed (batch_pointers_kernel indexes a parameter array).
TEST(KernelLimits, LaunchTableIsComplete) {
  const std::vector<KernelLaunch> table = kernel_launches();
  EXPECT_GE(table.size(), 90u);  // 9 .cu files; most kernels in three element types
  std::set<std::string> names;
  for (const auto& k : table) {
    EXPECT_NE(k.func, nullptr) << k.name;
    EXPECT_GE(k.threads, 1u) << k.name;
    EXPECT_LE(k.threads, 1024u) << k.name;
    EXPECT_TRUE(names.insert(k.name).second) << "listed twice: " << k.name;
  }
  for (const char* must : {"add_norm_bwd<f16, 16 x 1024>", "add_norm_bwd<bf16, 4 x 256>", "bn_apply<bf16, 8>", "sgd_multi_kernel",
                           "xent_total", "copy_channels_kernel<f16>", "rms_bwd<bf16>", "xent_sum"})
    EXPECT_EQ(names.count(must), 1u) << must;
}

TEST(KernelLimits, EveryKernelFitsItsLaunchOnThisGpu) {
  if (!cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device here: the launch table is checked against cudaFuncGetAttributes on a GPU only";
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  for (const auto& k : kernel_launches()) {
    cudaFuncAttributes a{};
    ASSERT_EQ(cudaFuncGetAttributes(&a, k.func), cudaSuccess) << k.name;
    const int64_t warps = (k.threads + 31) / 32;
    const int64_t regs_per_warp = (int64_t{a.numRegs} * 32 + 255) / 256 * 256;
    EXPECT_LE(static_cast<int>(k.threads), a.maxThreadsPerBlock) << k.name << ": " << a.numRegs << " registers";
    EXPECT_LE(warps * regs_per_warp, int64_t{p.regsPerBlock}) << k.name << ": " << a.numRegs << " registers x " << k.threads << " threads";
    EXPECT_LE(a.sharedSizeBytes + k.dynamic_smem, p.sharedMemPerBlock) << k.name;
  }
}

TEST(KernelLimits, LayerNormGridAndWidth) {
  for (int64_t rows : {int64_t{1}, kTokens, int64_t{1} << 40}) {
    const AddNormGrid g = add_norm_grid(rows, kHidden, kSms);
    EXPECT_TRUE(g.supported);
    expect_x(g.blocks, "layer norm blocks");
    EXPECT_LE(g.threads, 1024u);
  }
  EXPECT_TRUE(add_norm_grid(kTokens, 16384, kSms).supported);
  EXPECT_FALSE(add_norm_grid(kTokens, 16385, kSms).supported);  // refused at plan time with a usage error
}

TEST(KernelLimits, RowAndElementGrids) {
  // one block per row, looping: softmax rows B * heads * T, cross-entropy rows, embedding runs
  expect_x(rows_grid(kTokens * kHeads), "masked softmax rows");
  expect_x(rows_grid(int64_t{1} << 40), "rows beyond gridDim.x (looped)");
  expect_x(rows_grid(0), "no rows");
  expect_x(scatter_rows_chunk_grid(kTokens), "embedding chunk sums");
  // grid-stride element loops: logits of a 1M vocabulary over B * P = 8192 * 80 slots
  expect_x(grid_for(kImages * 80 * kVocab), "elementwise");
  expect_x(grid_for(int64_t{1} << 50), "elementwise, huge");
  // one block per task of the weight refresh and the optimizers: 10^10 parameters
  expect_x((int64_t{10000000000} + kCastTaskElems - 1) / kCastTaskElems, "weight refresh tasks");
  expect_x((int64_t{10000000000} + kOptTaskElems - 1) / kOptTaskElems, "optimizer tasks");
  // batched matmul pointer arrays: 3 * B * heads pointers, grid-stride
  expect_x(grid_for(3 * kImages * kHeads), "batch pointers");
  (void)kSeq;
}

TEST(KernelLimits, LlamaGrids) {
  // Llama 3.1 8B at 8192 tokens x batch 1024 (8M rows), 32 query heads, head dim 128.
  constexpr int64_t kLlamaTokens = 8192LL * 1024, kQueryHeads = 32;
  for (int64_t rows : {int64_t{1}, kLlamaTokens, int64_t{1} << 40})
    for (int sms : {1, kSms, 1000}) {
      const unsigned b = rms_norm_backward_blocks(rows, sms);
      expect_x(b, "rms norm backward blocks");
      EXPECT_LE(int64_t{b}, rows > 0 ? rows : 1);
      EXPECT_LE(int64_t{b}, 4 * int64_t{sms});  // its (blocks, C) partial buffer stays small
    }
  expect_x(rows_grid(kLlamaTokens), "rms norm forward and token cross-entropy rows");
  expect_x(grid_for(kLlamaTokens * kQueryHeads * 64), "rope pairs");
  expect_x(grid_for(kLlamaTokens * 14336), "swiglu elements");
  // attention_gemm.cu: a block per score row of a chunk (kv heads x query rows), a warp per
  // (token, head) row of delta; both loop past the grid
  expect_x(rows_grid(8 * kLlamaTokens), "attention score rows, one chunk of every token");
  expect_x(rows_grid((kLlamaTokens * kQueryHeads + 7) / 8), "attention delta rows");
  expect_x(rows_grid(int64_t{1} << 50), "attention rows, huge (looped)");
}

}  // namespace
}  // namespace dlperf::cuda
