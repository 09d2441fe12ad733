// The schema 1.2 additions of issue 13 (docs/trace-schema.md, "How the step ran" and "Per-op
// profile"): how the step ran, per-iteration loss scale and skipped steps, per-bucket
// allreduce times, the device's own memory peak, and the per-op profile group. Kept apart from
// trace_schema.cpp so the 1.0 layout reads as it was; older files simply lack these and read
// back with the defaults.
//   attributes   input_mode, comm_backend, loss_scaling (str); cuda_graph, profile_ops (int)
//   loss_scale   f32 (I, R)      skipped  i8 (I, R), -1 past a rank's iterations
//   1.3 (issue 25): attributes grad_accum, global_batch, zero_stage (int); comm_bytes i64 (I, R)
//   bucket_start, bucket_end  f64 (I, R, B)   when gradients were exchanged (B buckets)
//   device_memory_peak_bytes  i64 (R)
//   allocated_peak_bytes      i64 (R), 1.3 (issue 25): the backend's allocation counter's peak
//   ops/         name, kind, shape str (N); forward_ms, backward_ms f64 (N); calls i64 (N);
//                event_op i32, event_iteration i64, event_start, event_end f64 (E);
//                attributes rank, first_iteration, steps
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "trace/h5_io.h"
#include "trace/trace_schema.h"

namespace dlperf::trace_schema {
namespace {

struct StringField {
  const char* name;
  std::string RunInfo::*member;
};
struct IntField {
  const char* name;
  int64_t RunInfo::*member;
};
constexpr StringField kStepStrings[] = {
    {"input_mode", &RunInfo::input_mode},
    {"comm_backend", &RunInfo::comm_backend},
    {"loss_scaling", &RunInfo::loss_scaling},
};
constexpr IntField kStepInts[] = {
    {"cuda_graph", &RunInfo::cuda_graph},
    {"profile_ops", &RunInfo::profile_ops},
    {"grad_accum", &RunInfo::grad_accum},      // schema 1.3 (issue 25); 0 in older files
    {"global_batch", &RunInfo::global_batch},  // schema 1.3
    {"zero_stage", &RunInfo::zero_stage},      // schema 1.3
    {"memory_plan_bytes", &RunInfo::memory_plan_bytes},  // schema 1.3
    {"zero_shard_min", &RunInfo::zero_shard_min},        // schema 1.3
    {"zero_shard_max", &RunInfo::zero_shard_max},        // schema 1.3
};
constexpr const char* kOpsGroup = "ops";

size_t bucket_count(const RunRecord& r) {
  size_t b = 0;
  for (const auto& rank : r.ranks)
    for (const auto& it : rank.iterations) b = std::max(b, it.buckets.size());
  return b;
}

void write_ops(hid_t group, const OpProfile& p) {
  h5::Handle g = h5::has_link(group, kOpsGroup) ? DLPERF_H5(H5Gopen2(group, kOpsGroup, H5P_DEFAULT), H5Gclose)
                                                 : DLPERF_H5(H5Gcreate2(group, kOpsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  h5::write_attr(g, "rank", p.rank);
  h5::write_attr(g, "first_iteration", p.first_iteration);
  h5::write_attr(g, "steps", p.steps);
  std::vector<std::string> name, kind, shape;
  std::vector<double> fwd, bwd;
  std::vector<int64_t> calls;
  for (const auto& row : p.rows) {
    name.push_back(row.name);
    kind.push_back(row.kind);
    shape.push_back(row.shape);
    fwd.push_back(row.forward_ms);
    bwd.push_back(row.backward_ms);
    calls.push_back(row.calls);
  }
  const hsize_t n = p.rows.size();
  h5::write_strings(g, "name", name);
  h5::write_strings(g, "kind", kind);
  h5::write_strings(g, "shape", shape);
  h5::write_rows(g, "forward_ms", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {n}, fwd.data());
  h5::write_rows(g, "backward_ms", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {n}, bwd.data());
  h5::write_rows(g, "calls", H5T_NATIVE_INT64, H5T_STD_I64LE, {n}, calls.data());
  std::vector<int32_t> op;
  std::vector<int64_t> iteration;
  std::vector<double> start, end;
  for (const auto& e : p.events) {
    op.push_back(e.op);
    iteration.push_back(e.iteration);
    start.push_back(e.start);
    end.push_back(e.end);
  }
  const hsize_t e = p.events.size();
  h5::write_rows(g, "event_op", H5T_NATIVE_INT32, H5T_STD_I32LE, {e}, op.data());
  h5::write_rows(g, "event_iteration", H5T_NATIVE_INT64, H5T_STD_I64LE, {e}, iteration.data());
  h5::write_rows(g, "event_start", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {e}, start.data());
  h5::write_rows(g, "event_end", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {e}, end.data());
}

OpProfile read_ops(hid_t group) {
  OpProfile p;
  h5::Handle g = DLPERF_H5(H5Gopen2(group, kOpsGroup, H5P_DEFAULT), H5Gclose);
  p.rank = h5::read_int_attr(g, "rank", 0);
  p.first_iteration = h5::read_int_attr(g, "first_iteration", 0);
  p.steps = h5::read_int_attr(g, "steps", 0);
  const auto shape = h5::dataset_shape(g, "forward_ms");
  if (shape.size() != 1 || shape[0] > (1u << 20)) throw_usage_error("ops/forward_ms has an implausible shape");
  const hsize_t n = shape[0];
  const auto name = h5::read_strings(g, "name", n), kind = h5::read_strings(g, "kind", n), shp = h5::read_strings(g, "shape", n);
  std::vector<double> fwd(n), bwd(n);
  std::vector<int64_t> calls(n);
  h5::read_all(g, "forward_ms", H5T_NATIVE_DOUBLE, {n}, fwd.data());
  h5::read_all(g, "backward_ms", H5T_NATIVE_DOUBLE, {n}, bwd.data());
  h5::read_all(g, "calls", H5T_NATIVE_INT64, {n}, calls.data());
  for (hsize_t i = 0; i < n; ++i) p.rows.push_back({name[i], kind[i], shp[i], fwd[i], bwd[i], calls[i]});
  const auto eshape = h5::dataset_shape(g, "event_start");
  if (eshape.size() != 1 || eshape[0] > (1u << 26)) throw_usage_error("ops/event_start has an implausible shape");
  const hsize_t e = eshape[0];
  std::vector<int32_t> op(e);
  std::vector<int64_t> iteration(e);
  std::vector<double> start(e), end(e);
  h5::read_all(g, "event_op", H5T_NATIVE_INT32, {e}, op.data());
  h5::read_all(g, "event_iteration", H5T_NATIVE_INT64, {e}, iteration.data());
  h5::read_all(g, "event_start", H5T_NATIVE_DOUBLE, {e}, start.data());
  h5::read_all(g, "event_end", H5T_NATIVE_DOUBLE, {e}, end.data());
  for (hsize_t i = 0; i < e; ++i) {
    if (op[i] < 0 || static_cast<hsize_t>(op[i]) >= n) throw_usage_error("ops/event_op names an op that is not in the table");
    p.events.push_back({op[i], iteration[i], start[i], end[i]});
  }
  return p;
}

}  // namespace

void write_step_fields(hid_t group, const RunRecord& record) {
  for (const auto& f : kStepStrings) h5::write_attr(group, f.name, record.info.*f.member);
  for (const auto& f : kStepInts) h5::write_attr(group, f.name, record.info.*f.member);
  if (record.ops.steps > 0) write_ops(group, record.ops);
  const size_t R = record.ranks.size();
  if (R == 0) return;
  size_t I = 0;
  for (const auto& rank : record.ranks) I = std::max(I, rank.iterations.size());
  const size_t B = bucket_count(record);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<float> scale(I * R, static_cast<float>(nan));
  std::vector<int8_t> skipped(I * R, -1);
  std::vector<int64_t> comm_bytes(I * R, -1);  // 1.3; -1 past a rank's iterations
  std::vector<double> bstart(I * R * B, nan), bend(I * R * B, nan);
  std::vector<int64_t> device_peak(R), allocated_peak(R);
  for (size_t r = 0; r < R; ++r) {
    const RankTrace& rank = record.ranks[r];
    device_peak[r] = rank.device_memory_peak_bytes;
    allocated_peak[r] = rank.allocated_peak_bytes;
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      const IterationTiming& it = rank.iterations[i];
      scale[i * R + r] = it.loss_scale;
      skipped[i * R + r] = it.skipped ? 1 : 0;
      comm_bytes[i * R + r] = it.comm_bytes;
      for (size_t b = 0; b < it.buckets.size(); ++b) {
        bstart[(i * R + r) * B + b] = it.buckets[b].start;
        bend[(i * R + r) * B + b] = it.buckets[b].end;
      }
    }
  }
  const hsize_t hI = I, hR = R, hB = B;
  h5::write_rows(group, "loss_scale", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {hI, hR}, scale.data());
  h5::write_rows(group, "skipped", H5T_NATIVE_INT8, H5T_STD_I8LE, {hI, hR}, skipped.data());
  h5::write_rows(group, "comm_bytes", H5T_NATIVE_INT64, H5T_STD_I64LE, {hI, hR}, comm_bytes.data());
  h5::write_rows(group, "device_memory_peak_bytes", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, device_peak.data());
  h5::write_rows(group, "allocated_peak_bytes", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, allocated_peak.data());
  if (B > 0) {
    h5::write_rows(group, "bucket_start", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {hI, hR, hB}, bstart.data());
    h5::write_rows(group, "bucket_end", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {hI, hR, hB}, bend.data());
  }
}

void read_step_fields(hid_t group, RunRecord& record) {
  for (const auto& f : kStepStrings) record.info.*f.member = h5::read_string_attr_if(group, f.name).value_or("");
  for (const auto& f : kStepInts) record.info.*f.member = h5::read_int_attr(group, f.name, 0);
  if (h5::has_link(group, kOpsGroup)) record.ops = read_ops(group);
  const size_t R = record.ranks.size();
  if (R == 0 || !h5::has_link(group, "loss_scale")) return;  // a 1.0 file, or nothing measured
  const auto dims = h5::dataset_shape(group, "iteration_end");
  const size_t I = dims.at(0);
  const hsize_t hI = I, hR = R;
  std::vector<float> scale(I * R);
  std::vector<int8_t> skipped(I * R);
  std::vector<int64_t> device_peak(R);
  h5::read_all(group, "loss_scale", H5T_NATIVE_FLOAT, {hI, hR}, scale.data());
  h5::read_all(group, "skipped", H5T_NATIVE_INT8, {hI, hR}, skipped.data());
  std::vector<int64_t> comm_bytes(I * R, 0);
  if (h5::has_link(group, "comm_bytes")) h5::read_all(group, "comm_bytes", H5T_NATIVE_INT64, {hI, hR}, comm_bytes.data());  // 1.3
  h5::read_all(group, "device_memory_peak_bytes", H5T_NATIVE_INT64, {hR}, device_peak.data());
  std::vector<int64_t> allocated_peak(R, 0);
  if (h5::has_link(group, "allocated_peak_bytes"))  // 1.3
    h5::read_all(group, "allocated_peak_bytes", H5T_NATIVE_INT64, {hR}, allocated_peak.data());
  size_t B = 0;
  std::vector<double> bstart, bend;
  if (h5::has_link(group, "bucket_start")) {
    const auto bdims = h5::dataset_shape(group, "bucket_start");
    if (bdims.size() != 3 || bdims[0] != I || bdims[1] != R || bdims[2] > 4096) throw_usage_error("bucket_start has an implausible shape");
    B = bdims[2];
    const hsize_t hB = B;
    bstart.resize(I * R * B);
    bend.resize(I * R * B);
    h5::read_all(group, "bucket_start", H5T_NATIVE_DOUBLE, {hI, hR, hB}, bstart.data());
    h5::read_all(group, "bucket_end", H5T_NATIVE_DOUBLE, {hI, hR, hB}, bend.data());
  }
  for (size_t r = 0; r < R; ++r) {
    RankTrace& rank = record.ranks[r];
    rank.device_memory_peak_bytes = device_peak[r];
    rank.allocated_peak_bytes = allocated_peak[r];
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      IterationTiming& it = rank.iterations[i];
      it.loss_scale = scale[i * R + r];
      it.skipped = skipped[i * R + r] == 1;
      it.comm_bytes = std::max<int64_t>(0, comm_bytes[i * R + r]);
      for (size_t b = 0; b < B; ++b) it.buckets.push_back({bstart[(i * R + r) * B + b], bend[(i * R + r) * B + b]});
    }
  }
}

}  // namespace dlperf::trace_schema
