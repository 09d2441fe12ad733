// Grouped-query causal self-attention, blockwise with an online softmax (Dao et al. 2022,
// "FlashAttention"; Dao 2023, "FlashAttention-2", algorithms 1 and 2), in dlperf's own OpenMP
// loops: no (heads, T, T) buffer is ever formed, only (Br, Bc) tiles per thread. The forward
// saves one log-sum-exp per query row; the backward recomputes the probabilities from it.
//
// Per (sequence b, query head h, key/value head g = h / (H / Hkv)), with q scaled by 1/sqrt(D):
//   forward   for each key block j <= i (causal): S = Q_i K_j^T; m' = max(m, rowmax S);
//             P = exp(S - m'); l = l e^(m - m') + rowsum P; O_i = O_i e^(m - m') + P V_j
//             then O_i /= l, lse_i = m + log l
//   backward  Delta_i = rowsum(dO_i * O_i); P = exp(Q_i K_j^T - lse_i);
//             dV_j += P^T dO_i;  dS = P * (dO_i V_j^T - Delta_i);
//             dK_j += dS^T Q_i;  dQ_i += dS K_j   (both times 1/sqrt(D))
// The backward runs in two passes so that no two threads write one row: over key blocks (dK,
// dV, summing over the query heads of the group and the query blocks at or after the key
// block), then over query blocks (dQ). That recomputes P once more (FlashAttention-2 uses
// atomics for dQ instead); the result is deterministic for any thread count.
// Tiles are held in f32 whatever the storage dtype (f32 or bf16). The score tiles (Q K^T and
// dO V^T) are outer-product sums over the head dim against a transposed, zero-padded key tile,
// so that the inner loop runs over the 64 keys of the tile (4 AVX-512 vectors kept in
// registers) instead of a horizontal sum per (query, key) pair; exp is a vectorised polynomial
// (fast_exp). The tile kernels are compiled for AVX-512, AVX2 and the x86-64 baseline
// (target_clones: the loader picks the best the CPU has), as the rest of the build targets the
// baseline only.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/onednn/bf16.h"
#include "backend/onednn/fast_exp.h"
#include "backend/onednn/ops.h"

namespace dlperf::onednn {
namespace {

constexpr int64_t kBlock = 64;  // query and key rows per tile

// rows x D of a strided (row stride `stride` elements) source into dense f32, times `scale`.
template <class T>
void load_tile(const T* src, int64_t stride, int64_t rows, int64_t d, float scale, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) dst[r * d + c] = to_f32(src[r * stride + c]) * scale;
}

template <class T>
void store_tile(const float* src, int64_t rows, int64_t d, float scale, T* dst, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) dst[r * stride + c] = from_f32<T>(src[r * d + c] * scale);
}

inline void axpy(float alpha, const float* x, float* y, int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] += alpha * x[c];
}

#define DLPERF_TILE_CLONES DLPERF_ISA_CLONES

// rows x D row-major f32 -> D x kBlock (zero-padded beyond `rows`): the key-major operand of
// the score tiles.
void transpose_tile(const float* src, int64_t rows, int64_t d, float* dst) {
  std::fill(dst, dst + d * kBlock, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) dst[c * kBlock + r] = src[r * d + c];
}

// out (nq, kBlock) = a (nq, d) times bt (d, kBlock): every one of the kBlock columns is
// formed (the padded ones are 0), so the inner loop has a fixed trip count.
DLPERF_TILE_CLONES void score_tile(const float* a, const float* bt, int64_t nq, int64_t d, float* out) {
  for (int64_t r = 0; r < nq; ++r) {
    float acc[kBlock] = {};
    const float* ar = a + r * d;
    for (int64_t x = 0; x < d; ++x) {
      const float av = ar[x];
      const float* b = bt + x * kBlock;
#pragma omp simd
      for (int64_t c = 0; c < kBlock; ++c) acc[c] += av * b[c];
    }
    std::copy(acc, acc + kBlock, out + r * kBlock);
  }
}

// y (n, d) += p (n, kBlock)[:, :nk] times x (nk, d), or with `transposed` y (nk, d) +=
// p^T x (x then (n, d)): the P V, dS K, P^T dO and dS^T Q products of a tile.
DLPERF_TILE_CLONES void accumulate_tile(const float* p, const float* x, int64_t n, int64_t nk, int64_t d, bool transposed,
                                        float* y) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < nk; ++c) {
      const float w = p[r * kBlock + c];
      if (w == 0.0f) continue;
      if (transposed)
        axpy(w, x + r * d, y + c * d, d);
      else
        axpy(w, x + c * d, y + r * d, d);
    }
}

// One forward tile pair: s (nq, kBlock) holds Q_i K_j^T; updates the running maxima m, sums l
// and the output accumulator acc (nq, d) of the online softmax with key block j.
DLPERF_TILE_CLONES void softmax_tile(float* s, const float* vt, int64_t nq, int64_t nk, int64_t q0, int64_t k0, int64_t d,
                                     float* m, float* l, float* acc) {
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t last = std::min(nk, q0 + r - k0 + 1);  // keys at or before the query
    if (last <= 0) continue;
    float* pr = s + r * kBlock;
    float mx = m[r];
    for (int64_t c = 0; c < last; ++c) mx = std::max(mx, pr[c]);
    const float alpha = std::exp(m[r] - mx);  // 0 on the first block (m = -inf)
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < last; ++c) {
      pr[c] = fast_exp(pr[c] - mx);
      sum += pr[c];
    }
    float* ar = acc + r * d;
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) ar[c] *= alpha;
    for (int64_t c = 0; c < last; ++c) axpy(pr[c], vt + c * d, ar, d);
    l[r] = l[r] * alpha + sum;
    m[r] = mx;
  }
}

// P and dS of a tile pair from the score tiles: p holds Q K^T (scaled), ds holds dO V^T; on
// return p = exp(S - lse) and ds = P * (dO V^T - Delta), both 0 above the diagonal.
DLPERF_TILE_CLONES void grads_from_scores(float* p, float* ds, int64_t nq, int64_t nk, int64_t q0, int64_t k0,
                                          const float* lse, const float* delta) {
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t last = std::min(nk, std::max<int64_t>(0, q0 + r - k0 + 1));
    float* pr = p + r * kBlock;
    float* dr = ds + r * kBlock;
    const float lr = lse[r], dl = delta[r];
#pragma omp simd
    for (int64_t c = 0; c < kBlock; ++c) {
      const float e = fast_exp(pr[c] - lr);
      const bool in = c < last;
      pr[c] = in ? e : 0.0f;
      dr[c] = in ? e * (dr[c] - dl) : 0.0f;
    }
  }
}

class CpuCausalAttention final : public CausalAttention {
 public:
  CpuCausalAttention(Ctx ctx, const AttentionSpec& s, const CpuTensor& q) : ctx_(std::move(ctx)), s_(s), dtype_(q.dtype()) {
    if (s.batch <= 0 || s.seq_len <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 || s.heads % s.kv_heads != 0)
      throw_usage_error("causal_attention: batch, seq_len, heads, kv_heads, head_dim must be positive and kv_heads divide heads");
    const Dims want{s.batch * s.seq_len, s.heads * s.head_dim};
    if (q.dims() != want || q.desc() != plain_md(want, dtype_))
      throw_usage_error("causal_attention: q " + to_string(q.dims()) + " is not a plain " + to_string(want));
    if (dtype_ != DType::f32 && dtype_ != DType::bf16) throw_usage_error("causal_attention: f32 or bf16 data only");
    record_own_kernel(*ctx_, "causal_attention", "forward_backward",
                      "(" + std::to_string(s.batch) + ", " + std::to_string(s.seq_len) + ", " + std::to_string(s.heads) + "/" +
                          std::to_string(s.kv_heads) + " heads, " + std::to_string(s.head_dim) + ") " + to_string(dtype_));
    lse_.resize(static_cast<size_t>(s.batch * s.heads * s.seq_len));
    delta_.resize(lse_.size());
    rows_charge_ = Charge(ctx_->budget, static_cast<int64_t>(2 * lse_.size() * sizeof(float)));
  }

  TensorPtr make_output() const override {
    const Dims d{s_.batch * s_.seq_len, s_.heads * s_.head_dim};
    return std::make_unique<CpuTensor>(ctx_, d, dtype_, plain_md(d, dtype_));
  }

  void forward(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) override {
    dispatch_float(dtype_, [&](auto tag) { forward_impl<decltype(tag)>(q, k, v, o); });
  }

  void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& dout, Tensor& dq, Tensor& dk,
                Tensor& dv) override {
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      compute_delta<T>(o, dout);
      backward_kv<T>(q, k, v, dout, dk, dv);
      backward_q<T>(q, k, v, dout, dq);
    });
  }

 private:
  int64_t blocks() const { return (s_.seq_len + kBlock - 1) / kBlock; }
  int64_t rows_in(int64_t blk) const { return std::min(kBlock, s_.seq_len - blk * kBlock); }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(s_.head_dim)); }
  size_t stat(int64_t b, int64_t h, int64_t t) const { return static_cast<size_t>((b * s_.heads + h) * s_.seq_len + t); }

  template <class T>
  void forward_impl(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o) {
    const int64_t T_ = s_.seq_len, H = s_.heads, D = s_.head_dim, rep = s_.heads / s_.kv_heads;
    const int64_t qs = H * D, ks = s_.kv_heads * D, nb = blocks();
    const T* qp = static_cast<const T*>(cpu(q).data());
    const T* kp = static_cast<const T*>(cpu(k).data());
    const T* vp = static_cast<const T*>(cpu(v).data());
    T* op = static_cast<T*>(cpu(o).data());
    const float sc = scale();
#pragma omp parallel
    {
      std::vector<float> qt(kBlock * D), kt(kBlock * D), ktt(kBlock * D), vt(kBlock * D), acc(kBlock * D), p(kBlock * kBlock),
          m(kBlock), l(kBlock);
#pragma omp for collapse(3) schedule(dynamic)
      for (int64_t b = 0; b < s_.batch; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < nb; ++i) {
            const int64_t g = h / rep, q0 = i * kBlock, nq = rows_in(i);
            load_tile(qp + (b * T_ + q0) * qs + h * D, qs, nq, D, sc, qt.data());
            std::fill(acc.begin(), acc.end(), 0.0f);
            std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
            std::fill(l.begin(), l.end(), 0.0f);
            for (int64_t j = 0; j <= i; ++j) {
              const int64_t k0 = j * kBlock, nk = rows_in(j);
              load_tile(kp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, kt.data());
              load_tile(vp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, vt.data());
              transpose_tile(kt.data(), nk, D, ktt.data());
              score_tile(qt.data(), ktt.data(), nq, D, p.data());
              softmax_tile(p.data(), vt.data(), nq, nk, q0, k0, D, m.data(), l.data(), acc.data());
            }
            for (int64_t r = 0; r < nq; ++r) {
              const float inv = 1.0f / l[r];
              for (int64_t c = 0; c < D; ++c) acc[static_cast<size_t>(r * D + c)] *= inv;
              lse_[stat(b, h, q0 + r)] = m[r] + std::log(l[r]);
            }
            store_tile(acc.data(), nq, D, 1.0f, op + (b * T_ + q0) * qs + h * D, qs);
          }
    }
  }

  // Delta (B, H, T) = rowsum(dO * O).
  template <class T>
  void compute_delta(const Tensor& o, const Tensor& dout) {
    const int64_t H = s_.heads, D = s_.head_dim, rows = s_.batch * s_.seq_len;
    const T* op = static_cast<const T*>(cpu(o).data());
    const T* gp = static_cast<const T*>(cpu(dout).data());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < H; ++h) {
        float s = 0.0f;
        for (int64_t c = 0; c < D; ++c) s += to_f32(op[(r * H + h) * D + c]) * to_f32(gp[(r * H + h) * D + c]);
        delta_[stat(r / s_.seq_len, h, r % s_.seq_len)] = s;
      }
  }

  // P and dS of one (query block i, key block j) tile pair: p (nq, kBlock) probabilities, ds
  // (nq, kBlock) = P * (dO V^T - Delta), zero above the diagonal and beyond nk. qt holds Q
  // scaled by 1/sqrt(D); ktt and vtt are the key and value tiles transposed (transpose_tile).
  void tile_grads(int64_t b, int64_t h, int64_t q0, int64_t nq, int64_t k0, int64_t nk, const float* qt, const float* dot_,
                  const float* ktt, const float* vtt, float* p, float* ds) const {
    const int64_t D = s_.head_dim;
    score_tile(qt, ktt, nq, D, p);
    score_tile(dot_, vtt, nq, D, ds);
    grads_from_scores(p, ds, nq, nk, q0, k0, &lse_[stat(b, h, q0)], &delta_[stat(b, h, q0)]);
  }

  template <class T>
  void backward_kv(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, Tensor& dk, Tensor& dv) const {
    const int64_t T_ = s_.seq_len, H = s_.heads, D = s_.head_dim, rep = s_.heads / s_.kv_heads;
    const int64_t qs = H * D, ks = s_.kv_heads * D, nb = blocks();
    const T* qp = static_cast<const T*>(cpu(q).data());
    const T* kp = static_cast<const T*>(cpu(k).data());
    const T* vp = static_cast<const T*>(cpu(v).data());
    const T* gp = static_cast<const T*>(cpu(dout).data());
    T* dkp = static_cast<T*>(cpu(dk).data());
    T* dvp = static_cast<T*>(cpu(dv).data());
    const float sc = scale();
#pragma omp parallel
    {
      std::vector<float> qt(kBlock * D), gt(kBlock * D), kt(kBlock * D), vt(kBlock * D), ktt(kBlock * D), vtt(kBlock * D),
          dkt(kBlock * D), dvt(kBlock * D);
      std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock);
#pragma omp for collapse(3) schedule(dynamic)
      for (int64_t b = 0; b < s_.batch; ++b)
        for (int64_t g = 0; g < s_.kv_heads; ++g)
          for (int64_t j = 0; j < nb; ++j) {
            const int64_t k0 = j * kBlock, nk = rows_in(j);
            load_tile(kp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, kt.data());
            load_tile(vp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, vt.data());
            transpose_tile(kt.data(), nk, D, ktt.data());
            transpose_tile(vt.data(), nk, D, vtt.data());
            std::fill(dkt.begin(), dkt.end(), 0.0f);
            std::fill(dvt.begin(), dvt.end(), 0.0f);
            for (int64_t h = g * rep; h < (g + 1) * rep; ++h)
              for (int64_t i = j; i < nb; ++i) {
                const int64_t q0 = i * kBlock, nq = rows_in(i);
                load_tile(qp + (b * T_ + q0) * qs + h * D, qs, nq, D, sc, qt.data());
                load_tile(gp + (b * T_ + q0) * qs + h * D, qs, nq, D, 1.0f, gt.data());
                tile_grads(b, h, q0, nq, k0, nk, qt.data(), gt.data(), ktt.data(), vtt.data(), p.data(), ds.data());
                accumulate_tile(p.data(), gt.data(), nq, nk, D, true, dvt.data());   // dV += P^T dO
                accumulate_tile(ds.data(), qt.data(), nq, nk, D, true, dkt.data());  // dK += dS^T Q/sqrt(D)
              }
            store_tile(dkt.data(), nk, D, 1.0f, dkp + (b * T_ + k0) * ks + g * D, ks);
            store_tile(dvt.data(), nk, D, 1.0f, dvp + (b * T_ + k0) * ks + g * D, ks);
          }
    }
  }

  template <class T>
  void backward_q(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, Tensor& dq) const {
    const int64_t T_ = s_.seq_len, H = s_.heads, D = s_.head_dim, rep = s_.heads / s_.kv_heads;
    const int64_t qs = H * D, ks = s_.kv_heads * D, nb = blocks();
    const T* qp = static_cast<const T*>(cpu(q).data());
    const T* kp = static_cast<const T*>(cpu(k).data());
    const T* vp = static_cast<const T*>(cpu(v).data());
    const T* gp = static_cast<const T*>(cpu(dout).data());
    T* dqp = static_cast<T*>(cpu(dq).data());
    const float sc = scale();
#pragma omp parallel
    {
      std::vector<float> qt(kBlock * D), gt(kBlock * D), kt(kBlock * D), vt(kBlock * D), ktt(kBlock * D), vtt(kBlock * D),
          dqt(kBlock * D);
      std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock);
#pragma omp for collapse(3) schedule(dynamic)
      for (int64_t b = 0; b < s_.batch; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < nb; ++i) {
            const int64_t g = h / rep, q0 = i * kBlock, nq = rows_in(i);
            load_tile(qp + (b * T_ + q0) * qs + h * D, qs, nq, D, sc, qt.data());
            load_tile(gp + (b * T_ + q0) * qs + h * D, qs, nq, D, 1.0f, gt.data());
            std::fill(dqt.begin(), dqt.end(), 0.0f);
            for (int64_t j = 0; j <= i; ++j) {
              const int64_t k0 = j * kBlock, nk = rows_in(j);
              load_tile(kp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, kt.data());
              load_tile(vp + (b * T_ + k0) * ks + g * D, ks, nk, D, 1.0f, vt.data());
              transpose_tile(kt.data(), nk, D, ktt.data());
              transpose_tile(vt.data(), nk, D, vtt.data());
              tile_grads(b, h, q0, nq, k0, nk, qt.data(), gt.data(), ktt.data(), vtt.data(), p.data(), ds.data());
              accumulate_tile(ds.data(), kt.data(), nq, nk, D, false, dqt.data());  // dQ += dS K
            }
            store_tile(dqt.data(), nq, D, sc, dqp + (b * T_ + q0) * qs + h * D, qs);  // dQ = dS K / sqrt(D)
          }
    }
  }

  Ctx ctx_;
  AttentionSpec s_;
  DType dtype_;
  Charge rows_charge_;        // lse_ and delta_, as tensors are charged
  std::vector<float> lse_;    // (B, H, T) log-sum-exp of each query row's scaled scores, from the last forward
  std::vector<float> delta_;  // (B, H, T) rowsum(dO * O), backward scratch
};

}  // namespace

std::unique_ptr<CausalAttention> make_causal_attention(Ctx ctx, const AttentionSpec& s, const Tensor& q) {
  return std::make_unique<CpuCausalAttention>(std::move(ctx), s, cpu(q));
}

}  // namespace dlperf::onednn
