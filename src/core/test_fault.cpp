// DLPERF_TEST_FAULT parsing and the fault points; see test_fault.h.
#include "core/test_fault.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>

namespace dlperf {
namespace {

struct FaultSpec {
  std::string point;  // empty: no fault configured
  int rank = -1;
  int signal = 0;
  long occurrence = 1;
};

std::atomic<int> g_rank{-1};

int parse_signal(const std::string& s) {
  if (s == "STOP" || s == "SIGSTOP") return SIGSTOP;
  if (s == "KILL" || s == "SIGKILL") return SIGKILL;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return (end != s.c_str() && *end == '\0' && v > 0 && v < 65) ? static_cast<int>(v) : 0;
}

// Read once, on first use: the variable is set by the test before the program starts.
const FaultSpec& spec() {
  static const FaultSpec parsed = [] {
    FaultSpec f;
    const char* env = std::getenv("DLPERF_TEST_FAULT");
    if (env == nullptr || *env == '\0') return f;
    std::string parts[4];
    int n = 0;
    for (const char* c = env; *c != '\0'; ++c) {
      if (*c == ':') {
        if (++n == 4) break;
      } else {
        parts[n] += *c;
      }
    }
    char* end = nullptr;
    f.rank = static_cast<int>(std::strtol(parts[1].c_str(), &end, 10));
    const bool rank_ok = end != parts[1].c_str() && *end == '\0' && f.rank >= 0;
    f.signal = parse_signal(parts[2]);
    if (n == 3) f.occurrence = std::strtol(parts[3].c_str(), nullptr, 10);
    if (parts[0].empty() || !rank_ok || f.signal == 0 || f.occurrence < 1 || n > 3 || n < 2) {
      std::fprintf(stderr, "dlperf: ignoring DLPERF_TEST_FAULT=%s (test-only; want POINT:RANK:STOP|KILL[:N])\n", env);
      return FaultSpec{};
    }
    f.point = parts[0];
    return f;
  }();
  return parsed;
}

}  // namespace

void set_test_fault_rank(int rank) { g_rank.store(rank); }

void test_fault_point(std::string_view point) {
  const FaultSpec& f = spec();
  if (f.point.empty() || point != f.point || g_rank.load() != f.rank) return;
  static std::mutex mu;  // points fire from the training and the trace writer's threads
  static long seen = 0;
  {
    std::lock_guard lock(mu);
    if (++seen != f.occurrence) return;
  }
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::fprintf(stderr, "dlperf test fault: rank %d raises signal %d at %s #%ld (t=%lld.%03ld)\n", f.rank, f.signal, f.point.c_str(),
               f.occurrence, static_cast<long long>(now.tv_sec), now.tv_nsec / 1000000);
  std::fflush(stderr);
  std::raise(f.signal);
}

}  // namespace dlperf
