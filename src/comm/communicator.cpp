// Small shared helpers of the Communicator interface (names in messages).
#include "comm/communicator.h"

#include <cstdio>

namespace dlperf {

const char* to_string(CommBackend b) { return b == CommBackend::mpi ? "mpi" : "nccl"; }

const char* to_string(CommOp op) {
  switch (op) {
    case CommOp::broadcast: return "broadcast";
    case CommOp::allreduce_sum: return "allreduce";
    case CommOp::barrier: return "barrier";
  }
  return "operation";
}

std::string describe_request(const RequestState& s) {
  const double age = std::chrono::duration<double>(CommClock::now() - s.started).count();
  char text[160];
  std::snprintf(text, sizeof text, "%s #%llu (%zu bytes, started %.1f s ago)", to_string(s.op),
                static_cast<unsigned long long>(s.seq), s.bytes, age);
  return text;
}

}  // namespace dlperf
