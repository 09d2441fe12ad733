// Heartbeat thread and diagnosis; see heartbeat.h for what it tells and why.
#include "comm/heartbeat.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sstream>

#include "comm/job_abort.h"
#include "core/check.h"

namespace dlperf {
namespace {

constexpr int kTag = 7001;
constexpr uint64_t kBeat = 0;
constexpr uint64_t kBye = 1;
using Clock = std::chrono::steady_clock;
using Message = std::array<uint64_t, 3>;  // {last started seq, last completed seq, kBeat|kBye}

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

Heartbeat::Heartbeat(MPI_Comm parent, std::vector<std::string> hosts, std::chrono::milliseconds period)
    : comm_(MpiComm::dup(parent)), hosts_(std::move(hosts)), period_(period) {
  DLPERF_CHECK_MPI(MPI_Comm_rank(comm_.get(), &rank_));
  DLPERF_CHECK_MPI(MPI_Comm_size(comm_.get(), &size_));
  const auto n = static_cast<size_t>(size_);
  last_heard_.assign(n, Clock::now());
  peer_started_.assign(n, 0);
  peer_completed_.assign(n, 0);
  peer_left_.assign(n, 0);
  hosts_.resize(n);
  world_rank_.resize(n);
  {
    MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    DLPERF_CHECK_MPI(MPI_Comm_group(comm_.get(), &mine));
    DLPERF_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> ranks(n);
    for (size_t i = 0; i < n; ++i) ranks[i] = static_cast<int>(i);
    DLPERF_CHECK_MPI(MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_rank_.data()));
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
  }
  if (size_ > 1) thread_ = std::thread([this] { run(); });
  register_heartbeat(this);
}

std::optional<bool> Heartbeat::heard_from_world_rank(int q) const {
  const auto it = std::find(world_rank_.begin(), world_rank_.end(), q);
  if (it == world_rank_.end() || it - world_rank_.begin() == rank_) return std::nullopt;
  const auto i = static_cast<size_t>(it - world_rank_.begin());
  std::lock_guard lock(mu_);
  return !peer_left_[i] && Clock::now() - last_heard_[i] < 2 * period_;
}

Heartbeat::~Heartbeat() {
  unregister_heartbeat(this);
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  // Pending requests on it would make MPI_Comm_free wait on peers that may be gone.
  if (!clean_) comm_.leak();
}

void Heartbeat::run() {
  const auto n = static_cast<size_t>(size_);
  std::vector<Message> rbuf(n), sbuf(n);
  std::vector<MPI_Request> rreq(n, MPI_REQUEST_NULL), sreq(n, MPI_REQUEST_NULL);
  std::vector<char> bye_sent(n, 0);
  MPI_Comm c = comm_.get();

  auto post_recv = [&](size_t p) {
    if (MPI_Irecv(rbuf[p].data(), 3, MPI_UINT64_T, static_cast<int>(p), kTag, c, &rreq[p]) != MPI_SUCCESS)
      rreq[p] = MPI_REQUEST_NULL;  // that peer will simply look silent
  };
  for (size_t p = 0; p < n; ++p)
    if (static_cast<int>(p) != rank_) post_recv(p);

  // A slow peer may reach its own shutdown later than us (it was writing its trace): give it
  // a while, then leave without its goodbye rather than hold up MPI_Finalize forever.
  const auto bye_bound = std::max<Clock::duration>(10 * period_, std::chrono::seconds(10));
  auto next_beat = Clock::now();
  auto stop_deadline = Clock::time_point::max();

  for (;;) {
    const auto now = Clock::now();
    for (size_t p = 0; p < n; ++p) {
      if (rreq[p] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      if (MPI_Test(&rreq[p], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        rreq[p] = MPI_REQUEST_NULL;
        clean_ = false;
        continue;
      }
      if (!flag) continue;
      {
        std::lock_guard lock(mu_);
        last_heard_[p] = now;
        peer_started_[p] = rbuf[p][0];
        peer_completed_[p] = rbuf[p][1];
        if (rbuf[p][2] == kBye) peer_left_[p] = 1;
      }
      if (rbuf[p][2] != kBye) post_recv(p);
    }

    const bool stopping = stop_.load();
    if (stopping && fast_.load()) {
      clean_ = false;
      break;
    }
    if (stopping && stop_deadline == Clock::time_point::max()) stop_deadline = now + bye_bound;

    if (stopping || now >= next_beat) {
      for (size_t p = 0; p < n; ++p) {
        if (static_cast<int>(p) == rank_ || bye_sent[p]) continue;
        if (sreq[p] != MPI_REQUEST_NULL) {
          int flag = 0;
          if (MPI_Test(&sreq[p], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            sreq[p] = MPI_REQUEST_NULL;
            clean_ = false;
          }
          if (!flag) continue;  // the peer is not draining its messages: never pile up sends
        }
        sbuf[p] = {started_.load(std::memory_order_relaxed), completed_.load(std::memory_order_relaxed),
                   stopping ? kBye : kBeat};
        if (MPI_Isend(sbuf[p].data(), 3, MPI_UINT64_T, static_cast<int>(p), kTag, c, &sreq[p]) != MPI_SUCCESS) {
          sreq[p] = MPI_REQUEST_NULL;
          clean_ = false;
        }
        if (stopping) bye_sent[p] = 1;
      }
      if (!stopping) next_beat = now + period_;
    }

    if (stopping) {
      bool finished = true;
      for (size_t p = 0; p < n; ++p) {
        if (static_cast<int>(p) == rank_) continue;
        if (sreq[p] != MPI_REQUEST_NULL) {
          int flag = 0;
          if (MPI_Test(&sreq[p], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) sreq[p] = MPI_REQUEST_NULL, clean_ = false;
        }
        if (!bye_sent[p] || sreq[p] != MPI_REQUEST_NULL || rreq[p] != MPI_REQUEST_NULL) finished = false;
      }
      if (finished) break;
      if (now > stop_deadline) {
        clean_ = false;
        break;
      }
    }
    std::this_thread::sleep_for(stopping ? std::chrono::milliseconds(1)
                                         : std::min<std::chrono::milliseconds>(period_ / 5, std::chrono::milliseconds(20)));
  }

  // Leaving without every goodbye: withdraw our receives (local for receives) and forget the
  // sends, so nothing references our buffers; the communicator itself is leaked.
  for (auto& r : rreq)
    if (r != MPI_REQUEST_NULL) {
      MPI_Cancel(&r);
      if (!fast_.load()) MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  if (!fast_.load())
    for (auto& r : sreq)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

std::pair<double, int> Heartbeat::longest_silence() const {
  const auto now = Clock::now();
  std::pair<double, int> worst{0.0, -1};
  std::lock_guard lock(mu_);
  for (int p = 0; p < size_; ++p) {
    const auto i = static_cast<size_t>(p);
    if (p == rank_ || peer_left_[i]) continue;
    const double age = seconds_between(last_heard_[i], now);
    if (age > worst.first) worst = {age, p};
  }
  return worst;
}

std::string Heartbeat::diagnose(uint64_t seq) const {
  const auto now = Clock::now();
  const auto silent_after = 4 * period_;
  std::ostringstream os;
  bool any = false;
  std::lock_guard lock(mu_);
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const auto i = static_cast<size_t>(p);
    const double age = seconds_between(last_heard_[i], now);
    char age_text[32];
    std::snprintf(age_text, sizeof age_text, "%.1f s", age);
    std::string who = "rank " + std::to_string(p) + " (" + hosts_[i] + ")";
    if (peer_left_[i]) {
      os << (any ? "; " : "") << who << " has already shut down its communicator";
    } else if (now - last_heard_[i] > silent_after) {
      os << (any ? "; " : "") << who << ": no heartbeat for " << age_text
         << " (process dead, stopped, or its node unreachable)";
    } else if (peer_started_[i] < seq) {
      os << (any ? "; " : "") << who << " is alive (heartbeat " << age_text << " ago) but has not started operation #"
         << seq << " (last started #" << peer_started_[i] << "): hung in its own work or on a different code path";
    } else {
      continue;
    }
    any = true;
  }
  if (!any) return "every peer is alive and has started it (slow transport or a stall inside the communication library)";
  return os.str();
}

}  // namespace dlperf
