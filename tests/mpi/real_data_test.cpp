// Training on real JPEG files across ranks (mpirun -np 2): rank 0 writes a small synthetic
// dataset (dlperf-make-dataset's generator), every rank trains a reduced ResNet v1.5 for 20
// steps on it through the image loader, with gradients averaged across ranks. Checks: the
// loss falls (the classes' colour casts are learnable through crop, flip and resize), and
// the ranks read disjoint samples (each rank's share of the epoch order), in both layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <set>

#include "../comm/mpi_test_env.h"
#include "comm/make_communicator.h"
#include "data/synthetic_dataset.h"
#include "models/resnet.h"
#include "train/parallel/gradient_exchange.h"
#include "train/feed/image_data.h"
#include "train/param_store.h"
#include "train/trainer.h"

namespace dlperf::test {
namespace {

// Records the dataset index of every image the trainer took.
class Recording final : public DataSource {
 public:
  explicit Recording(RealImages& inner) : inner_(inner) {}
  const HostBatch& next() override {
    const HostBatch& b = inner_.next();
    seen.insert(seen.end(), inner_.last_samples().begin(), inner_.last_samples().end());
    return b;
  }
  void release() override { inner_.release(); }
  DataStats stats() const override { return inner_.stats(); }
  std::vector<uint32_t> seen;

 private:
  RealImages& inner_;
};

std::string dataset_dir() {
  // One folder per run of the test binary, shared by its ranks (rank 0 writes, then a barrier).
  uint64_t stamp = world().rank == 0 ? static_cast<uint64_t>(getpid()) : 0;
  MPI_Bcast(&stamp, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  const std::string dir = (std::filesystem::temp_directory_path() / ("dlperf_real_data_" + std::to_string(stamp))).string();
  if (world().rank == 0) {
    data::SyntheticDatasetSpec s;
    s.classes = 4;
    s.per_class = 100;  // 400 images: 200 per rank, more than 20 steps x 8 read
    s.width = 96;
    s.height = 72;
    s.shard_size = 64;
    s.greyscale_every = 13;
    s.cmyk_every = 29;
    data::write_synthetic_dataset(dir, s);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

struct Result {
  std::vector<float> losses;
  std::vector<uint32_t> seen;
};

Result train(const std::string& data_path) {
  auto dataset = share_dataset(MPI_COMM_WORLD, data_path, 4);
  auto be = make_backend(BackendKind::cpu, {Precision::fp32, 1, 0});
  ResNetConfig rc;
  rc.blocks = {1, 1, 1, 1};
  rc.width = 8;
  rc.classes = 4;
  rc.batch = 8;
  rc.image_size = 32;
  auto model = make_resnet(*be, rc);
  ParamStore store(*be, model->layers());
  model->init_params(5);
  auto comm = make_communicator(CommBackend::mpi, MPI_COMM_WORLD, world(), fast_options());
  comm->broadcast(store.values().data(), store.size(), 0);
  BucketedAllreduce exchange(*comm, store, 64 * 1024);
  Sgd sgd(*be, store, SgdConfig{0.9f, 0.0f});

  ImageDataConfig c;
  c.threads = 2;
  c.seed = 11;
  c.rank = world().rank;
  c.world = world().size;
  RealImages images(dataset, *model->raw_input("images"), c, *be);
  Recording data(images);
  TrainConfig tc;
  tc.iterations = 20;
  tc.warmup = 0;
  tc.print_every = 0;
  tc.lr = {LrScheduleKind::constant, 0.01f, 0, 20};
  Trainer trainer(*model, *be, sgd, tc);
  RankTrace trace;
  trainer.run(data, &exchange, trace, {}, nullptr);
  Result r;
  for (const auto& it : trace.iterations) r.losses.push_back(it.loss);
  r.seen = data.seen;
  EXPECT_EQ(trace.iterations.back().data_images >= 20 * rc.batch, true) << "the loader's image count reaches the trace";
  EXPECT_EQ(images.stats().bad_samples, 0);
  return r;
}

void check(const Result& r) {
  ASSERT_EQ(r.losses.size(), 20u);
  const float first = std::accumulate(r.losses.begin(), r.losses.begin() + 5, 0.0f) / 5;
  const float last = std::accumulate(r.losses.end() - 5, r.losses.end(), 0.0f) / 5;
  if (world().rank == 0) std::printf("loss: first five steps %.3f, last five %.3f\n", static_cast<double>(first), static_cast<double>(last));
  EXPECT_LT(last, 0.9f * first) << "loss did not fall: first five " << first << ", last five " << last;

  // Every rank's samples, gathered: no sample index read by two ranks.
  ASSERT_EQ(r.seen.size(), 160u);
  std::vector<uint32_t> all(r.seen.size() * static_cast<size_t>(world().size));
  MPI_Allgather(r.seen.data(), static_cast<int>(r.seen.size()), MPI_UINT32_T, all.data(), static_cast<int>(r.seen.size()), MPI_UINT32_T,
                MPI_COMM_WORLD);
  std::vector<std::set<uint32_t>> per_rank(static_cast<size_t>(world().size));
  for (size_t i = 0; i < all.size(); ++i) per_rank[i / r.seen.size()].insert(all[i]);
  EXPECT_EQ(per_rank[static_cast<size_t>(world().rank)].size(), r.seen.size()) << "a rank read a sample twice within the epoch";
  for (size_t a = 0; a < per_rank.size(); ++a)
    for (size_t b = a + 1; b < per_rank.size(); ++b)
      for (uint32_t s : per_rank[a]) EXPECT_FALSE(per_rank[b].count(s)) << "ranks " << a << " and " << b << " both read sample " << s;
}

TEST(RealData, FolderTreeTrainsAndRanksReadDisjointSamples) {
  const std::string dir = dataset_dir();
  check(train(dir));
  check(train(dir + "/shards"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world().rank == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlperf::test
