// BERT's ops on the CUDA backend in fp32, tf32, fp16 and bf16 against the CPU (oneDNN) backend
// in f32 (relative L2 tolerances per precision, conformance_util.h): layer norm and the fused
// dropout + residual add + layer norm (also against the CUDA backend's own unfused ops with
// dropout on: the same masks); dropout's statistics and bit-exact masks for a seed; the word
// embedding with its tied decoder over a vocabulary that is not a multiple of 8 (padded inside
// the CUDA backend) and the cross-entropy over the padded logits; the sort-based embedding
// backward with runs longer than its chunks, bit-reproducible; batched matmul in the dense and
// head-interleaved layouts; masked softmax; GELU; row gather; multi-tensor AdamW and LAMB with
// the device-side clipping factor; the loss-scale overflow check; ZeRO's sharded LAMB.
#include <cmath>
#include <cstring>
#include <numeric>

#include "conformance_util.h"

namespace dlperf {
namespace {

using namespace cuda_test;

constexpr Precision kPrecisions[] = {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16};

class BertConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    DLPERF_NEED_GPU();
    cpu = make_backend(BackendKind::cpu, {});
  }
  static std::unique_ptr<Backend> gpu(Precision p) {
    BackendOptions o;
    o.precision = p;
    return make_backend(BackendKind::cuda, o);
  }
  // Each backend's run of `f(backend, dtype)`: the CPU in f32 first, then the GPU in p.
  template <class F>
  static std::vector<std::vector<float>> both(Backend& cpu_be, Backend& gpu_be, F&& f, std::vector<std::vector<float>>& want) {
    want = f(cpu_be, DType::f32);
    return f(gpu_be, gpu_be.dtype());
  }
  std::unique_ptr<Backend> cpu;
};

void expect_all(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got, double tol,
                const std::vector<std::string>& names) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) expect_rel(want[i], got[i], tol, i < names.size() ? names[i] : std::to_string(i));
}

TEST_F(BertConformance, LayerNormAndDropoutAddNorm) {
  const Dims d{10, 48};
  const size_t n = static_cast<size_t>(product(d));
  for (Precision p : kPrecisions) {
    SCOPED_TRACE(name(p));
    auto g = gpu(p);
    auto run = [&](Backend& be, DType t) -> std::vector<std::vector<float>> {
      auto x = input(be, d, t, Layout::canonical, randoms(n, 1, 2.0f));
      auto r = input(be, d, t, Layout::canonical, randoms(n, 2));
      auto dy = input(be, d, t, Layout::canonical, randoms(n, 3));
      auto ln = be.layer_norm({"ln", 48, 1e-12f}, *x);
      auto k1 = bind(be, *ln, 4);
      auto y = ln->make_output();
      ln->forward(*x, *y);
      auto dx = be.tensor_like(*x);
      ln->backward(*x, *dy, *dx);
      auto an = be.dropout_add_norm({{"an", 48, 1e-12f}, 0.0f}, *x);
      auto k2 = bind(be, *an, 5);
      auto y2 = an->make_output();
      an->forward(*x, *r, *y2, 9);
      auto da = be.tensor_like(*x);
      auto dr = be.tensor_like(*x);
      an->backward(*dy, *da, *dr);
      be.synchronize();
      return {read(*y), read(*dx), grad(*ln, 0), grad(*ln, 1), read(*y2), read(*da), read(*dr), grad(*an, 0), grad(*an, 1)};
    };
    std::vector<std::vector<float>> want;
    const auto got = both(*cpu, *g, run, want);
    expect_all(want, got, 2 * tolerance(p) + 1e-5, {"ln y", "ln dx", "ln dgamma", "ln dbeta", "addnorm y", "addnorm da", "addnorm dr",
                                                    "addnorm dgamma", "addnorm dbeta"});
  }
  // Dropout on: the fused op against the CUDA backend's dropout, add and layer norm with the
  // same seed and call counter (the same mask stream).
  for (Precision p : kPrecisions) {
    SCOPED_TRACE(std::string("fused vs unfused ") + name(p));
    auto g = gpu(p);
    const DType t = g->dtype();
    auto a = input(*g, d, t, Layout::canonical, randoms(n, 11));
    auto r = input(*g, d, t, Layout::canonical, randoms(n, 12));
    auto dy = input(*g, d, t, Layout::canonical, randoms(n, 13));
    auto fused = g->dropout_add_norm({{"an", 48, 1e-12f}, 0.25f}, *a);
    auto k1 = bind(*g, *fused, 5);
    auto y1 = fused->make_output();
    fused->forward(*a, *r, *y1, 77);
    auto da1 = g->tensor_like(*a), dr1 = g->tensor_like(*a);
    fused->backward(*dy, *da1, *dr1);
    auto drop = g->dropout(0.25f, *a);
    auto add = g->add(*a, *a, false);
    auto ln = g->layer_norm({"an", 48, 1e-12f}, *a);
    auto k2 = bind(*g, *ln, 5);
    auto dropped = g->tensor_like(*a), s = g->tensor_like(*a), y2 = ln->make_output();
    drop->forward(*a, *dropped, 77);
    add->forward(*dropped, *r, *s);
    ln->forward(*s, *y2);
    auto ds = g->tensor_like(*a), da2 = g->tensor_like(*a);
    ln->backward(*s, *dy, *ds);
    drop->backward(*ds, *da2);
    g->synchronize();
    const double tol = p == Precision::fp32 || p == Precision::tf32 ? 1e-5 : tolerance(p);
    expect_rel(read(*y2), read(*y1), tol, "y");
    expect_rel(read(*ds), read(*dr1), tol, "dr");
    expect_rel(read(*da2), read(*da1), tol, "da");
    expect_rel(grad(*ln, 0), grad(*fused, 0), tol, "dgamma");
    // the same elements are dropped
    const auto m1 = read(*da1), m2 = read(*da2);
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i) differ += (m1[i] == 0.0f) != (m2[i] == 0.0f);
    EXPECT_EQ(differ, 0u) << "dropout masks of the fused and unfused paths";
  }
}

TEST_F(BertConformance, DropoutStatisticsAndReproducibleMasks) {
  auto g = gpu(Precision::fp32);
  const int64_t n = 1 << 20;
  const float p = 0.1f;
  auto x = g->tensor({n}, DType::f32);
  x->write(std::vector<float>(static_cast<size_t>(n), 1.0f));
  auto d1 = g->dropout(p, *x), d2 = g->dropout(p, *x);
  auto y1 = g->tensor_like(*x), y2 = g->tensor_like(*x), y3 = g->tensor_like(*x), back = g->tensor_like(*x);
  d1->forward(*x, *y1, 5);
  d2->forward(*x, *y2, 5);  // another op, the same seed and call count: the same mask
  d1->backward(*x, *back);  // backward redraws the last forward's mask
  d1->forward(*x, *y3, 5);  // the next call: another mask
  g->synchronize();
  const auto a = read(*y1), b = read(*y2), c = read(*y3), bk = read(*back);
  EXPECT_EQ(a, b) << "same seed, same masks, bit for bit";
  EXPECT_EQ(a, bk) << "backward applies the forward's mask";
  EXPECT_NE(a, c) << "each call draws a new mask";
  const double kept = static_cast<double>(std::count_if(a.begin(), a.end(), [](float v) { return v != 0.0f; })) / static_cast<double>(n);
  const double sigma = std::sqrt(p * (1.0 - p) / static_cast<double>(n));
  EXPECT_NEAR(kept, 1.0 - p, 5 * sigma);
  for (float v : a) ASSERT_TRUE(v == 0.0f || std::fabs(v - 1.0f / (1.0f - p)) < 1e-6f) << v;
  const double mean = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(n);
  EXPECT_NEAR(mean, 1.0, 5 * sigma / (1.0 - p));
}

TEST_F(BertConformance, EmbeddingTiedDecoderOnAPaddedVocabulary) {
  const int64_t vocab = 37, c = 16, m = 24;  // 37 words: padded to 40 inside the CUDA backend
  std::vector<int32_t> ids(static_cast<size_t>(m)), labels(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % 11);  // repeats
  for (int64_t i = 0; i < m; ++i) labels[static_cast<size_t>(i)] = i % 5 == 0 ? -1 : static_cast<int32_t>((i * 13) % vocab);
  for (Precision p : kPrecisions) {
    SCOPED_TRACE(name(p));
    auto g = gpu(p);
    auto run = [&](Backend& be, DType t) -> std::vector<std::vector<float>> {
      auto idt = be.tensor({m}, DType::s32);
      idt->write_indices(ids);
      auto emb = be.embedding({"word", vocab, c}, *idt);
      auto k1 = bind(be, *emb, 3);
      auto e = emb->make_output();
      emb->forward(*idt, *e);
      auto h = input(be, {m, c}, t, Layout::canonical, randoms(static_cast<size_t>(m * c), 4));
      auto dec = be.tied_linear({"decoder", c, vocab, true}, *emb, *h);
      auto k2 = bind(be, *dec, 6);
      auto logits = dec->make_output();
      dec->forward(*h, *logits);
      auto lab = be.tensor({m}, DType::s32);
      lab->write_indices(labels);
      auto xent = be.cross_entropy({vocab, 0.0f, -1}, *logits);
      xent->forward(*logits, *lab);
      const float loss = xent->loss();
      auto dlogits = be.tensor_like(*logits);
      xent->backward(*dlogits, 2.0f);
      auto dh = be.tensor_like(*h);
      dec->backward(*h, *dlogits, dh.get());  // writes the table's gradient first
      auto de = input(be, {m, c}, t, Layout::canonical, randoms(static_cast<size_t>(m * c), 5));
      emb->backward(*idt, *de);  // then adds the scatter
      be.synchronize();
      return {read(*e), read(*logits), {loss}, read(*dlogits), read(*dh), grad(*emb, 0), grad(*dec, 0)};
    };
    std::vector<std::vector<float>> want;
    const auto got = both(*cpu, *g, run, want);
    expect_all(want, got, 2 * tolerance(p) + 1e-5, {"embedding y", "logits", "loss", "dlogits", "dx", "table gradient", "bias gradient"});
  }
}

TEST_F(BertConformance, EmbeddingBackwardLongRunsIsDeterministic) {
  const int64_t vocab = 5, c = 24, m = 300;  // runs of ~60 rows: longer than the 32-row chunks
  std::vector<int32_t> ids(static_cast<size_t>(m));
  std::mt19937 rng(3);
  for (auto& v : ids) v = static_cast<int32_t>(rng() % vocab);
  auto g = gpu(Precision::fp32);
  std::vector<std::vector<float>> grads;
  for (Backend* be : {cpu.get(), g.get(), g.get()}) {
    auto idt = be->tensor({m}, DType::s32);
    idt->write_indices(ids);
    auto emb = be->embedding({"e", vocab, c}, *idt);
    auto keep = bind(*be, *emb, 1);
    auto dy = input(*be, {m, c}, DType::f32, Layout::canonical, randoms(static_cast<size_t>(m * c), 2));
    emb->backward(*idt, *dy);
    be->synchronize();
    grads.push_back(grad(*emb, 0));
  }
  expect_rel(grads[0], grads[1], 1e-6, "embedding gradient");
  EXPECT_EQ(grads[1], grads[2]) << "the sorted scatter is bit-reproducible";
}

TEST_F(BertConformance, BatchedMatmulDenseAndHeadInterleaved) {
  const int64_t B = 2, heads = 3, T = 5, dk = 4;
  const BatchedMatmulSpec specs[] = {
      // BERT's scores q k^T and context probs v, in place on (B, T, heads, d) tensors
      {B * heads, T, T, dk, false, true, 0.5f, heads, MatmulOperand::heads, MatmulOperand::heads, MatmulOperand::dense},
      {B * heads, T, dk, T, false, false, 1.0f, heads, MatmulOperand::dense, MatmulOperand::heads, MatmulOperand::heads},
      {4, 3, 5, 6, true, false, 1.0f, 1, MatmulOperand::dense, MatmulOperand::dense, MatmulOperand::dense},
  };
  for (Precision p : kPrecisions) {
    auto g = gpu(p);
    for (const auto& s : specs) {
      SCOPED_TRACE(std::string(name(p)) + " batch " + std::to_string(s.batch));
      auto run = [&](Backend& be, DType t) -> std::vector<std::vector<float>> {
        const int64_t an = s.batch * s.m * s.k, bn = s.batch * s.k * s.n, cn = s.batch * s.m * s.n;
        auto a = input(be, {an}, t, Layout::canonical, randoms(static_cast<size_t>(an), 1));
        auto b = input(be, {bn}, t, Layout::canonical, randoms(static_cast<size_t>(bn), 2));
        auto dc = input(be, {cn}, t, Layout::canonical, randoms(static_cast<size_t>(cn), 3));
        auto op = be.batched_matmul(s, t);
        auto cc = be.tensor({cn}, t);
        op->forward(*a, *b, *cc);
        auto da = be.tensor_like(*a), db = be.tensor_like(*b);
        op->backward(*a, *b, *dc, *da, *db);
        be.synchronize();
        return {read(*cc), read(*da), read(*db)};
      };
      std::vector<std::vector<float>> want;
      const auto got = both(*cpu, *g, run, want);
      expect_all(want, got, tolerance(p) + 1e-5, {"c", "da", "db"});
    }
  }
}

TEST_F(BertConformance, MaskedSoftmaxGeluAndGather) {
  const Dims sd{2, 3, 5, 5};
  std::vector<float> mask{0, 0, 0, -10000, -10000, 0, 0, 0, 0, -10000};  // (B, T): padding at the end
  for (Precision p : kPrecisions) {
    SCOPED_TRACE(name(p));
    auto g = gpu(p);
    auto run = [&](Backend& be, DType t) -> std::vector<std::vector<float>> {
      const size_t n = static_cast<size_t>(product(sd));
      auto x = input(be, sd, t, Layout::canonical, randoms(n, 1, 4.0f));
      auto mk = be.tensor({2, 5}, DType::f32);
      mk->write(mask);
      auto sm = be.masked_softmax(*x);
      auto y = be.tensor_like(*x);
      sm->forward(*x, *mk, *y);
      auto dy = input(be, sd, t, Layout::canonical, randoms(n, 2));
      auto dx = be.tensor_like(*x);
      sm->backward(*y, *dy, *dx);
      auto h = input(be, {7, 33}, t, Layout::canonical, randoms(231, 3, 3.0f));
      auto gelu = be.activation(ActivationKind::gelu, *h);
      auto gy = gelu->make_output();
      gelu->forward(*h, *gy);
      auto gdy = input(be, {7, 33}, t, Layout::canonical, randoms(231, 4));
      auto gdx = be.tensor_like(*h);
      gelu->backward(*h, *gdy, *gdx);
      auto idx = be.tensor({4}, DType::s32);
      idx->write_indices(std::vector<int32_t>{6, 0, 6, 3});
      auto gather = be.gather_rows(*h, *idx);
      auto r = gather->make_output();
      gather->forward(*h, *idx, *r);
      auto dr = input(be, {4, 33}, t, Layout::canonical, randoms(132, 5));
      auto dh = be.tensor_like(*h);
      gather->backward(*idx, *dr, *dh);
      be.synchronize();
      return {read(*y), read(*dx), read(*gy), read(*gdx), read(*r), read(*dh)};
    };
    std::vector<std::vector<float>> want;
    const auto got = both(*cpu, *g, run, want);
    expect_all(want, got, 2 * tolerance(p) + 1e-5, {"softmax y", "softmax dx", "gelu y", "gelu dx", "gather y", "gather dx"});
  }
}

// A step gate in the backend's memory, loss scale and learning-rate factor 1: update_step_gate
// then adds clipping's factor and the applied-step count (Adam's bias correction).
std::unique_ptr<Buffer> new_gate(Backend& be) {
  auto gate = be.buffer(kGateFloats);
  std::vector<float> init(kGateFloats, 0.0f);
  init[gate_index(GateField::loss_scale)] = 1.0f;
  init[gate_index(GateField::lr)] = 1.0f;
  gate->write(init);
  return gate;
}

TEST_F(BertConformance, MultiTensorAdamWLambClippingAndOverflowCheck) {
  // Segments of several sizes, two past one 16384-element task, one without weight decay.
  const std::vector<ParamSegment> segs{{0, 100, true}, {112, 40000, true}, {40112, 7, false}, {40128, 20000, true}};
  const size_t n = 60128;
  const auto w0 = randoms(n, 1), g0 = randoms(n, 2, 4.0f);
  auto g = gpu(Precision::fp32);
  for (const char* opt : {"adamw", "lamb"}) {
    SCOPED_TRACE(opt);
    std::vector<float> w[2];
    int k = 0;
    for (Backend* be : {cpu.get(), g.get()}) {
      auto wb = be->buffer(n), gb = be->buffer(n), m = be->buffer(n), v = be->buffer(n), u = be->buffer(n);
      wb->write(w0);
      gb->write(g0);
      auto gate = new_gate(*be);
      for (int64_t step = 1; step <= 3; ++step) {
        be->update_step_gate({gb->data(), n}, gate->data(), StepGateUpdate{false, 2000, 1.0f, 0.5f});
        const AdamStep s{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, step, gate->data()};
        if (std::string(opt) == "adamw") be->adamw_step(wb->data(), gb->data(), m->data(), v->data(), segs, s);
        else be->lamb_step(wb->data(), gb->data(), m->data(), v->data(), u->data(), segs, s);
      }
      be->synchronize();
      w[k].resize(n);
      wb->read(w[k]);
      ++k;
    }
    expect_rel(w[0], w[1], 1e-6, "weights after three steps");
  }
  // fp16's dynamic loss scaling skips a step whose gradients overflowed: the sum of squares sees it.
  auto buf = g->buffer(1000);
  std::vector<float> v(1000, 0.5f);
  EXPECT_TRUE(std::isfinite(g->sum_squares({buf->data(), 1000})));
  v[777] = INFINITY;
  buf->write(v);
  EXPECT_FALSE(std::isfinite(g->sum_squares({buf->data(), 1000})));
  v[777] = NAN;
  buf->write(v);
  EXPECT_FALSE(std::isfinite(g->sum_squares({buf->data(), 1000})));
}

// ZeRO's LAMB: each rank's pieces of the parameters, their norms summed per parameter on the
// device, a sum over the ranks in between (emulated: another rank's norms added to the sums in
// the backend's memory), the ratios read from there. The CPU backend's defaults (lamb_update /
// lamb_apply per piece) are the reference. Parameter 1 lies in two pieces of this shard (one
// past a 16384-element task), with a gap held by another rank; parameter 2 does not decay;
// parameter 3 has no piece here: its sums are zero, and its weights and the gap stay as they were.
// On the GPU, steps 2 and 3 run each half as a captured CUDA graph: a host wait inside either
// (a norm read back) would fail the capture. Step 4's gradients overflow (fp16's loss scaling):
// the gate skips it, the sums are zero and the weights and moments stay as they were.
TEST_F(BertConformance, ShardedLambNormsStayOnTheDevice) {
  const size_t flat = 60128, local = 30107, params = 4;
  const std::vector<LambPiece> pieces{{.offset = 0, .local = 0, .count = 100, .param = 0, .decay = true},
                                      {.offset = 112, .local = 100, .count = 20000, .param = 1, .decay = true},
                                      {.offset = 30112, .local = 20100, .count = 10000, .param = 1, .decay = true},
                                      {.offset = 40112, .local = 30100, .count = 7, .param = 2, .decay = false}};
  const auto w0 = randoms(flat, 1), g0 = randoms(local, 2, 4.0f);
  // Another rank's squared norms of parameters 0..3 (w, u), added as the allreduce would.
  const double others[2 * params] = {3.0, 0.5, 900.0, 2.0, 1.5, 0.25, 40.0, 8.0};
  auto g = gpu(Precision::fp32);
  std::vector<float> w[2];
  std::vector<double> sums[2];
  int k = 0;
  for (Backend* be : {cpu.get(), g.get()}) {
    auto wb = be->buffer(flat), gb = be->buffer(local), m = be->buffer(local), v = be->buffer(local), u = be->buffer(local);
    auto sb = be->buffer(4 * params);  // 2 * params doubles
    auto* sd = reinterpret_cast<double*>(sb->data());
    wb->write(w0);
    gb->write(g0);
    auto gate = new_gate(*be);
    std::vector<float> raw(4 * params);
    std::vector<double> d(2 * params);
    // Queued as it is, or (GPU, steps 2 and 3) captured into a graph and launched; the graphs
    // are kept until the work is done.
    std::vector<std::unique_ptr<GraphSegment>> graphs;
    const auto run = [&](bool capture, const auto& work) {
      if (!capture) return work();
      be->begin_capture();
      work();
      graphs.push_back(be->end_capture());
      graphs.back()->launch();
    };
    for (int64_t step = 1; step <= 3; ++step) {
      const bool capture = be->supports_graphs() && step > 1;  // step 1 builds the tables
      be->update_step_gate({gb->data(), local}, gate->data(), StepGateUpdate{false, 2000, 1.0f, 0.5f});
      const AdamStep s{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, step, gate->data()};
      run(capture, [&] { be->lamb_shard_norms(wb->data(), gb->data(), m->data(), v->data(), u->data(), pieces, params, s, sd); });
      be->synchronize();
      sb->read(raw);
      std::memcpy(d.data(), raw.data(), d.size() * sizeof(double));
      EXPECT_EQ(d[6], 0.0);  // parameter 3: no piece on this rank
      EXPECT_EQ(d[7], 0.0);
      for (size_t i = 0; i < d.size(); ++i) d[i] += others[i];
      std::memcpy(raw.data(), d.data(), d.size() * sizeof(double));
      sb->write(raw);
      run(capture, [&] { be->lamb_shard_apply(wb->data(), u->data(), pieces, sd, s); });
    }
    be->synchronize();
    w[k].resize(flat);
    wb->read(w[k]);
    sums[k] = d;
    // Step 4: an overflowed gradient; the gate skips the step.
    std::vector<float> m3(local), v3(local), m4(local), v4(local), w4(flat), bad = g0;
    m->read(m3);
    v->read(v3);
    bad[20500] = INFINITY;
    gb->write(bad);
    be->update_step_gate({gb->data(), local}, gate->data(), StepGateUpdate{true, 2000, 0.0f, 0.5f});
    const AdamStep s4{1e-3f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 4, gate->data()};
    be->lamb_shard_norms(wb->data(), gb->data(), m->data(), v->data(), u->data(), pieces, params, s4, sd);
    be->synchronize();
    sb->read(raw);
    std::memcpy(d.data(), raw.data(), d.size() * sizeof(double));
    for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d[i], 0.0) << "backend " << k << ": sum " << i << " of a skipped step";
    for (size_t i = 0; i < d.size(); ++i) d[i] += others[i];
    std::memcpy(raw.data(), d.data(), d.size() * sizeof(double));
    sb->write(raw);
    be->lamb_shard_apply(wb->data(), u->data(), pieces, sd, s4);
    be->synchronize();
    wb->read(w4);
    m->read(m4);
    v->read(v4);
    EXPECT_EQ(w4, w[k]) << "backend " << k << ": a skipped step changed the weights";
    EXPECT_EQ(m4, m3) << "backend " << k << ": a skipped step changed the first moments";
    EXPECT_EQ(v4, v3) << "backend " << k << ": a skipped step changed the second moments";
    ++k;
  }
  // The GPU's kernels fuse multiply-adds where the CPU build rounds each product: the squared
  // norms agree to about 5e-8 (an emulation of this case), far from what a missing piece, a wrong
  // parameter index or another rank's norms left out would change.
  for (size_t i = 0; i < 2 * params; ++i) EXPECT_NEAR(sums[1][i], sums[0][i], 1e-6 * std::abs(sums[0][i])) << "sum " << i;
  expect_rel(w[0], w[1], 1e-6, "weights after three sharded steps");
  for (size_t i = 20112; i < 30112; ++i) ASSERT_EQ(w[1][i], w0[i]) << "another rank's piece of parameter 1 changed at " << i;
  for (size_t i = 40128; i < flat; ++i) ASSERT_EQ(w[1][i], w0[i]) << "parameter 3 (no piece here) changed at " << i;
  EXPECT_NE(w[1][0], w0[0]);
  EXPECT_NE(w[1][35000], w0[35000]);
}

}  // namespace
}  // namespace dlperf
