// Data-parallel training across ranks (run under mpirun with 2, 3 and 4 ranks):
//  * replicas that start different end up bit-identical after several steps (checksums);
//  * N ranks x batch b give the averaged gradients of 1 rank x batch N*b, on a model where
//    that identity holds (no batch norm: a small MLP);
//  * overlap is real: a bucket's allreduce starts before backward has finished.
#include <gtest/gtest.h>

#include <cstring>

#include "../comm/mpi_test_env.h"
#include "comm/make_communicator.h"
#include "models/init.h"
#include "models/resnet.h"
#include "train/parallel/gradient_exchange.h"
#include "train/param_store.h"
#include "train/feed/synthetic_data.h"
#include "train/trainer.h"

namespace dlperf::test {
namespace {

uint64_t fnv1a(const float* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::vector<uint64_t> allgather(uint64_t v) {
  std::vector<uint64_t> all(static_cast<size_t>(world().size));
  MPI_Allgather(&v, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}

ResNetConfig tiny_resnet() {
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1};
  rc.width = 8;
  rc.classes = 10;
  rc.batch = 4;
  rc.image_size = 32;
  return rc;
}

TEST(DataParallel, ReplicasEndBitIdentical) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  const auto rc = tiny_resnet();
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(1000 + static_cast<uint64_t>(world().rank));  // replicas start different
  auto comm = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, world(), fast_options());
  comm->broadcast(store.values().data(), store.size(), 0);
  const uint64_t initial = fnv1a(store.values().data(), store.size());
  for (uint64_t h : allgather(initial)) EXPECT_EQ(h, initial) << "broadcast left replicas different";

  BucketedAllreduce exchange(*comm, store, 64 * 1024);
  Sgd sgd(*be, store, SgdConfig{0.9f, 1e-4f});
  TrainConfig tc;
  tc.iterations = 5;
  tc.warmup = 0;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::constant, 0.05f, 0, 5};
  SyntheticImages data(rc.batch, rc.image_size, rc.classes, 77 + static_cast<uint64_t>(world().rank));  // own data per rank
  Trainer trainer(*model, *be, sgd, tc);
  RankTrace trace;
  trainer.run(data, &exchange, trace, {}, nullptr);

  const uint64_t after = fnv1a(store.values().data(), store.size());
  EXPECT_NE(after, initial) << "training changed nothing";
  const auto all = allgather(after);
  for (size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], all[0]) << "rank " << r << " parameters differ from rank 0's";
  // ParamStore::checksum, which dlperf-train records per rank, agrees, and sees one flipped bit.
  const uint64_t sum = store.checksum();
  for (uint64_t s : allgather(sum)) EXPECT_EQ(s, sum) << "checksums of bit-identical replicas differ";
  uint32_t bits = 0;
  std::memcpy(&bits, store.values().data(), sizeof bits);
  bits ^= 1u;  // one ulp of the first parameter
  std::memcpy(store.values().data(), &bits, sizeof bits);
  EXPECT_NE(store.checksum(), sum);
  // and the losses differ per rank (each saw its own data), so the agreement is the allreduce's doing
  EXPECT_GT(exchange.bucket_count(), 3u);
}

// A two-layer perceptron: x (M, 12) -> fc1 (16) -> ReLU -> fc2 (5) -> cross-entropy.
class Mlp final : public Model {
 public:
  Mlp(Backend& be, int64_t batch) : be_(be), batch_(batch) {
    x_ = be.tensor({batch, 12}, DType::f32);
    labels_ = be.tensor({batch}, DType::s32);
    fc1_ = be.linear({"fc1", 12, 16, true}, *x_);
    h_ = fc1_->make_output();
    relu_ = be.activation(ActivationKind::relu, *h_);
    a_ = relu_->make_output();
    fc2_ = be.linear({"fc2", 16, 5, true}, *a_);
    logits_ = fc2_->make_output();
    xent_ = be.cross_entropy({5, 0.0f, -1}, *logits_);
    dlogits_ = be.tensor_like(*logits_);
    da_ = be.tensor_like(*a_);
    dh_ = be.tensor_like(*h_);
  }
  std::string name() const override { return "mlp"; }
  int64_t samples_per_step() const override { return batch_; }
  std::vector<Layer*> layers() override { return {fc1_.get(), fc2_.get()}; }
  std::vector<Tensor*> inputs() override { return {x_.get(), labels_.get()}; }
  void load_into(const HostBatch& b, std::span<Tensor* const> dst) override {
    dst[0]->write(b.floats.at("x"));
    dst[1]->write_indices(b.ints.at("labels"));
  }
  void forward() override {
    fc1_->forward(*x_, *h_);
    relu_->forward(*h_, *a_);
    fc2_->forward(*a_, *logits_);
    xent_->forward(*logits_, *labels_);
  }
  float loss() override { return xent_->loss(); }
  void backward(const LossGradScale& scale, const GradReadyFn& ready) override {
    xent_->backward(*dlogits_, scale);
    fc2_->backward(*a_, *dlogits_, da_.get());
    ready(*fc2_);
    relu_->backward(*h_, *da_, *dh_);
    fc1_->backward(*x_, *dh_, nullptr);
    ready(*fc1_);
  }
  void init_params(uint64_t seed) override {
    Rng rng(seed);
    for (Layer* l : layers())
      for (size_t i = 0; i < l->params().size(); ++i) {
        std::vector<float> v(static_cast<size_t>(product(l->params()[i].dims)));
        uniform_fan_in(v, 12, rng);
        l->write_param(i, v);
      }
  }

 private:
  Backend& be_;
  int64_t batch_;
  TensorPtr x_, labels_, h_, a_, logits_, dlogits_, da_, dh_;
  std::unique_ptr<Linear> fc1_, fc2_;
  std::unique_ptr<Activation> relu_;
  std::unique_ptr<SoftmaxCrossEntropy> xent_;
};

HostBatch rows(const HostBatch& global, int64_t begin, int64_t count) {
  HostBatch b;
  const auto& x = global.floats.at("x");
  const auto& l = global.ints.at("labels");
  b.floats["x"].assign(x.begin() + begin * 12, x.begin() + (begin + count) * 12);
  b.ints["labels"].assign(l.begin() + begin, l.begin() + begin + count);
  return b;
}

TEST(DataParallel, NRanksOfBatchBAverageToOneRankOfBatchNB) {
  const int n = world().size;
  const int64_t b = 3;
  HostBatch global;  // the same N*b samples on every rank
  Rng rng(4242);
  for (int64_t i = 0; i < n * b * 12; ++i) global.floats["x"].push_back(rng.normal(0.0f, 1.0f));
  for (int64_t i = 0; i < n * b; ++i) global.ints["labels"].push_back(static_cast<int32_t>(rng.next() % 5));

  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  // Reference: one replica with the whole batch, no communication.
  Mlp whole(*be, n * b);
  ParamStore whole_store(*be, whole.layers());
  whole.init_params(9);
  whole.load(global);
  whole.forward();
  whole.backward(1.0f, [](const Layer&) {});
  const auto ref = whole_store.read_grads();

  // Data parallel: this rank's b rows, gradients summed over ranks, then divided by N.
  Mlp part(*be, b);
  ParamStore store(*be, part.layers());
  part.init_params(9);
  auto comm = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, world(), fast_options());
  BucketedAllreduce exchange(*comm, store, 256);  // small buckets: several allreduces
  part.load(rows(global, world().rank * b, b));
  exchange.begin_step(0);
  part.forward();
  part.backward(1.0f, [&](const Layer& l) { exchange.on_ready(l); });
  exchange.finish();
  exchange.complete(0);
  const auto got = store.read_grads();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t t = 0; t < got.size(); ++t)
    for (size_t i = 0; i < got[t].size(); ++i)
      EXPECT_NEAR(got[t][i] / static_cast<float>(n), ref[t][i], 1e-6 + 1e-5 * std::abs(ref[t][i])) << "tensor " << t << " element " << i;
}

TEST(DataParallel, BucketsStartBeforeBackwardEnds) {
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  const auto rc = tiny_resnet();
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(5);
  auto comm = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, world(), fast_options());
  BucketedAllreduce exchange(*comm, store, 32 * 1024);
  SyntheticImages data(rc.batch, rc.image_size, rc.classes, 3);
  model->load(data.next());
  model->forward();
  exchange.begin_step(0);
  model->backward(1.0f, [&](const Layer& l) { exchange.on_ready(l); });
  const double backward_end = steady_seconds();
  exchange.finish();
  exchange.complete(0);
  auto recorder = be->step_recorder();  // host communicators' times need no events
  const auto t = exchange.timings(0, *recorder);
  ASSERT_GT(t.size(), 2u);
  int before = 0;
  for (const auto& b : t) before += b.start < backward_end;
  EXPECT_GE(before, static_cast<int>(t.size()) - 1) << "buckets should start while backward runs";
  EXPECT_LT(t.front().start, backward_end);
  EXPECT_GT(BucketedAllreduce::in_flight_seconds(t), 0.0);
}

}  // namespace
}  // namespace dlperf::test
