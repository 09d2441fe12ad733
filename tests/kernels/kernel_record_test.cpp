// The kernel record of the CPU backend: every planned primitive appears with the implementation
// oneDNN chose, reference implementations are flagged, and the bf16 convolution that used to
// fall to oneDNN's reference kernel on CPUs without AMX (NHWC input, output left to `any`) is
// both caught by the check and no longer what the backend plans.
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/backend.h"
#include "backend/onednn/context.h"

namespace dlperf {
namespace {

using onednn::md;
using onednn::tag;

TEST(KernelRecord, ReferenceNamesAreFlagged) {
  for (const char* ref : {"ref:any", "ref_fused_convolution:any", "gemm:ref", "ref_convolution_int8:any", "x64:ref"})
    EXPECT_TRUE(onednn::is_reference_impl(ref)) << ref;
  for (const char* fast : {"jit:avx512_core", "brgconv:avx512_core_bf16", "jit_bf16_1x1:avx512_core_bf16", "brg:avx512_core_amx",
                           "gemm:jit", "jit:uni", "bnorm_jit:avx512_core_bf16", "simple:any", onednn::kOwnKernel})
    EXPECT_FALSE(onednn::is_reference_impl(fast)) << fast;
}

bool cpu_has_bf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

// The combination the backend planned before: oneDNN 2.x has no JIT kernel for it without AMX
// (the record must flag its ref:any); oneDNN 3.x has a brgemm one (the record must not flag it).
TEST(KernelRecord, OldNhwcBf16ConvolutionIsCaughtAsReference) {
  if (dnnl::get_effective_cpu_isa() != dnnl::cpu_isa::avx512_core_bf16)
    GTEST_SKIP() << "needs avx512_core_bf16 without AMX (where the old plan fell to ref:any)";
  onednn::Context ctx;
  const md x(dnnl::memory::dims{4, 64, 16, 16}, onednn::dt::bf16, tag::nhwc);
  const md w(dnnl::memory::dims{64, 64, 3, 3}, onednn::dt::bf16, tag::any);
  const md y(dnnl::memory::dims{4, 64, 16, 16}, onednn::dt::bf16, tag::any);
  const auto pd = onednn::compat::conv_forward(ctx.engine, x, w, md{}, y, {1, 1}, {1, 1});
  onednn::record_kernel(ctx, "old_conv", "forward", "(4, 64, 16, 16) bf16", pd);
  ASSERT_EQ(ctx.kernels.size(), 1u);
  EXPECT_EQ(ctx.kernels[0].reference, !onednn::compat::kOneDnn3) << ctx.kernels[0].impl;
}

// Through the backend, in both layouts a model can start from: every pass of a bf16
// convolution is JIT, a first layer plans no backward-data pass, and the record names the op.
TEST(KernelRecord, Bf16ConvolutionsPlanJitKernelsInEveryLayout) {
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no native bf16";
  for (Layout layout : {Layout::channels_last, Layout::canonical}) {
    auto be = make_backend(BackendKind::cpu, {Precision::bf16, 1, 0});
    auto x = be->tensor({4, 64, 16, 16}, DType::bf16, layout);
    auto conv = be->conv2d({"c", 64, 64, 3, 1, 1}, *x);
    auto first = be->conv2d({"first", 64, 32, 1, 1, 0, false, false}, *x);
    const auto kernels = be->planned_kernels();
    int passes = 0;
    for (const auto& k : kernels) {
      EXPECT_FALSE(k.reference) << k.op << " " << k.pass << " " << k.impl;
      if (k.op == "c" && k.pass != "reorder") ++passes;
      EXPECT_FALSE(k.op == "first" && k.pass == "backward_data") << "a first layer needs no input gradient";
    }
    EXPECT_EQ(passes, 3) << "forward, backward_weights, backward_data";
  }
}

TEST(KernelRecord, BackendReportsItsIsaAndImageLayout) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  EXPECT_FALSE(be->isa().empty());
  EXPECT_EQ(be->image_layout(), Layout::canonical);
  if (cpu_has_bf16()) {
    auto b = make_backend(BackendKind::cpu, {Precision::bf16, 1, 0});
    const bool amx = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
    EXPECT_EQ(b->image_layout(), amx ? Layout::channels_last : Layout::canonical);
  }
}

}  // namespace
}  // namespace dlperf
