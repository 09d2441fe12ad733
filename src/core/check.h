// Status-code checks for every library dlperf calls, all through one mechanism:
//   DLPERF_CHECK_MPI(MPI_Bcast(...));
//   DLPERF_CHECK_HDF5(H5Fclose(f));       // herr_t / hid_t: negative is failure
//   DLPERF_CHECK_HWLOC(hwloc_topology_load(t));  // -1 and errno on failure
//   DLPERF_CHECK(cudaMalloc(...));        // any status type with a StatusTraits specialisation
// A failure throws dlperf::Error(ErrorKind::library) naming the call, file:line, host and rank.
#pragma once

#include <mpi.h>

#include <source_location>
#include <string>
#include <string_view>

#include "core/error.h"

namespace dlperf {

// Specialise for a library's status enum: library name, success test, description, and
// optionally `static bool out_of_memory(Status)`: such a failure throws OutOfMemoryError (still
// a library error, which --find-max-batch catches to try a smaller batch).
template <class Status>
struct StatusTraits;

[[noreturn]] void throw_out_of_memory_error(std::string_view library, std::string_view call, std::string_view detail,
                                            const std::source_location& where);

template <class Status>
inline void check_status(Status s, const char* call, const std::source_location& where) {
  using T = StatusTraits<Status>;
  if (T::ok(s)) return;
  if constexpr (requires { T::out_of_memory(s); }) {
    if (T::out_of_memory(s)) throw_out_of_memory_error(T::library, call, T::describe(s), where);
  }
  throw_library_error(T::library, call, T::describe(s), where);
}

std::string mpi_error_string(int code);
std::string errno_string();  // strerror(errno) of the calling thread

inline void check_mpi(int code, const char* call, const std::source_location& where) {
  if (code != MPI_SUCCESS) throw_library_error("MPI", call, mpi_error_string(code), where);
}

// HDF5 returns negative herr_t/hid_t on failure; the error stack is printed by HDF5 itself
// only when enabled, so the message names the call.
template <class Int>
inline Int check_hdf5(Int code, const char* call, const std::source_location& where) {
  if (code < 0) throw_library_error("HDF5", call, "returned " + std::to_string(static_cast<long long>(code)), where);
  return code;
}

// hwloc returns -1 (or another negative value) and sets errno on failure.
inline int check_hwloc(int code, const char* call, const std::source_location& where) {
  if (code < 0) throw_library_error("hwloc", call, "returned " + std::to_string(code) + ": " + errno_string(), where);
  return code;
}

}  // namespace dlperf

#define DLPERF_CHECK(call) ::dlperf::check_status((call), #call, std::source_location::current())
#define DLPERF_CHECK_MPI(call) ::dlperf::check_mpi((call), #call, std::source_location::current())
#define DLPERF_CHECK_HDF5(call) ::dlperf::check_hdf5((call), #call, std::source_location::current())
#define DLPERF_CHECK_HWLOC(call) ::dlperf::check_hwloc((call), #call, std::source_location::current())
