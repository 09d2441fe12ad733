// The kernel record of the CPU backend: every planned primitive appears with the implementation
// oneDNN chose, reference implementations are flagged, and the bf16 convolution that used to
// fall to oneDNN's reference kernel on CPUs without AMX (NHWC input, output left to `any`) is no
// longer what the backend plans (kernel_record_isa_test.cpp: the check catches it).
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/backend.h"
#include "backend/onednn/context.h"
#include "../common/cpu_bf16.h"

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


// Through the backend, in both layouts a model can start from: every pass of a bf16
// convolution is JIT, a first layer plans no backward-data pass, and the record names the op.
TEST(KernelRecord, Bf16ConvolutionsPlanJitKernelsInEveryLayout) {
  DLPERF_SKIP_WITHOUT_CPU_BF16();
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
  if (cpu_computes_bf16()) {
    auto b = make_backend(BackendKind::cpu, {Precision::bf16, 1, 0});
    const bool amx = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
    EXPECT_EQ(b->image_layout(), amx ? Layout::channels_last : Layout::canonical);
  }
}

}  // namespace
}  // namespace dlperf
