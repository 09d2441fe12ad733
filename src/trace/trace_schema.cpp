// The HDF5 layout of one run (docs/trace-schema.md is the user-facing description):
//   /runs/run_NNNNNN             group, one per run; attributes = RunInfo fields
//     iteration_start  f64 (I, R)    s, common clock      I = iterations, R = ranks
//     iteration_end    f64 (I, R)    s, common clock
//     phase_seconds    f32 (I, R, 5) data, forward, backward, comm_exposed, optimizer
//     comm_seconds     f32 (I, R)    allreduce time in flight (overlapped or not)
//     loss             f32 (I, R)
//     rank_host        str (R)       clock_offset f64 (R)   peak_memory_bytes i64 (R)
//     iterations_completed i64 (R)   rows past a rank's count are NaN
//     settings         str (n)       "name=value" per dlperf-train option (1.2)
//     local_rank       i64 (R)       since 1.2     param_checksum u64 (R)  since 1.2, 0 = none
//     data_queue_depth i64 (I, R)    data_images i64 (I, R)   data_bytes_read i64 (I, R)   since 1.2
//     data_bad_samples i64 (R)       rows past a rank's count are -1; absent in older files: zeros
//     rank_binding     str (R)       since 1.3: cores, GPU, NIC and their NUMA nodes per rank
#include "trace/trace_schema.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <set>

#include "core/error.h"
#include "trace/h5_io.h"

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

constexpr StringField kStringFields[] = {
    {"model", &RunInfo::model},
    {"precision", &RunInfo::precision},
    {"backend", &RunInfo::backend},
    {"variant", &RunInfo::variant},
    {"start_time_utc", &RunInfo::start_time_utc},
    {"end_time_utc", &RunInfo::end_time_utc},
    {"cpu_model", &RunInfo::cpu_model},
    {"cpu_isa", &RunInfo::cpu_isa},
    {"gpu_model", &RunInfo::gpu_model},
    {"slurm_job_id", &RunInfo::slurm_job_id},
    {"slurm_nodelist", &RunInfo::slurm_nodelist},
    {"git_revision", &RunInfo::git_revision},
    {"command_line", &RunInfo::command_line},
    {"nccl_transport", &RunInfo::nccl_transport},
    {"gpu_topology", &RunInfo::gpu_topology},
    {"optimizer", &RunInfo::optimizer},
    {"data_source", &RunInfo::data_source},
    {"data_path", &RunInfo::data_path},
    {"data_fingerprint", &RunInfo::data_fingerprint},
    {"decoder", &RunInfo::decoder},
};
constexpr IntField kIntFields[] = {
    {"batch_per_device", &RunInfo::batch_per_device},
    {"image_size", &RunInfo::image_size},
    {"seq_len", &RunInfo::seq_len},
    {"nodes", &RunInfo::nodes},
    {"devices_per_node", &RunInfo::devices_per_node},
    {"world_size", &RunInfo::world_size},
    {"repeat_index", &RunInfo::repeat_index},
    {"iterations", &RunInfo::iterations},
    {"warmup", &RunInfo::warmup},
    {"threads_per_rank", &RunInfo::threads_per_rank},
    {"gpu_memory_bytes", &RunInfo::gpu_memory_bytes},
    {"num_classes", &RunInfo::num_classes},
    {"max_predictions", &RunInfo::max_predictions},
    {"parameter_count", &RunInfo::parameter_count},
    {"loader_threads", &RunInfo::loader_threads},
    {"conv_autotune", &RunInfo::conv_autotune},
};

// The loader's per-iteration counters (schema 1.2), int64 (I, R).
struct LoaderField {
  const char* name;
  int64_t IterationTiming::*member;
};
constexpr LoaderField kLoaderFields[] = {
    {"data_queue_depth", &IterationTiming::data_queue_depth},
    {"data_images", &IterationTiming::data_images},
    {"data_bytes_read", &IterationTiming::data_bytes_read},
};

// The planned kernels as four string datasets of one length K: kernel_op, kernel_pass,
// kernel_shape, kernel_impl (row k describes kernel k).
constexpr const char* kKernelColumns[] = {"kernel_op", "kernel_pass", "kernel_shape", "kernel_impl"};
constexpr std::string KernelRecord::*kKernelMembers[] = {&KernelRecord::op, &KernelRecord::pass, &KernelRecord::shape,
                                                         &KernelRecord::impl};

void write_kernels(hid_t group, const std::vector<KernelRecord>& kernels) {
  if (kernels.empty() || h5::has_link(group, kKernelColumns[0])) return;  // planned once: written at the first flush
  for (size_t c = 0; c < 4; ++c) {
    std::vector<std::string> column;
    for (const auto& k : kernels) column.push_back(k.*kKernelMembers[c]);
    h5::write_strings(group, kKernelColumns[c], column);
  }
}

std::vector<KernelRecord> read_kernels(hid_t group) {
  std::vector<KernelRecord> kernels;
  if (!h5::has_link(group, kKernelColumns[0])) return kernels;  // schema 1.0, or nothing planned
  const auto shape = h5::dataset_shape(group, kKernelColumns[0]);
  if (shape.size() != 1 || shape[0] > (1u << 20)) throw_usage_error("dataset kernel_op is not a plausible (K) list");
  kernels.resize(shape[0]);
  for (size_t c = 0; c < 4; ++c) {
    const auto column = h5::read_strings(group, kKernelColumns[c], shape[0]);
    for (size_t k = 0; k < kernels.size(); ++k) kernels[k].*kKernelMembers[c] = column[k];
  }
  return kernels;
}

std::vector<std::string> phase_names() {
  std::vector<std::string> names;
  for (int p = 0; p < kPhaseCount; ++p) names.emplace_back(to_string(static_cast<Phase>(p)));
  return names;
}

}  // namespace

std::string version_string() { return std::to_string(kMajor) + "." + std::to_string(kMinor); }

void write_root(hid_t file) {
  h5::write_attr(file, kFormatAttr, std::string(kFormatName));
  h5::write_attr(file, kVersionAttr, version_string());
  h5::Handle runs = DLPERF_H5(H5Gcreate2(file, kRunsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
}

void upgrade_root(hid_t file) {
  const auto version = h5::read_string_attr_if(file, kVersionAttr).value_or("");
  const auto dot = version.find('.');
  int major = 0, minor = 0;
  try {
    major = std::stoi(version);
    minor = dot == std::string::npos ? 0 : std::stoi(version.substr(dot + 1));
  } catch (const std::exception&) {
    return;  // check_root has judged the file already
  }
  if (major == kMajor && minor < kMinor) h5::write_attr(file, kVersionAttr, version_string());
}

void check_root(hid_t file, const std::string& path) {
  std::optional<std::string> version;
  try {
    version = h5::read_string_attr_if(file, kVersionAttr);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::usage) throw;
    throw_usage_error(path + ": " + e.what());  // "attribute dlperf_schema_version is not a string", naming the file
  }
  if (!version) throw_usage_error(path + ": not a dlperf trace (HDF5 file without a " + kVersionAttr + " attribute)");
  int major = -1;
  try {
    major = std::stoi(*version);
  } catch (const std::exception&) {
    throw_usage_error(path + ": unreadable dlperf schema version '" + *version + "'");
  }
  if (major > kMajor)
    throw_usage_error(path + ": written with dlperf trace schema " + *version + ", newer than this dlperf reads (" +
                      std::to_string(kMajor) + ".x); upgrade dlperf");
  if (major < 1) throw_usage_error(path + ": unknown dlperf schema version '" + *version + "'");
  if (!h5::has_link(file, kRunsGroup)) throw_usage_error(path + ": dlperf trace without a /runs group");
}

namespace {

// HDF5 keeps an attribute in its object's header, 64 KiB at most, and failed the whole run's
// record (exit 3) on a longer one: a SLURM_JOB_NODELIST of thousands of uncompressed names, the
// distinct hosts of a machine-wide job. Text attributes are told, not measured by: one longer
// than this keeps its head and says how long it was; the exact per-rank hosts are the rank_host
// dataset and the settings a dataset too.
constexpr size_t kMaxAttrText = 16384;

std::string fit_attr(const std::string& v) {
  if (v.size() <= kMaxAttrText) return v;
  const std::string marker = " ... [" + std::to_string(v.size()) + " bytes in all, cut to fit an HDF5 attribute]";
  std::string head = v.substr(0, kMaxAttrText - marker.size());
  // Not in the middle of a UTF-8 sequence: the reader refuses invalid text.
  size_t cut = head.size();
  while (cut > 0 && (static_cast<unsigned char>(head[cut - 1]) & 0xC0) == 0x80) --cut;
  if (cut > 0 && static_cast<unsigned char>(head[cut - 1]) >= 0xC0) head.resize(cut - 1);
  return head + marker;
}

// A list stored at its longest entry's width: as many entries as fit 2 x kMaxAttrText, then one
// that says how many there were.
std::vector<std::string> fit_attr(std::vector<std::string> v, const std::string& what) {
  size_t width = 0;
  for (const auto& s : v) width = std::max(width, s.size() + 1);
  if (width * v.size() <= 2 * kMaxAttrText) return v;
  const std::string marker = "... (" + std::to_string(v.size()) + " " + what + " in all)";
  width = std::max(width, marker.size() + 1);
  v.resize(std::max<size_t>(2 * kMaxAttrText / width, 1) - 1);
  v.push_back(marker);
  return v;
}

}  // namespace

void write_run_group(hid_t group, const RunRecord& record, RunStatus status, const std::string& reason) {
  const RunInfo& info = record.info;
  for (const auto& f : kStringFields) h5::write_attr(group, f.name, fit_attr(info.*f.member));
  for (const auto& f : kIntFields) h5::write_attr(group, f.name, info.*f.member);
  h5::write_attr(group, "status", std::string(to_string(status)));
  h5::write_attr(group, "status_reason", fit_attr(reason));
  h5::write_attr(group, "phase_names", phase_names());
  for (const auto& [key, value] : info.versions) h5::write_attr(group, (kVersionPrefix + key).c_str(), fit_attr(value));

  const size_t R = record.ranks.size();
  std::vector<std::string> rank_host(R);
  for (size_t r = 0; r < R; ++r)
    rank_host[r] = !record.ranks[r].host.empty() ? record.ranks[r].host : (r < info.hosts.size() ? info.hosts[r] : "");
  // Distinct hosts in rank order, for people (the per-rank list is the rank_host dataset).
  std::vector<std::string> distinct;
  std::set<std::string> seen;
  for (const auto& h : (R > 0 ? rank_host : info.hosts))
    if (seen.insert(h).second) distinct.push_back(h);
  h5::write_attr(group, "hosts", fit_attr(std::move(distinct), "hosts"));
  write_kernels(group, record.kernels);
  write_step_fields(group, record);
  write_llm_fields(group, record.info);
  // A dataset, not an attribute: a long --data path repeated at the fixed string width could
  // pass HDF5's 64 KiB limit on compact attributes.
  h5::write_strings(group, "settings", info.settings);
  if (R == 0) return;  // nothing measured yet: rank-independent facts only

  size_t I = 0;
  for (const auto& rank : record.ranks) I = std::max(I, rank.iterations.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> start(I * R, nan), end(I * R, nan);
  std::vector<float> phases(I * R * kPhaseCount, static_cast<float>(nan)), comm(I * R, static_cast<float>(nan)),
      loss(I * R, static_cast<float>(nan));
  std::vector<double> offset(R);
  std::vector<int64_t> peak(R), completed(R), local_rank(R), bad(R);
  std::vector<uint64_t> checksum(R);
  std::vector<std::vector<int64_t>> loader(std::size(kLoaderFields), std::vector<int64_t>(I * R, -1));
  for (size_t r = 0; r < R; ++r) {
    const RankTrace& rank = record.ranks[r];
    offset[r] = rank.clock_offset;
    peak[r] = rank.peak_memory_bytes;
    local_rank[r] = rank.local_rank;
    checksum[r] = rank.param_checksum;
    bad[r] = rank.data_bad_samples;
    completed[r] = static_cast<int64_t>(rank.iterations.size());
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      const IterationTiming& it = rank.iterations[i];
      start[i * R + r] = it.start;
      end[i * R + r] = it.end;
      std::copy(it.phase_seconds, it.phase_seconds + kPhaseCount, &phases[(i * R + r) * kPhaseCount]);
      comm[i * R + r] = it.comm_seconds;
      loss[i * R + r] = it.loss;
      for (size_t f = 0; f < std::size(kLoaderFields); ++f) loader[f][i * R + r] = it.*kLoaderFields[f].member;
    }
  }
  const hsize_t hI = I, hR = R, hP = kPhaseCount;
  h5::write_rows(group, "iteration_start", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {hI, hR}, start.data());
  h5::write_rows(group, "iteration_end", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {hI, hR}, end.data());
  h5::write_rows(group, "phase_seconds", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {hI, hR, hP}, phases.data());
  h5::write_rows(group, "comm_seconds", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {hI, hR}, comm.data());
  h5::write_rows(group, "loss", H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, {hI, hR}, loss.data());
  h5::write_strings(group, "rank_host", rank_host);
  std::vector<std::string> binding(R);
  for (size_t r = 0; r < R; ++r) binding[r] = record.ranks[r].binding;
  h5::write_strings(group, "rank_binding", binding);
  h5::write_rows(group, "clock_offset", H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, {hR}, offset.data());
  h5::write_rows(group, "peak_memory_bytes", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, peak.data());
  h5::write_rows(group, "iterations_completed", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, completed.data());
  h5::write_rows(group, "local_rank", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, local_rank.data());
  h5::write_rows(group, "param_checksum", H5T_NATIVE_UINT64, H5T_STD_U64LE, {hR}, checksum.data());
  for (size_t f = 0; f < std::size(kLoaderFields); ++f)
    h5::write_rows(group, kLoaderFields[f].name, H5T_NATIVE_INT64, H5T_STD_I64LE, {hI, hR}, loader[f].data());
  h5::write_rows(group, "data_bad_samples", H5T_NATIVE_INT64, H5T_STD_I64LE, {hR}, bad.data());
}

namespace {

// Clocks around real work give finite times, each step ending after it starts and after the step
// before it, and phases of no negative length. A damaged or edited value (an infinite end, a
// window of a microsecond, a step before its predecessor) would be a samples/s of 0 or millions
// folded into a median, or a phase of -1000%: the run is refused instead, naming the step.
void check_timing(const IterationTiming& it, size_t i, size_t r, const IterationTiming* before) {
  const auto bad = [&](const std::string& what) {
    throw_usage_error("iteration " + std::to_string(i) + " of rank " + std::to_string(r) + " " + what + " (a damaged or edited trace?)");
  };
  // A millisecond of slack: a GPU step's times are placed from host anchors, each late by however
  // long the host took to see its event (the CUDA recorder keeps them in order since; older
  // traces may hold a step a poll's length early).
  constexpr double kSlack = 1e-3;
  if (!std::isfinite(it.start) || !std::isfinite(it.end)) bad("has a time that is not a finite number");
  if (it.end < it.start - kSlack) bad("ends before it starts");
  if (before && it.end < before->end - kSlack) bad("ends before the iteration before it");
  for (float p : it.phase_seconds)
    if (!std::isfinite(p) || p < -1e-6f) bad("has a phase time that is negative or not a finite number");
  if (!std::isfinite(it.comm_seconds) || it.comm_seconds < -1e-6f) bad("has a communication time that is negative or not a finite number");
}

}  // namespace

RunRecord read_run_group(hid_t group) {
  RunRecord record;
  RunInfo& info = record.info;
  for (const auto& f : kStringFields) info.*f.member = h5::read_string_attr_if(group, f.name).value_or("");
  for (const auto& f : kIntFields) info.*f.member = h5::read_int_attr(group, f.name, info.*f.member);
  // What a run is grouped and scaled by: a damaged value here would be a table row of 0, -nan or
  // a million-fold samples/s, not a skipped run.
  for (const char* name : {"model", "precision", "backend", "batch_per_device", "nodes", "devices_per_node", "world_size"})
    if (!h5::has_attr(group, name)) throw_usage_error(std::string("attribute ") + name + " is missing");
  // The identity heads report sections and keys CSV rows: one line of text, as dlperf-train
  // writes it (it refuses a --variant with control characters).
  for (const std::string* text : {&info.model, &info.precision, &info.backend, &info.variant})
    if (printable(*text) != *text) throw_usage_error("run identity '" + printable(*text) + "' holds control or non-UTF-8 bytes");
  if (info.batch_per_device < 1 || info.nodes < 1 || info.devices_per_node < 1 || info.world_size < 1 || info.world_size > (1 << 20))
    throw_usage_error("attributes batch_per_device, nodes, devices_per_node, world_size are not plausible sizes (" +
                      std::to_string(info.batch_per_device) + ", " + std::to_string(info.nodes) + ", " + std::to_string(info.devices_per_node) +
                      ", " + std::to_string(info.world_size) + ")");
  // The run's plan measures it (dlperf-reduce's window): half of it would measure the warm-up.
  if (h5::has_attr(group, "iterations") != h5::has_attr(group, "warmup"))
    throw_usage_error(std::string("attribute ") + (h5::has_attr(group, "iterations") ? "warmup is missing beside iterations" : "iterations is missing beside warmup"));
  info.status = run_status_from_string(h5::read_string_attr(group, "status"));
  info.status_reason = h5::read_string_attr_if(group, "status_reason").value_or("");
  const std::string prefix = kVersionPrefix;
  for (const auto& name : h5::attr_names(group))
    if (name.compare(0, prefix.size(), prefix) == 0)
      info.versions[name.substr(prefix.size())] = h5::read_string_attr(group, name.c_str());
  record.kernels = read_kernels(group);
  if (h5::has_link(group, "settings")) {  // schema 1.2
    const auto shape = h5::dataset_shape(group, "settings");
    if (shape.size() != 1 || shape[0] > 4096) throw_usage_error("dataset settings is not a short list of strings");
    info.settings = h5::read_strings(group, "settings", shape[0]);
  }
  if (!h5::has_link(group, "iteration_end")) {  // created, never flushed: attributes only
    for (const char* name : {"iteration_start", "phase_seconds", "loss", "rank_host"})
      if (h5::has_link(group, name)) throw_usage_error(std::string("dataset iteration_end is missing beside ") + name);
    read_step_fields(group, record);
    read_llm_fields(group, record.info);
    return record;
  }

  auto dims = h5::dataset_shape(group, "iteration_end");
  if (dims.size() != 2) throw_usage_error("dataset iteration_end is not 2-dimensional");
  const size_t I = dims[0], R = dims[1];
  // A corrupt header can claim any shape; refuse shapes no real run has before allocating.
  if (R > (1u << 20) || I > (1u << 24) || I * R > (1ull << 31)) throw_usage_error("implausible trace shape");
  if (static_cast<int64_t>(R) != info.world_size)
    throw_usage_error("attribute world_size " + std::to_string(info.world_size) + " is not the " + std::to_string(R) + " ranks recorded");
  const hsize_t hI = I, hR = R, hP = kPhaseCount;
  std::vector<double> start(I * R), end(I * R), offset(R);
  std::vector<float> phases(I * R * kPhaseCount), comm(I * R), loss(I * R);
  std::vector<int64_t> peak(R), completed(R);
  h5::read_all(group, "iteration_start", H5T_NATIVE_DOUBLE, {hI, hR}, start.data());
  h5::read_all(group, "iteration_end", H5T_NATIVE_DOUBLE, {hI, hR}, end.data());
  h5::read_all(group, "phase_seconds", H5T_NATIVE_FLOAT, {hI, hR, hP}, phases.data());
  h5::read_all(group, "comm_seconds", H5T_NATIVE_FLOAT, {hI, hR}, comm.data());
  h5::read_all(group, "loss", H5T_NATIVE_FLOAT, {hI, hR}, loss.data());
  h5::read_all(group, "clock_offset", H5T_NATIVE_DOUBLE, {hR}, offset.data());
  h5::read_all(group, "peak_memory_bytes", H5T_NATIVE_INT64, {hR}, peak.data());
  h5::read_all(group, "iterations_completed", H5T_NATIVE_INT64, {hR}, completed.data());
  info.hosts = h5::read_strings(group, "rank_host", hR);
  // Added in schema 1.2: older files have neither.
  std::vector<int64_t> local_rank(R, -1);
  std::vector<uint64_t> checksum(R, 0);
  if (h5::has_link(group, "local_rank")) h5::read_all(group, "local_rank", H5T_NATIVE_INT64, {hR}, local_rank.data());
  if (h5::has_link(group, "param_checksum"))
    h5::read_all(group, "param_checksum", H5T_NATIVE_UINT64, {hR}, checksum.data());
  // Schema 1.2 datasets; an older run has none of them (zeros).
  std::vector<std::vector<int64_t>> loader(std::size(kLoaderFields), std::vector<int64_t>(I * R, 0));
  std::vector<int64_t> bad(R, 0);
  for (size_t f = 0; f < std::size(kLoaderFields); ++f)
    if (h5::has_link(group, kLoaderFields[f].name)) h5::read_all(group, kLoaderFields[f].name, H5T_NATIVE_INT64, {hI, hR}, loader[f].data());
  if (h5::has_link(group, "data_bad_samples")) h5::read_all(group, "data_bad_samples", H5T_NATIVE_INT64, {hR}, bad.data());
  // Schema 1.3; older files: "" (not recorded).
  const std::vector<std::string> binding =
      h5::has_link(group, "rank_binding") ? h5::read_strings(group, "rank_binding", hR) : std::vector<std::string>(R);

  record.ranks.resize(R);
  for (size_t r = 0; r < R; ++r) {
    RankTrace& rank = record.ranks[r];
    rank.host = info.hosts[r];
    rank.clock_offset = offset[r];
    rank.peak_memory_bytes = peak[r];
    rank.local_rank = local_rank[r];
    rank.param_checksum = checksum[r];
    rank.data_bad_samples = bad[r];
    rank.binding = binding[r];
    if (completed[r] < 0 || static_cast<size_t>(completed[r]) > I)
      throw_usage_error("iterations_completed of rank " + std::to_string(r) + " is out of range");
    rank.iterations.resize(static_cast<size_t>(completed[r]));
    for (size_t i = 0; i < rank.iterations.size(); ++i) {
      IterationTiming& it = rank.iterations[i];
      it.start = start[i * R + r];
      it.end = end[i * R + r];
      std::copy_n(&phases[(i * R + r) * kPhaseCount], kPhaseCount, it.phase_seconds);
      it.comm_seconds = comm[i * R + r];
      it.loss = loss[i * R + r];
      for (size_t f = 0; f < std::size(kLoaderFields); ++f) it.*kLoaderFields[f].member = loader[f][i * R + r];
      check_timing(it, i, r, i > 0 ? &rank.iterations[i - 1] : nullptr);
    }
  }
  read_step_fields(group, record);
  read_llm_fields(group, record.info);
  return record;
}

}  // namespace dlperf::trace_schema
