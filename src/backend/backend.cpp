// Backend selection and the small shared helpers of the interface.
#include "backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/check.h"
#include "core/error.h"

namespace dlperf {

namespace onednn {
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& o);
}
#ifdef DLPERF_CUDA_BACKEND
namespace cuda {
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o);
}
#endif

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::s32: return 4;
  }
  return 0;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::s32: return "s32";
  }
  return "?";
}

int64_t product(const Dims& d) {
  int64_t p = 1;
  for (auto v : d) p *= v;
  return p;
}

std::string to_string(const Dims& d) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < d.size(); ++i) os << (i ? ", " : "") << d[i];
  os << ')';
  return os.str();
}

const char* to_string(BackendKind k) { return k == BackendKind::cpu ? "cpu" : "cuda"; }

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::tf32: return "tf32";
  }
  return "?";
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::fp32: return DType::f32;
    case Precision::bf16: return DType::bf16;
    case Precision::fp16: return DType::f16;
    case Precision::tf32: return DType::f32;  // f32 storage; the math mode is the backend's
  }
  return DType::f32;
}

TensorPtr Backend::rows_of(Tensor& t, int64_t first, int64_t count) {
  (void)t, (void)first, (void)count;
  throw_usage_error(std::string("the ") + to_string(kind()) + " backend has no row views of a tensor");
}

// The checks every backend's rows_of makes before it builds the view: the view's dims.
Dims row_view_dims(const Tensor& t, int64_t first, int64_t count) {
  DLPERF_ASSERT(!t.dims().empty() && first >= 0 && count > 0 && first + count <= t.dims()[0],
                "rows [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of a tensor " + to_string(t.dims()));
  Dims d = t.dims();
  d[0] = count;
  return d;
}

void Backend::begin_capture() {
  throw_usage_error(std::string("--cuda-graph: the ") + to_string(kind()) + " backend cannot capture graphs; use --backend cuda");
}
std::unique_ptr<GraphSegment> Backend::end_capture() {
  throw_usage_error(std::string("--cuda-graph: the ") + to_string(kind()) + " backend cannot capture graphs");
}

namespace {
// f32 -> bf16 as the CPU's compute copies are made (oneDNN's reorders: AVX512-BF16's
// vcvtneps2bf16 rounds to nearest even and reads denormal inputs as zero); NaN stays NaN.
uint16_t bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  else if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

struct HostPackTable final : Backend::PackTable {
  std::vector<Backend::PackRun> runs;
};
}  // namespace

std::vector<size_t> share_backing(std::span<const Buffer::Spans> live, const std::function<bool(size_t)>& eligible) {
  // A sweep over the spans' edges: a span starts at its first event and ends after its last, so
  // a span ending at event e - 1 frees its pool granule for one starting at e.
  struct Edge {
    int64_t at;
    bool start;  // ends first at one event
    size_t granule;
    bool operator<(const Edge& o) const { return std::tie(at, start, granule) < std::tie(o.at, o.start, o.granule); }
  };
  std::vector<Edge> edges;
  for (size_t g = 0; g < live.size(); ++g) {
    if (live[g].empty() || !eligible(g)) continue;
    for (size_t i = 0; i < live[g].size(); ++i) {
      const Buffer::Span& s = live[g][i];
      DLPERF_ASSERT(!s.empty() && (i == 0 || live[g][i - 1].last < s.first), "a granule's spans are in order and do not meet");
      edges.push_back({s.first, true, g});
      edges.push_back({s.last + 1, false, g});
    }
  }
  std::sort(edges.begin(), edges.end());
  std::vector<size_t> backing(live.size(), Buffer::kNotShared);
  std::vector<std::map<int64_t, int64_t>> taken;  // per pool granule: the spans it backs, first -> last
  std::set<size_t> free;                          // pool granules no span holds at the sweep's event
  const auto fits = [&](size_t k, const Buffer::Spans& spans) {
    for (const Buffer::Span& s : spans) {
      auto it = taken[k].upper_bound(s.last);  // past the last span starting by s's end
      if (it != taken[k].begin() && std::prev(it)->second >= s.first) return false;
    }
    return true;
  };
  for (const Edge& e : edges) {
    size_t& k = backing[e.granule];
    if (!e.start) {
      free.insert(k);
    } else if (k != Buffer::kNotShared) {  // a later span: its pool granule was kept free for it
      DLPERF_ASSERT(free.erase(k) == 1, "a shared granule's pool granule is free for its later span");
    } else {
      const Buffer::Spans& spans = live[e.granule];
      const auto it = std::find_if(free.begin(), free.end(), [&](size_t c) { return fits(c, spans); });
      if (it == free.end()) {
        k = taken.size();
        taken.emplace_back();
      } else {
        k = *it;
        free.erase(it);
      }
      for (const Buffer::Span& s : spans) taken[k].emplace(s.first, s.last);
    }
  }
  return backing;
}

size_t share_together(std::span<const ShareRequest> parts) {
  if (parts.empty()) return 0;
  const size_t granule = parts[0].buffer->share_granularity();
  if (granule == 0) return 0;
  std::vector<Buffer::Spans> live;
  std::vector<std::pair<size_t, size_t>> at;  // per concatenated granule: (part, granule)
  for (size_t p = 0; p < parts.size(); ++p) {
    DLPERF_ASSERT(parts[p].buffer->share_granularity() == granule, "buffers shared together have one granularity");
    for (size_t g = 0; g < parts[p].live.size(); ++g) {
      live.push_back(parts[p].live[g]);
      at.emplace_back(p, g);
    }
  }
  const std::vector<size_t> backing = share_backing(live, [&](size_t i) { return parts[at[i].first].buffer->shareable(at[i].second); });
  size_t most = 0;
  for (size_t k : backing)
    if (k != Buffer::kNotShared) most = std::max(most, k + 1);
  if (most == 0) return 0;
  std::shared_ptr<Buffer::SharePool> pool = parts[0].buffer->make_share_pool();
  DLPERF_ASSERT(pool != nullptr, "a buffer with a share granularity makes a pool");
  // The chunks the parts cached for their next commits (ZeRO-2: as many as the largest
  // gradient or bucket mapped, GiBs for an 8B model's head) would be held beside the pool.
  for (const ShareRequest& part : parts) part.buffer->drop_cached();
  pool->grow(most);
  size_t from = 0;
  for (const ShareRequest& part : parts) {
    part.buffer->back(std::span<const size_t>(backing).subspan(from, part.live.size()), pool);
    from += part.live.size();
  }
  return most * granule;
}

size_t Buffer::share(std::span<const Spans> live) {
  const ShareRequest one{this, live};
  return share_together(std::span<const ShareRequest>(&one, 1));
}

std::unique_ptr<Backend::PackTable> Backend::pack_table(std::vector<PackRun> runs) {
  auto t = std::make_unique<HostPackTable>();
  t->runs = std::move(runs);
  return t;
}

// Host memory: the narrow half-words through bytes (the words are f32 storage).
void Backend::pack(const PackTable& t, const float* values, float* words) {
  for (const PackRun& r : static_cast<const HostPackTable&>(t).runs) {
    if (!r.narrow) {
      std::memcpy(words + r.word, values + r.value, r.count * sizeof(float));
      continue;
    }
    DLPERF_ASSERT(dtype() == DType::bf16, "the host packs bf16 (f16 is a GPU's)");
    auto* out = reinterpret_cast<unsigned char*>(words + r.word);
    for (size_t i = 0; i < r.count; ++i) {
      const uint16_t h = bf16_bits(values[r.value + i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    if (r.count % 2) std::memset(out + 2 * r.count, 0, 2);
  }
}

void Backend::unpack(const PackTable& t, const float* words, float* values) {
  for (const PackRun& r : static_cast<const HostPackTable&>(t).runs) {
    if (!r.narrow) {
      std::memcpy(values + r.value, words + r.word, r.count * sizeof(float));
      continue;
    }
    DLPERF_ASSERT(dtype() == DType::bf16, "the host packs bf16 (f16 is a GPU's)");
    const auto* in = reinterpret_cast<const unsigned char*>(words + r.word);
    for (size_t i = 0; i < r.count; ++i) {
      uint16_t h = 0;
      std::memcpy(&h, in + 2 * i, 2);
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      std::memcpy(values + r.value + i, &u, sizeof u);
    }
  }
}

namespace {
[[noreturn]] void no_llama_ops(const Backend& be, const char* op) {
  throw_usage_error(std::string("--model llama*: the ") + to_string(be.kind()) + " backend has no " + op +
                    " op yet (Llama runs on --backend cpu)");
}
}  // namespace

std::unique_ptr<RmsNorm> Backend::rms_norm(const RmsNormSpec&, const Tensor&) { no_llama_ops(*this, "RMSNorm"); }
std::unique_ptr<Rope> Backend::rope(const RopeSpec&, const Tensor&) { no_llama_ops(*this, "RoPE"); }
std::unique_ptr<SwiGlu> Backend::swiglu(const Tensor&) { no_llama_ops(*this, "SwiGLU"); }
std::unique_ptr<CausalAttention> Backend::causal_attention(const AttentionSpec&, const Tensor&) {
  no_llama_ops(*this, "causal attention");
}
std::unique_ptr<SoftmaxCrossEntropy> Backend::token_cross_entropy(const CrossEntropySpec&, const Tensor&) {
  no_llama_ops(*this, "token cross-entropy");
}

#ifndef DLPERF_CUDA_BACKEND
int cuda_device_count() { return 0; }
std::vector<std::string> cuda_pci_bus_ids() { return {}; }
int64_t cuda_device_memory_bytes(int) { return 0; }
#endif

void Backend::sgd_step(float* w, const float* g, float* m, std::span<const ParamSegment> segments, const SgdStep& s) {
  for (const ParamSegment& p : segments) {
    SgdStep t = s;
    t.weight_decay = p.decay ? s.weight_decay : 0.0f;
    const size_t o = p.offset, n = p.count;
    sgd_step({w + o, n}, {g + o, n}, {m + o, n}, t);
  }
}

void Backend::adamw_step(float* w, const float* g, float* m, float* v, std::span<const ParamSegment> segments, const AdamStep& s) {
  for (const ParamSegment& p : segments) {
    AdamStep t = s;
    t.weight_decay = p.decay ? s.weight_decay : 0.0f;
    const size_t o = p.offset, n = p.count;
    adamw_step({w + o, n}, {g + o, n}, {m + o, n}, {v + o, n}, t);
  }
}

namespace {
// ||w|| / ||u||; 1 when either is 0 or the parameter does not decay (FusedLAMB without nvlamb).
double lamb_trust_ratio(bool decay, double w_sq, double u_sq) { return decay && w_sq > 0.0 && u_sq > 0.0 ? std::sqrt(w_sq / u_sq) : 1.0; }
}  // namespace

void Backend::lamb_step(float* w, const float* g, float* m, float* v, float* update, std::span<const ParamSegment> segments,
                        const AdamStep& s) {
  for (const ParamSegment& p : segments) {
    AdamStep t = s;
    t.weight_decay = p.decay ? s.weight_decay : 0.0f;
    const size_t o = p.offset, n = p.count;
    const LambNorms norms = lamb_update({w + o, n}, {g + o, n}, {m + o, n}, {v + o, n}, {update + o, n}, t);
    lamb_apply({w + o, n}, {update + o, n}, static_cast<float>(s.lr * lamb_trust_ratio(p.decay, norms.w_sq, norms.u_sq)), s.gate);
  }
}

void Backend::lamb_shard_norms(const float* w, const float* g, float* m, float* v, float* update, std::span<const LambPiece> pieces,
                               size_t params, const AdamStep& s, double* sums) {
  std::fill(sums, sums + 2 * params, 0.0);
  for (const LambPiece& p : pieces) {
    DLPERF_ASSERT(p.param < params, "a LAMB piece's parameter in range");
    AdamStep t = s;
    t.weight_decay = p.decay ? s.weight_decay : 0.0f;
    const size_t l = p.local, n = p.count;
    const LambNorms norms = lamb_update({w + p.offset, n}, {g + l, n}, {m + l, n}, {v + l, n}, {update + l, n}, t);
    sums[2 * p.param] += norms.w_sq;
    sums[2 * p.param + 1] += norms.u_sq;
  }
}

void Backend::lamb_shard_apply(float* w, const float* update, std::span<const LambPiece> pieces, const double* sums, const AdamStep& s) {
  for (const LambPiece& p : pieces) {
    const double ratio = lamb_trust_ratio(p.decay, sums[2 * p.param], sums[2 * p.param + 1]);
    lamb_apply({w + p.offset, p.count}, {update + p.local, p.count}, static_cast<float>(s.lr * ratio), s.gate);
  }
}

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendOptions& options) {
  if (kind == BackendKind::cpu) return onednn::make_cpu_backend(options);
#ifdef DLPERF_CUDA_BACKEND
  return cuda::make_cuda_backend(options);
#else
  throw_usage_error("--backend cuda: this dlperf was built without the CUDA backend; use --backend cpu");
#endif
}

}  // namespace dlperf
