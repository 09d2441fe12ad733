// The kernel record catches what used to be planned: the bf16 convolution with NHWC input and
// its output left to `any`, which oneDNN 2.x ran on its reference kernel on CPUs with
// AVX512-BF16 but no AMX (kernel_record_test.cpp has the rest of the record's tests). It caps
// oneDNN's ISA at AVX512-BF16 first (dnnl::set_max_cpu_isa, possible only before the process's
// first primitive: hence an executable of its own), so an AMX machine checks it too; only a CPU
// without AVX512-BF16 skips it (label hardware).
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "backend/onednn/context.h"

namespace dlperf {
namespace {

using onednn::md;
using onednn::tag;

// The combination the backend planned before: oneDNN 2.x has no JIT kernel for it without AMX
// (the record must flag its ref:any); oneDNN 3.x has a brgemm one (the record must not flag it).
TEST(KernelRecord, OldNhwcBf16ConvolutionIsCaughtAsReference) {
  // Refused (status) by a oneDNN built without the cap: then the machine's own ISA decides.
  (void)dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16);
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

}  // namespace
}  // namespace dlperf
