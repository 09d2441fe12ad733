// Embedding lookup, hand-written (a gather has no oneDNN primitive): y[i] = weight[ids[i]],
// read from the f32 master table and stored in the compute dtype. Backward scatter-adds the
// rows of dy into the f32 gradient; threads split the feature dim, so no two threads ever
// add into the same element (repeated ids need no atomics) and the sum order is fixed
// (deterministic).
//
// Tied weights (BERT's MLM decoder, tied_linear.cpp): the decoder's backward runs first and
// writes its part of the gradient, so this table's backward then adds instead of overwriting.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/onednn/bf16.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

class CpuEmbedding final : public WithParams<Embedding> {
 public:
  CpuEmbedding(Ctx ctx, const EmbeddingSpec& s, const CpuTensor& ids, DType out) : ctx_(std::move(ctx)), spec_(s), dtype_(out) {
    record_own_kernel(*ctx_, s.name, "forward_backward", shape_of(ids.dims(), DType::s32) + " -> " + std::to_string(s.features));
    if (ids.dtype() != DType::s32 || ids.dims().size() != 1)
      throw_usage_error("embedding " + s.name + ": ids " + to_string(ids.dims()) + " must be (M) s32");
    if (s.vocab <= 0 || s.features <= 0) throw_usage_error("embedding " + s.name + ": vocab and features must be positive");
    rows_ = ids.dims()[0];
    add_param(ctx_, s.name + ".weight", ParamRole::embedding, {s.vocab, s.features}, plain_md({s.vocab, s.features}, DType::f32));
  }

  TensorPtr make_output() const override {
    const Dims d{rows_, spec_.features};  // (M, C)
    return std::make_unique<CpuTensor>(ctx_, d, dtype_, plain_md(d, dtype_));
  }

  void forward(const Tensor& ids, Tensor& y) override {
    const int32_t* id = check_ids(ids);
    const auto* w = static_cast<const float*>(params_[0].value().get_data_handle());
    const int64_t c = spec_.features;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      T* out = static_cast<T*>(cpu(y).data());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < rows_; ++i) {
        const float* src = w + static_cast<int64_t>(id[i]) * c;
        T* dst = out + i * c;
        for (int64_t j = 0; j < c; ++j) dst[j] = from_f32<T>(src[j]);
      }
    });
  }

  void backward(const Tensor& ids, const Tensor& dy) override {
    const int32_t* id = check_ids(ids);
    auto* g = static_cast<float*>(params_[0].grad().get_data_handle());  // (vocab, C) f32
    const int64_t c = spec_.features;
    if (!accumulate_) std::memset(g, 0, static_cast<size_t>(spec_.vocab * c) * sizeof(float));
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T* d = static_cast<const T*>(cpu(dy).data());
#pragma omp parallel
      {
        // Each thread owns a contiguous range of feature columns.
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t j0 = c * t / nt, j1 = c * (t + 1) / nt;
        for (int64_t i = 0; i < rows_; ++i) {
          float* dst = g + static_cast<int64_t>(id[i]) * c;
          const T* src = d + i * c;
          for (int64_t j = j0; j < j1; ++j) dst[j] += to_f32(src[j]);
        }
      }
    });
  }

  Param& share_weight() {
    accumulate_ = true;
    return params_[0];
  }

 private:
  // Ids come from data files: an out-of-range id is bad input, not a crash.
  const int32_t* check_ids(const Tensor& ids) const {
    DLPERF_ASSERT(ids.numel() == rows_, "embedding ids of the planned shape");
    const auto* id = static_cast<const int32_t*>(cpu(ids).data());
    const auto [lo, hi] = std::minmax_element(id, id + rows_);
    if (rows_ > 0 && (*lo < 0 || *hi >= spec_.vocab))
      throw_usage_error("embedding " + spec_.name + ": token id " + std::to_string(*lo < 0 ? *lo : *hi) + " is outside [0, " +
                        std::to_string(spec_.vocab) + ")");
    return id;
  }

  Ctx ctx_;
  EmbeddingSpec spec_;
  DType dtype_;
  int64_t rows_ = 0;
  bool accumulate_ = false;
};

}  // namespace

std::unique_ptr<Embedding> make_embedding(Ctx ctx, const EmbeddingSpec& s, const Tensor& ids, DType out) {
  return std::make_unique<CpuEmbedding>(std::move(ctx), s, cpu(ids), out);
}

Param& share_embedding_weight(Embedding& e) { return static_cast<CpuEmbedding&>(e).share_weight(); }

}  // namespace dlperf::onednn
