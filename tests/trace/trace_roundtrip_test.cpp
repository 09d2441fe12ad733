// Every RunInfo field and every per-iteration value survives write then read; runs append
// in order; a flushed but unfinished run reads back as running with what was flushed.
#include <gtest/gtest.h>
#include <hdf5.h>

#include "core/error.h"
#include "trace/h5_io.h"
#include "trace/trace_reader.h"
#include "trace/trace_writer.h"
#include "trace_test_util.h"

namespace dlperf {
namespace {

RunRecord full_run() {
  RunRecord r = test::small_run(3, 7);
  RunInfo& i = r.info;
  i.variant = "static_loss_scale";
  i.seq_len = 0;
  i.nodes = 1;
  i.threads_per_rank = 8;
  i.iterations = 7;
  i.start_time_utc = "2026-11-21T21:40:00Z";
  i.end_time_utc = "2026-11-21T21:45:00Z";
  i.cpu_model = "Intel(R) Xeon(R) Platinum 8480+";
  i.cpu_isa = "avx512_core_amx";
  r.kernels = {{"conv1", "forward", "(32, 3, 224, 224) bf16 k7/2 -> 64", "brgconv:avx512_core_amx"},
               {"layer1.0.conv1.weight", "reorder", "(64, 64, 1, 1) f32 -> bf16", "jit:uni"}};
  i.gpu_model = "NVIDIA H100 80GB HBM3";
  i.gpu_memory_bytes = 85899345920;
  i.versions = {{"onednn", "3.1.1"}, {"hdf5", "1.10.8"}, {"nccl", "2.21.5"}};
  i.slurm_job_id = "123456";
  i.slurm_nodelist = "node[0-1]";
  i.git_revision = "abcdef012345";
  i.command_line = "dlperf-train --model resnet50 --output \"results.h5\"";
  i.nccl_transport = "IB";
  i.gpu_topology = "GPU0\tX\tNV18\nGPU1\tNV18\tX";
  i.status_reason = "";
  // Ragged ranks (rank 2 stopped early) must round-trip too.
  r.ranks[2].iterations.resize(5);
  // Schema 1.2: local ranks (ranks 0, 1 on one node, 2 on another) and full 64-bit checksums.
  const int64_t local[] = {0, 1, 0};
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    r.ranks[k].local_rank = local[k];
    r.ranks[k].param_checksum = 0xfedcba9876543210ull - k;  // above INT64_MAX: unsigned all the way
  }
  // Schema 1.3: the binding per rank (rank 2 recorded none).
  r.ranks[0].binding = "cpus 0-3 (numa 0); gpu 0000:17:00.0 (numa 0); nic mlx5_0 (numa 0)";
  r.ranks[1].binding = "cpus 4-7 (numa 1); gpu 0000:65:00.0 (numa 1)";
  return r;
}

TEST(TraceRoundTrip, EveryFieldSurvives) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord in = full_run();
  TraceWriter w(path, in.info);
  EXPECT_EQ(w.run_name(), "run_000001");
  w.finish(in, RunStatus::complete);

  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord& out = runs[0];
  EXPECT_EQ(out.location, path + ":/runs/run_000001");
  const RunInfo &a = in.info, &b = out.info;
  EXPECT_EQ(b.model, a.model);
  EXPECT_EQ(b.precision, a.precision);
  EXPECT_EQ(b.backend, a.backend);
  EXPECT_EQ(b.variant, a.variant);
  EXPECT_EQ(b.batch_per_device, a.batch_per_device);
  EXPECT_EQ(b.image_size, a.image_size);
  EXPECT_EQ(b.seq_len, a.seq_len);
  EXPECT_EQ(b.nodes, a.nodes);
  EXPECT_EQ(b.devices_per_node, a.devices_per_node);
  EXPECT_EQ(b.world_size, a.world_size);
  EXPECT_EQ(b.repeat_index, a.repeat_index);
  EXPECT_EQ(b.iterations, a.iterations);
  EXPECT_EQ(b.warmup, a.warmup);
  EXPECT_EQ(b.threads_per_rank, a.threads_per_rank);
  EXPECT_EQ(b.start_time_utc, a.start_time_utc);
  EXPECT_EQ(b.end_time_utc, a.end_time_utc);
  EXPECT_EQ(b.hosts, a.hosts);
  EXPECT_EQ(b.cpu_model, a.cpu_model);
  EXPECT_EQ(b.cpu_isa, a.cpu_isa);
  ASSERT_EQ(out.kernels.size(), in.kernels.size());
  for (size_t k = 0; k < in.kernels.size(); ++k) {
    EXPECT_EQ(out.kernels[k].op, in.kernels[k].op);
    EXPECT_EQ(out.kernels[k].pass, in.kernels[k].pass);
    EXPECT_EQ(out.kernels[k].shape, in.kernels[k].shape);
    EXPECT_EQ(out.kernels[k].impl, in.kernels[k].impl);
  }
  EXPECT_EQ(b.gpu_model, a.gpu_model);
  EXPECT_EQ(b.gpu_memory_bytes, a.gpu_memory_bytes);
  EXPECT_EQ(b.versions, a.versions);
  EXPECT_EQ(b.slurm_job_id, a.slurm_job_id);
  EXPECT_EQ(b.slurm_nodelist, a.slurm_nodelist);
  EXPECT_EQ(b.git_revision, a.git_revision);
  EXPECT_EQ(b.command_line, a.command_line);
  EXPECT_EQ(b.nccl_transport, a.nccl_transport);
  EXPECT_EQ(b.gpu_topology, a.gpu_topology);
  EXPECT_EQ(b.status, RunStatus::complete);
  ASSERT_EQ(out.ranks.size(), in.ranks.size());
  for (size_t r = 0; r < in.ranks.size(); ++r) {
    const RankTrace &x = in.ranks[r], &y = out.ranks[r];
    EXPECT_EQ(y.host, x.host);
    EXPECT_EQ(y.clock_offset, x.clock_offset);
    EXPECT_EQ(y.peak_memory_bytes, x.peak_memory_bytes);
    EXPECT_EQ(y.local_rank, x.local_rank);
    EXPECT_EQ(y.param_checksum, x.param_checksum);
    EXPECT_EQ(y.binding, x.binding);
    ASSERT_EQ(y.iterations.size(), x.iterations.size());
    for (size_t i = 0; i < x.iterations.size(); ++i) {
      EXPECT_EQ(y.iterations[i].start, x.iterations[i].start);
      EXPECT_EQ(y.iterations[i].end, x.iterations[i].end);
      EXPECT_EQ(y.iterations[i].comm_seconds, x.iterations[i].comm_seconds);
      EXPECT_EQ(y.iterations[i].loss, x.iterations[i].loss);
      for (int p = 0; p < kPhaseCount; ++p) EXPECT_EQ(y.iterations[i].phase_seconds[p], x.iterations[i].phase_seconds[p]);
    }
  }
}

// HDF5 keeps an attribute in its object header (64 KiB at most): a 100 kB SLURM_JOB_NODELIST, or
// the distinct hosts of a 4,000-node job, failed the run's whole record with an HDF5 error (exit 3).
TEST(TraceRoundTrip, TextTooLongForAnAttributeIsCutAndSaysSo) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord in = test::small_run(4000, 3);
  in.info.slurm_nodelist = std::string(99998, 'n') + "\xc3\xa9";  // ends in a two-byte character
  for (size_t k = 0; k < in.ranks.size(); ++k) in.ranks[k].host = "nid" + std::string(40, '0') + std::to_string(k);
  TraceWriter w(path, in.info);
  w.finish(in, RunStatus::complete);
  const auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  const std::string& nodelist = runs[0].info.slurm_nodelist;
  EXPECT_LE(nodelist.size(), 16384u);
  EXPECT_EQ(nodelist.substr(0, 5), "nnnnn");
  EXPECT_NE(nodelist.find(" ... [100000 bytes in all, cut to fit an HDF5 attribute]"), std::string::npos) << nodelist.substr(16000);
  ASSERT_EQ(runs[0].ranks.size(), 4000u);
  EXPECT_EQ(runs[0].ranks[3999].host, in.ranks[3999].host);  // every rank's host, from its dataset
  // A short one is kept whole.
  RunRecord small = test::small_run(2, 3, 1);
  small.info.slurm_nodelist = "node[0-1]";
  append_runs(path, {small});
  EXPECT_EQ(read_runs(path)[1].info.slurm_nodelist, "node[0-1]");
}

TEST(TraceRoundTrip, RunsAppendInOrder) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  for (int k = 0; k < 3; ++k) {
    RunRecord r = test::small_run(2, 5, k);
    TraceWriter w(path, r.info);
    w.finish(r, RunStatus::complete);
  }
  append_runs(path, {test::small_run(1, 4, 3), test::small_run(1, 4, 4)});
  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(runs[k].info.repeat_index, k);
  EXPECT_EQ(runs[4].location, path + ":/runs/run_000005");
}

TEST(TraceRoundTrip, FlushedButUnfinishedRunReadsBackRunning) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord full = test::small_run(2, 30);
  TraceWriter w(path, full.info);
  // Before any flush: registered, no data.
  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.status, RunStatus::running);
  EXPECT_TRUE(runs[0].ranks.empty());

  RunRecord part = full;
  for (auto& r : part.ranks) r.iterations.resize(10);
  w.flush(part);
  part = full;
  for (auto& r : part.ranks) r.iterations.resize(20);
  w.flush(part);  // grows the datasets
  runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.status, RunStatus::running);
  ASSERT_EQ(runs[0].ranks.size(), 2u);
  EXPECT_EQ(runs[0].ranks[1].iterations.size(), 20u);
  EXPECT_DOUBLE_EQ(runs[0].ranks[1].iterations[19].end, full.ranks[1].iterations[19].end);
}

TEST(TraceRoundTrip, FinishPartialKeepsReason) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord r = test::small_run(2, 8);
  TraceWriter w(path, r.info);
  w.flush(r);
  w.finish(r, RunStatus::partial, "SIGTERM after 8 of 120 iterations");
  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].info.status, RunStatus::partial);
  EXPECT_EQ(runs[0].info.status_reason, "SIGTERM after 8 of 120 iterations");
  EXPECT_EQ(runs[0].ranks[0].iterations.size(), 8u);
}

// A run written before schema 1.2 has neither local_rank nor param_checksum: it still reads,
// with both marked "not recorded".
TEST(TraceRoundTrip, SchemaOneOneRunHasNoLocalRanksOrChecksums) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord r = full_run();
  TraceWriter(path, r.info).finish(r, RunStatus::complete);
  {
    h5::Handle f = DLPERF_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    h5::write_attr(f.get(), "dlperf_schema_version", std::string("1.1"));
    ASSERT_GE(H5Ldelete(f.get(), "runs/run_000001/local_rank", H5P_DEFAULT), 0);
    ASSERT_GE(H5Ldelete(f.get(), "runs/run_000001/param_checksum", H5P_DEFAULT), 0);
  }
  auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].ranks.size(), 3u);
  for (const auto& rank : runs[0].ranks) {
    EXPECT_EQ(rank.local_rank, -1);
    EXPECT_EQ(rank.param_checksum, 0u);
  }
  EXPECT_EQ(runs[0].ranks[1].iterations.size(), 7u);
}

TEST(RunStatusNames, RoundTripAndRejectUnknown) {
  for (RunStatus s : {RunStatus::running, RunStatus::complete, RunStatus::partial, RunStatus::failed})
    EXPECT_EQ(run_status_from_string(to_string(s)), s);
  EXPECT_THROW(run_status_from_string("done"), Error);
  EXPECT_STREQ(to_string(Phase::comm_exposed), "comm_exposed");
}

}  // namespace
}  // namespace dlperf
