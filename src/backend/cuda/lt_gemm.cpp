// cuBLASLt GEMMs with bias and bias-gradient epilogues (see lt_gemm.h).
#include "backend/cuda/lt_gemm.h"

#include <climits>
#include <cstdint>

namespace dlperf::cuda {
namespace {

// cuBLASLt's recommended workspace on Hopper; reserved in the shared workspace at plan time.
constexpr size_t kLtWorkspace = size_t{32} << 20;
// The alignment the heuristics are asked for, and run() checks, of every operand and the bias.
constexpr uint32_t kAlign = 64;

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kAlign == 0; }

template <class T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  DLPERF_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v));
}

}  // namespace

LtGemm::LtGemm(Context& ctx, const GemmShape& g, int64_t x_pitch, int64_t y_pitch, int64_t z_pitch, DType in_type, DType out_type,
               LtEpilogue epilogue) {
  // Column-major view as in gemm_ex: A = y, B = x, D (m_c, n_c) = z^T.
  const int64_t m = g.n, n = g.m, k = g.k;
  const cublasOperation_t ta = g.trans_y ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_x ? CUBLAS_OP_T : CUBLAS_OP_N;
  DLPERF_ASSERT(g.batch == 1, "cuBLASLt epilogue GEMMs are not batched");
  DLPERF_CHECK(cublasLtMatmulDescCreate(&op_, ctx.gemm_compute(in_type), CUDA_R_32F));
  set_attr(op_, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set_attr(op_, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  const cublasLtEpilogue_t e = epilogue == LtEpilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
  set_attr(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, e);
  // The bias vector has D's type (cuBLASLt's default): the compute dtype in forward, f32 for the
  // gradient of an f32 weight gradient.
  const auto bias_type = static_cast<int32_t>(cublas_type(out_type));
  set_attr(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type);
  // cublasLt.h: the heuristics read the bias pointer's value (never dereferenced) to infer its
  // alignment; NULL would claim the best alignment. A placeholder at exactly kAlign bytes asks
  // for algorithms valid at the alignment run() checks; run() sets the real pointer.
  set_attr(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, reinterpret_cast<const void*>(std::uintptr_t{kAlign}));
  const cudaDataType_t in = cublas_type(in_type), out = cublas_type(out_type);
  DLPERF_CHECK(cublasLtMatrixLayoutCreate(&a_, in, static_cast<uint64_t>(ta == CUBLAS_OP_N ? m : k),
                                          static_cast<uint64_t>(ta == CUBLAS_OP_N ? k : m), y_pitch));
  DLPERF_CHECK(cublasLtMatrixLayoutCreate(&b_, in, static_cast<uint64_t>(tb == CUBLAS_OP_N ? k : n),
                                          static_cast<uint64_t>(tb == CUBLAS_OP_N ? n : k), x_pitch));
  DLPERF_CHECK(cublasLtMatrixLayoutCreate(&d_, out, static_cast<uint64_t>(m), static_cast<uint64_t>(n), z_pitch));

  cublasLtMatmulPreference_t pref = nullptr;
  DLPERF_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kLtWorkspace;
  // Parameters sit in the flat buffers on 64-byte boundaries, bias slices too; tensors and
  // compute copies are cudaMalloc'd (256). Ask for algorithms valid at 64.
  const uint32_t align = kAlign;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (auto a : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                 CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, a, &align, sizeof align);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(ctx.cublas_lt, op_, a_, b_, d_, d_, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
    why_not_ = std::string("cuBLASLt has no ") + (epilogue == LtEpilogue::bias ? "bias" : "bias-gradient") + " epilogue algorithm for " +
               to_string(in_type) + " (" + std::to_string(g.m) + " x " + std::to_string(g.k) + ") x (" + std::to_string(g.k) + " x " +
               std::to_string(g.n) + ") (" + cublasGetStatusString(st != CUBLAS_STATUS_SUCCESS ? st : result.state) + ")";
    return;
  }
  algo_ = result.algo;
  workspace_ = result.workspaceSize;
  ctx.workspace.reserve(workspace_);
  valid_ = true;
}

LtGemm::~LtGemm() {
  if (d_) cublasLtMatrixLayoutDestroy(d_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

void LtGemm::run(Context& ctx, float alpha, const void* x, const void* y, void* z, const void* vec) {
  DLPERF_ASSERT(valid_, "a planned cuBLASLt GEMM");
  DLPERF_ASSERT(aligned(x) && aligned(y) && aligned(z) && aligned(vec), "cuBLASLt operands and bias on 64-byte boundaries (the heuristics' promise)");
  set_attr(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vec);  // a host-side descriptor update, no launch
  const float beta = 0.0f;
  DLPERF_CHECK(cublasLtMatmul(ctx.cublas_lt, op_, &alpha, y, a_, x, b_, &beta, z, d_, z, d_, &algo_, ctx.workspace.get(),
                              ctx.workspace.bytes(), ctx.s()));
}

}  // namespace dlperf::cuda
