// Names and version of the HDF5 trace schema, in one place so the writer, the reader and
// docs/trace-schema.md agree. Bump the minor version for additions a 1.x reader can ignore,
// the major version for anything an older reader would misread (it then refuses the file).
#pragma once

#include <hdf5.h>

#include <string>

#include "trace/run_record.h"

namespace dlperf::trace_schema {

inline constexpr int kMajor = 1;
inline constexpr int kMinor = 3;  // 1.2: local rank, checksum, settings, kernels, loader, and issue 13's step fields; 1.3: issue 25's grad_accum, global_batch, zero_stage, comm_bytes, issue 24's LLM measures, issue 27's rank_binding
inline constexpr const char* kVersionAttr = "dlperf_schema_version";  // root attribute, "1.3"
inline constexpr const char* kFormatAttr = "dlperf_format";           // root attribute, "dlperf-trace"
inline constexpr const char* kFormatName = "dlperf-trace";
inline constexpr const char* kRunsGroup = "runs";                      // /runs/run_000001, ...
inline constexpr const char* kRunPrefix = "run_";
inline constexpr const char* kVersionPrefix = "version_";              // version_onednn = "3.1.1"

std::string version_string();  // "1.3"

// Writes the root attributes of a new trace file.
void write_root(hid_t file);
// Raises the root's version to this writer's when the file has an older minor version of the
// same major one (checked by check_root first): the file may now hold this version's fields.
void upgrade_root(hid_t file);
// Checks the root attributes; throws Error(usage) naming `path` when the file is not a
// dlperf trace or was written by a newer major schema version.
void check_root(hid_t file, const std::string& path);

// Writes (or rewrites, on a later flush) everything in `record` into an open run group,
// with `status` and `reason` in place of record.info's.
void write_run_group(hid_t group, const RunRecord& record, RunStatus status, const std::string& reason);
// Reads one run group; throws Error(usage) when it is malformed.
RunRecord read_run_group(hid_t group);

// The 1.2 additions of issue 13 (trace_schema_step.cpp), called by the two above.
void write_step_fields(hid_t group, const RunRecord& record);
void read_step_fields(hid_t group, RunRecord& record);
// The 1.3 LLM measures of issue 24 (trace_schema_llm.cpp).
void write_llm_fields(hid_t group, const RunInfo& info);
void read_llm_fields(hid_t group, RunInfo& info);

}  // namespace dlperf::trace_schema
