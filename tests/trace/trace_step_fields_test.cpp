// The schema 1.2 fields (issue 13) survive write then read: how the step ran, per-iteration
// loss scale and skipped steps, per-bucket allreduce times, the device's memory peak and the
// per-op profile; a file written by an older minor version is raised to this one on append
// and its earlier runs read back with the defaults.
#include <gtest/gtest.h>
#include <hdf5.h>

#include "trace/h5_io.h"
#include "trace/trace_reader.h"
#include "trace/trace_schema.h"
#include "trace/trace_writer.h"
#include "trace_test_util.h"

namespace dlperf {
namespace {

RunRecord step_run() {
  RunRecord r = test::small_run(2, 6);
  r.info.input_mode = "pipelined";
  r.info.comm_backend = "nccl";
  r.info.loss_scaling = "dynamic";
  r.info.cuda_graph = 1;
  r.info.profile_ops = 2;
  r.info.grad_accum = 4;  // 1.3
  r.info.global_batch = 256;
  r.info.zero_stage = 1;
  r.info.memory_plan_bytes = int64_t{5} << 33;
  r.info.zero_shard_min = 1000;
  r.info.zero_shard_max = 1003;
  r.info.versions["cublas"] = "13.0.0";
  for (size_t k = 0; k < r.ranks.size(); ++k) {
    RankTrace& rank = r.ranks[k];
    rank.device_memory_peak_bytes = 1000 + static_cast<int64_t>(k);
    rank.allocated_peak_bytes = 2000 + static_cast<int64_t>(k);
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      IterationTiming& it = rank.iterations[i];
      it.loss_scale = 65536.0f / static_cast<float>(1 << (i % 3));
      it.skipped = i == 1;
      it.comm_bytes = (int64_t{1} << 33) + static_cast<int64_t>(10 * i + k);  // past 32 bits
      it.buckets = {{it.start + 0.001, it.start + 0.002}, {it.start + 0.0015, it.start + 0.003 + 1e-6 * static_cast<double>(k)}};
    }
  }
  r.ranks[1].iterations.resize(4);  // ragged: rank 1 stopped early
  OpProfile& p = r.ops;
  p.rank = 0;
  p.first_iteration = 2;
  p.steps = 2;
  p.rows = {{"conv1", "conv2d", "(32, 3, 224, 224) f32", 1.5, 2.25, 2}, {"add_relu#0", "add_relu", "(32, 256, 56, 56) bf16", 0.125, 0.0, 1}};
  p.events = {{0, 2, 10.0, 10.0015}, {1, 2, 10.002, 10.0021}, {0, 3, 11.0, 11.0015}};
  return r;
}

TEST(TraceStepFields, SurviveWriteAndRead) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  const RunRecord in = step_run();
  TraceWriter w(path, in.info);
  w.finish(in, RunStatus::complete);
  const auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord& out = runs[0];
  EXPECT_EQ(out.info.input_mode, "pipelined");
  EXPECT_EQ(out.info.comm_backend, "nccl");
  EXPECT_EQ(out.info.loss_scaling, "dynamic");
  EXPECT_EQ(out.info.cuda_graph, 1);
  EXPECT_EQ(out.info.profile_ops, 2);
  EXPECT_EQ(out.info.grad_accum, 4);
  EXPECT_EQ(out.info.global_batch, 256);
  EXPECT_EQ(out.info.zero_stage, 1);
  EXPECT_EQ(out.info.memory_plan_bytes, int64_t{5} << 33);
  EXPECT_EQ(out.info.zero_shard_min, 1000);
  EXPECT_EQ(out.info.zero_shard_max, 1003);
  EXPECT_EQ(out.samples_per_iteration_per_rank(), 4 * in.info.batch_per_device);
  EXPECT_EQ(out.info.versions.at("cublas"), "13.0.0");
  ASSERT_EQ(out.ranks.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const RankTrace &x = in.ranks[k], &y = out.ranks[k];
    EXPECT_EQ(y.device_memory_peak_bytes, x.device_memory_peak_bytes);
    EXPECT_EQ(y.allocated_peak_bytes, x.allocated_peak_bytes);
    ASSERT_EQ(y.iterations.size(), x.iterations.size());
    for (size_t i = 0; i < x.iterations.size(); ++i) {
      EXPECT_EQ(y.iterations[i].loss_scale, x.iterations[i].loss_scale);
      EXPECT_EQ(y.iterations[i].skipped, x.iterations[i].skipped);
      EXPECT_EQ(y.iterations[i].comm_bytes, x.iterations[i].comm_bytes);
      ASSERT_EQ(y.iterations[i].buckets.size(), 2u);
      for (size_t b = 0; b < 2; ++b) {
        EXPECT_EQ(y.iterations[i].buckets[b].start, x.iterations[i].buckets[b].start);
        EXPECT_EQ(y.iterations[i].buckets[b].end, x.iterations[i].buckets[b].end);
      }
    }
  }
  const OpProfile &a = in.ops, &b = out.ops;
  EXPECT_EQ(b.rank, a.rank);
  EXPECT_EQ(b.first_iteration, a.first_iteration);
  EXPECT_EQ(b.steps, a.steps);
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(b.rows[i].name, a.rows[i].name);
    EXPECT_EQ(b.rows[i].kind, a.rows[i].kind);
    EXPECT_EQ(b.rows[i].shape, a.rows[i].shape);
    EXPECT_EQ(b.rows[i].forward_ms, a.rows[i].forward_ms);
    EXPECT_EQ(b.rows[i].backward_ms, a.rows[i].backward_ms);
    EXPECT_EQ(b.rows[i].calls, a.rows[i].calls);
  }
  ASSERT_EQ(b.events.size(), a.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(b.events[i].op, a.events[i].op);
    EXPECT_EQ(b.events[i].iteration, a.events[i].iteration);
    EXPECT_EQ(b.events[i].start, a.events[i].start);
    EXPECT_EQ(b.events[i].end, a.events[i].end);
  }
}

// A run on one rank has no buckets and no profile: nothing of either is written or read.
TEST(TraceStepFields, AbsentWhereNotMeasured) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord in = test::small_run(1, 3);
  TraceWriter w(path, in.info);
  w.finish(in, RunStatus::complete);
  const auto out = read_runs(path).at(0);
  EXPECT_EQ(out.ops.steps, 0);
  EXPECT_TRUE(out.ops.rows.empty());
  for (const auto& it : out.ranks.at(0).iterations) {
    EXPECT_TRUE(it.buckets.empty());
    EXPECT_EQ(it.loss_scale, 1.0f);
    EXPECT_FALSE(it.skipped);
  }
}

// Schema 1.3 (issue 24): an LLM run's measures survive write then read; other runs have none.
TEST(TraceStepFields, LlmMeasuresSurviveWriteAndRead) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  RunRecord in = test::small_run(1, 3);
  in.info.model_flops_per_token = 51471187968.0;
  in.info.peak_tflops_per_device = 989.4;
  in.info.peak_source = "NVIDIA H100 SXM datasheet, dense bf16";
  in.info.tokens_per_s = 12345.678;
  in.info.mfu = 0.4213;
  {
    TraceWriter w(path, in.info);
    w.finish(in, RunStatus::complete);
  }
  RunRecord plain = test::small_run(1, 3);
  {
    TraceWriter w(path, plain.info);
    w.finish(plain, RunStatus::complete);
  }
  const auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 2u);
  const RunInfo& o = runs[0].info;
  EXPECT_EQ(o.model_flops_per_token, 51471187968.0);
  EXPECT_EQ(o.peak_tflops_per_device, 989.4);
  EXPECT_EQ(o.peak_source, "NVIDIA H100 SXM datasheet, dense bf16");
  EXPECT_EQ(o.tokens_per_s, 12345.678);
  EXPECT_EQ(o.mfu, 0.4213);
  EXPECT_EQ(runs[1].info.model_flops_per_token, 0.0);
  EXPECT_EQ(runs[1].info.peak_source, "");
}

// A 1.0 file: appending raises the root version to 1.2, and the 1.0 run (without the new
// datasets) reads back with the defaults.
TEST(TraceStepFields, OlderMinorVersionIsUpgradedOnAppend) {
  test::TempDir dir;
  const std::string path = dir.file("results.h5");
  {
    RunRecord old = test::small_run(1, 3);
    TraceWriter w(path, old.info);
    w.finish(old, RunStatus::complete);
  }
  {  // make it look like dlperf 1.0 wrote it
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    h5::write_attr(f, trace_schema::kVersionAttr, std::string("1.0"));
    const hid_t g = H5Gopen2(f, "runs/run_000001", H5P_DEFAULT);
    for (const char* name : {"loss_scale", "skipped", "device_memory_peak_bytes", "allocated_peak_bytes"})
      ASSERT_GE(H5Ldelete(g, name, H5P_DEFAULT), 0);
    for (const char* name : {"input_mode", "comm_backend", "loss_scaling", "cuda_graph", "profile_ops"}) ASSERT_GE(H5Adelete(g, name), 0);
    H5Gclose(g);
    H5Fclose(f);
  }
  const auto before = read_runs(path).at(0);
  EXPECT_EQ(before.info.input_mode, "");
  EXPECT_EQ(before.ranks.at(0).iterations.at(0).loss_scale, 1.0f);
  RunRecord next = step_run();
  TraceWriter w(path, next.info);
  w.finish(next, RunStatus::complete);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_EQ(h5::read_string_attr(f, trace_schema::kVersionAttr), trace_schema::version_string());
  H5Fclose(f);
  const auto runs = read_runs(path);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[1].info.input_mode, "pipelined");
}

}  // namespace
}  // namespace dlperf
