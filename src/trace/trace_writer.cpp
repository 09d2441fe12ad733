// TraceWriter: every call is one update_trace_file() transaction (copy, edit, rename under
// a lock), so the run group is the only thing touched and other runs are copied verbatim.
#include "trace/trace_writer.h"

#include <cstdio>

#include "core/error.h"
#include "trace/h5_io.h"
#include "trace/trace_file.h"
#include "trace/trace_schema.h"

namespace dlperf {
namespace {

// Next free run_NNNNNN: one past the largest index present, so numbering follows append order.
std::string next_run_name(hid_t runs) {
  long long max_index = 0;
  auto cb = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
    long long index = 0;
    if (std::sscanf(name, "run_%lld", &index) == 1 && index > *static_cast<long long*>(op))
      *static_cast<long long*>(op) = index;
    return 0;
  };
  DLPERF_CHECK_HDF5(H5Literate(runs, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &max_index));
  char name[32];
  std::snprintf(name, sizeof name, "%s%06lld", trace_schema::kRunPrefix, max_index + 1);
  return name;
}

std::string add_run(hid_t file, const RunRecord& record, RunStatus status, const std::string& reason) {
  h5::Handle runs = DLPERF_H5(H5Gopen2(file, trace_schema::kRunsGroup, H5P_DEFAULT), H5Gclose);
  std::string name = next_run_name(runs);
  h5::Handle group = DLPERF_H5(H5Gcreate2(runs, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  trace_schema::write_run_group(group, record, status, reason);
  return name;
}

}  // namespace

TraceWriter::TraceWriter(std::string path, const RunInfo& info, const UpdateOptions& opt) : path_(std::move(path)), later_(opt) {
  RunRecord empty;
  empty.info = info;
  UpdateOptions first = opt;
  first.check_existing_runs = true;  // never grow a file that already has a damaged run
  update_trace_file(path_, [&](hid_t file) { run_name_ = add_run(file, empty, RunStatus::running, ""); }, first);
  later_.check_existing_runs = false;
  // A periodic flush gives up its lock wait on a stop (opt.lock.cancel: LockInterrupted): the
  // final write, which waits without cancellation, stores everything the flush would have.
  flush_ = later_;
  later_.lock.cancel = nullptr;
}

void TraceWriter::flush(const RunRecord& record) {
  update_trace_file(path_, [&](hid_t file) { write_group(file, record, RunStatus::running, ""); }, flush_);
}

void TraceWriter::finish(const RunRecord& record, RunStatus status, const std::string& reason, double lock_timeout_seconds) {
  UpdateOptions opt = later_;
  if (lock_timeout_seconds >= 0 && lock_timeout_seconds < opt.lock.timeout_seconds) {
    opt.lock.timeout_seconds = lock_timeout_seconds;
    opt.lock.timeout_source = "a stopped run's wait";
  }
  update_trace_file(path_, [&](hid_t file) { write_group(file, record, status, reason); }, opt);
}

void TraceWriter::write_group(hid_t file, const RunRecord& record, RunStatus status, const std::string& reason) {
  std::string where = std::string(trace_schema::kRunsGroup) + "/" + run_name_;
  // The group is missing only if someone edited the file by hand; recreate rather than lose the run.
  h5::Handle group = h5::has_link(file, where.c_str())
                         ? DLPERF_H5(H5Gopen2(file, where.c_str(), H5P_DEFAULT), H5Gclose)
                         : DLPERF_H5(H5Gcreate2(file, where.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  trace_schema::write_run_group(group, record, status, reason);
}

void append_runs(const std::string& path, const std::vector<RunRecord>& runs) {
  update_trace_file(path, [&](hid_t file) {
    for (const auto& r : runs) add_run(file, r, r.info.status, r.info.status_reason);
  });
}

}  // namespace dlperf
