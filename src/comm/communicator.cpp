// Small shared helpers of the Communicator interface (names in messages).
#include "comm/communicator.h"

#include <cstdio>
#include <utility>

#include "core/error.h"

namespace dlperf {

const char* to_string(CommBackend b) { return b == CommBackend::mpi ? "mpi" : "nccl"; }

const char* to_string(DataType t) {
  switch (t) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "half";
    case DataType::bfloat16: return "bfloat16";
    case DataType::float32: return "float";
    case DataType::float64: return "double";
  }
  return "type";
}

size_t size_of(DataType t) {
  switch (t) {
    case DataType::int8:
    case DataType::uint8: return 1;
    case DataType::float16:
    case DataType::bfloat16: return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32: return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64: return 8;
  }
  return 1;
}

bool parse_data_type(const std::string& name, DataType& out) {
  for (DataType t : kAllDataTypes)
    if (name == to_string(t)) {
      out = t;
      return true;
    }
  static const std::pair<const char*, DataType> aliases[] = {
      {"float32", DataType::float32}, {"fp32", DataType::float32},   {"float64", DataType::float64},
      {"fp64", DataType::float64},    {"float16", DataType::float16}, {"fp16", DataType::float16},
      {"bf16", DataType::bfloat16}};
  for (const auto& [alias, t] : aliases)
    if (name == alias) {
      out = t;
      return true;
    }
  return false;
}

const char* to_string(CommOp op) {
  switch (op) {
    case CommOp::broadcast: return "broadcast";
    case CommOp::allreduce_sum: return "allreduce";
    case CommOp::barrier: return "barrier";
    case CommOp::reduce_scatter_sum: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
  }
  return "operation";
}

CommRequest Communicator::reduce_scatter_start(const float*, float*, std::span<const size_t>) {
  throw Error(ErrorKind::usage, std::string("the ") + to_string(backend()) + " communicator here has no reduce-scatter (use nccl on cuda, mpi on cpu)");
}

CommRequest Communicator::all_gather_start(const float*, float*, std::span<const size_t>) {
  throw Error(ErrorKind::usage, std::string("the ") + to_string(backend()) + " communicator here has no all-gather (use nccl on cuda, mpi on cpu)");
}

int64_t ring_bytes(std::span<const CommRequest> requests, int ranks) {
  if (ranks < 2) return 0;
  const auto n = static_cast<uint64_t>(ranks);
  uint64_t numerator = 0;  // sum of k (n - 1) S, over n
  for (const auto& r : requests) {
    const uint64_t k = r.op() == CommOp::allreduce_sum ? 2 : (r.op() == CommOp::reduce_scatter_sum || r.op() == CommOp::all_gather) ? 1 : 0;
    numerator += k * (n - 1) * r.bytes();
  }
  return static_cast<int64_t>(numerator / n);
}

std::string describe_request(const RequestState& s) {
  const double age = std::chrono::duration<double>(CommClock::now() - s.started).count();
  char text[160];
  std::snprintf(text, sizeof text, "%s #%llu (%zu bytes, started %.1f s ago)", to_string(s.op),
                static_cast<unsigned long long>(s.seq), s.bytes, age);
  return text;
}

}  // namespace dlperf
