// Runs a function when an exception unwinds through the scope that holds it, and not when the
// scope ends normally: what must happen before the objects declared earlier are destroyed by a
// fault (train/trainer.cpp and train/run.cpp abort NCCL there, so that freeing device memory
// cannot wait for a collective a dead peer never joins).
//   const OnUnwind abort_on_fault([&] { comm.abort_in_flight(); });
#pragma once

#include <exception>
#include <utility>

namespace dlperf {

template <class F>
class OnUnwind {
 public:
  explicit OnUnwind(F f) : f_(std::move(f)), exceptions_(std::uncaught_exceptions()) {}
  ~OnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) f_();
  }
  OnUnwind(const OnUnwind&) = delete;
  OnUnwind& operator=(const OnUnwind&) = delete;

 private:
  F f_;
  int exceptions_;
};

}  // namespace dlperf
