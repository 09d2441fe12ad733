// Names of run states and step phases: the strings stored in the HDF5 trace (schema in
// docs/trace-schema.md), so they are part of the file format and must not be renamed.
#include "trace/run_record.h"

#include "core/error.h"

namespace dlperf {

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::running: return "running";
    case RunStatus::complete: return "complete";
    case RunStatus::partial: return "partial";
    case RunStatus::failed: return "failed";
  }
  return "unknown";
}

RunStatus run_status_from_string(const std::string& s) {
  for (RunStatus v : {RunStatus::running, RunStatus::complete, RunStatus::partial, RunStatus::failed})
    if (s == to_string(v)) return v;
  throw_usage_error("unknown run status '" + s + "' (expected running, complete, partial or failed)");
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::data: return "data";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::comm_exposed: return "comm_exposed";
    case Phase::optimizer: return "optimizer";
    case Phase::count: break;
  }
  return "unknown";
}

}  // namespace dlperf
