// RAII owner of one HDF5 id (file, group, dataset, dataspace, datatype, attribute, property
// list), so no code path (including a thrown dlperf::Error) leaks an id or leaves a file open.
#pragma once

#include <hdf5.h>

#include <utility>

#include "core/check.h"

namespace dlperf::h5 {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  // Takes ownership of an id that DLPERF_CHECK_HDF5 has already validated.
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), closer_(o.closer_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
      closer_ = o.closer_;
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: handles are passed straight to H5* calls
  // Gives up ownership without closing: for a close whose status matters (a file's close
  // writes its metadata: H5Fclose(h.release()) must be checked).
  hid_t release() { return std::exchange(id_, H5I_INVALID_HID); }
  // Closing can fail only on a broken id; a destructor must not throw, so the status is dropped.
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Stops HDF5 from printing its error stack to stderr: dlperf reports one line per failure
// through dlperf::Error instead. Idempotent; every trace entry point calls it.
void silence_error_stack();

}  // namespace dlperf::h5

// Wraps a freshly returned id: checks it (throws on negative) and owns it.
#define DLPERF_H5(call, closer) ::dlperf::h5::Handle(DLPERF_CHECK_HDF5(call), closer)
