// Start-up agreement between ranks (see agreement.h). Only plain blocking MPI on the world
// communicator: no communicator, heartbeat or timeout exists yet, and every rank calls the
// same sequence, so nothing here can hang while the others wait.
#include "train/cluster/agreement.h"

#include <algorithm>

#include "core/check.h"
#include "core/error.h"
#include "core/fnv.h"
#include "dlperf_version.h"

namespace dlperf {
namespace {

constexpr int kTagLength = 91, kTagText = 92;

Settings with_build(const Settings& s) {
  Settings all = {{"dlperf build", std::string(DLPERF_VERSION) + " (" + DLPERF_GIT_REVISION + ")"}};
  all.insert(all.end(), s.begin(), s.end());
  return all;
}

std::string serialize(const Settings& s) {
  std::string out;
  for (const auto& [k, v] : s) out += k + '\x1f' + v + '\x1e';
  return out;
}

Settings parse(const std::string& text) {
  Settings out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t us = text.find('\x1f', i), rs = text.find('\x1e', i);
    if (us == std::string::npos || rs == std::string::npos || us > rs) break;
    out.emplace_back(text.substr(i, us - i), text.substr(us + 1, rs - us - 1));
    i = rs + 1;
  }
  return out;
}

std::string shown(const std::string& name, const std::string& value) {
  if (name == "dlperf build") return "dlperf " + value;
  return "--" + name + " " + (value.empty() ? "(not given)" : value);
}

// What differs between rank 0's settings and rank r's, in one line.
std::string first_difference(const Settings& mine, const Settings& theirs, int r) {
  const std::string who = "rank " + std::to_string(r);
  for (size_t i = 0; i < std::max(mine.size(), theirs.size()); ++i) {
    if (i >= mine.size() || i >= theirs.size() || mine[i].first != theirs[i].first) {
      const std::string name = i < theirs.size() ? theirs[i].first : mine[i].first;
      return who + " and rank 0 do not have the same options (they differ at --" + name +
             "): every rank of a job must run the same dlperf build with the same options";
    }
    if (mine[i].second != theirs[i].second)
      return who + " was started with " + shown(theirs[i].first, theirs[i].second) + " but rank 0 with " +
             shown(mine[i].first, mine[i].second) + ": every rank of a job must run the same configuration";
  }
  return who + " disagrees with rank 0 on the configuration";
}

}  // namespace

void check_ranks_agree(MPI_Comm comm, const Settings& settings) {
  int rank = 0, size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  const Settings mine = with_build(settings);
  const std::string text = serialize(mine);
  const uint64_t hash = Fnv1a().bytes(text.data(), text.size()).value();
  std::vector<uint64_t> all(static_cast<size_t>(size));
  DLPERF_CHECK_MPI(MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  int differing = -1;
  for (int r = 1; r < size && differing < 0; ++r)
    if (all[static_cast<size_t>(r)] != all[0]) differing = r;
  if (differing < 0) return;
  if (rank == differing) {
    const int n = static_cast<int>(text.size());
    DLPERF_CHECK_MPI(MPI_Send(&n, 1, MPI_INT, 0, kTagLength, comm));
    DLPERF_CHECK_MPI(MPI_Send(text.data(), n, MPI_CHAR, 0, kTagText, comm));
  }
  std::string message = "ranks were started with different options (rank 0 names the first difference)";
  if (rank == 0) {
    int n = 0;
    DLPERF_CHECK_MPI(MPI_Recv(&n, 1, MPI_INT, differing, kTagLength, comm, MPI_STATUS_IGNORE));
    std::string theirs(static_cast<size_t>(std::max(n, 0)), '\0');
    DLPERF_CHECK_MPI(MPI_Recv(theirs.data(), n, MPI_CHAR, differing, kTagText, comm, MPI_STATUS_IGNORE));
    message = first_difference(mine, parse(theirs), differing);
  }
  throw_usage_error(message);
}

void check_parameter_counts_agree(MPI_Comm comm, int64_t parameters) {
  int size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  std::vector<int64_t> all(static_cast<size_t>(size));
  DLPERF_CHECK_MPI(MPI_Allgather(&parameters, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm));
  for (int r = 1; r < size; ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      throw_usage_error("rank " + std::to_string(r) + " built a model with " + std::to_string(all[static_cast<size_t>(r)]) +
                        " parameters but rank 0 with " + std::to_string(all[0]) +
                        ": the ranks run different model code (mixed dlperf builds?)");
}

void check_parameter_layouts_agree(MPI_Comm comm, uint64_t signature, const std::string& isa) {
  int size = 1;
  DLPERF_CHECK_MPI(MPI_Comm_size(comm, &size));
  if (size == 1) return;
  struct Entry {
    uint64_t signature;
    char isa[56];
  } mine{signature, {}};
  isa.copy(mine.isa, sizeof mine.isa - 1);
  std::vector<Entry> all(static_cast<size_t>(size));
  DLPERF_CHECK_MPI(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm));
  for (int r = 1; r < size; ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (e.signature == all[0].signature) continue;
    throw_usage_error("rank " + std::to_string(r) + " keeps the parameters in another layout than rank 0 (its kernels: " +
                      std::string(e.isa) + "; rank 0's: " + all[0].isa +
                      "), so their gradients cannot be averaged: run every rank on one ISA (ONEDNN_MAX_CPU_ISA set to the "
                      "oldest the nodes share)");
  }
}

}  // namespace dlperf
