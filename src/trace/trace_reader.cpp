// read_runs: opens read-only without taking the writers' lock (writers replace the file by
// rename, so an open file is always a complete snapshot) and turns any failure inside the
// file into a usage error naming the file and run, because a bad file is the user's input.
#include "trace/trace_reader.h"

#include <new>
#include <stdexcept>

#include "core/error.h"
#include "trace/h5_io.h"
#include "trace/trace_file.h"
#include "trace/trace_schema.h"

namespace dlperf {

std::vector<RunRecord> read_runs(const std::string& path) {
  h5::Handle file = open_trace_readonly(path);
  std::string where = path;
  try {
    trace_schema::check_root(file, path);
    h5::Handle runs = DLPERF_H5(H5Gopen2(file, trace_schema::kRunsGroup, H5P_DEFAULT), H5Gclose);
    std::vector<std::string> names;
    auto cb = [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
      static_cast<std::vector<std::string>*>(op)->emplace_back(name);
      return 0;
    };
    DLPERF_CHECK_HDF5(H5Literate(runs, H5_INDEX_NAME, H5_ITER_INC, nullptr, cb, &names));
    std::vector<RunRecord> out;
    out.reserve(names.size());
    for (const auto& name : names) {
      where = path + ":/runs/" + name;
      h5::Handle group = DLPERF_H5(H5Gopen2(runs, name.c_str(), H5P_DEFAULT), H5Gclose);
      out.push_back(trace_schema::read_run_group(group));
      out.back().location = where;
    }
    return out;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage && where == path) throw;  // already names the file
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: implausible sizes");
  } catch (const std::length_error&) {
    throw Error(ErrorKind::usage, where + ": corrupt dlperf trace: implausible sizes");
  }
}

}  // namespace dlperf
