// Counter-based randomness for the loader: every random choice of a sample (its crop, its
// flip) comes from a generator seeded by (run seed, sample position), never from thread
// order, so a run's augmentation is the same whatever the number of loader threads.
#pragma once

#include <cstdint>

namespace dlperf::data {

// SplitMix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator whose output
// function is a good 64-bit mixer on its own (also used to derive seeds).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }                  // [0, n); bias < n / 2^64

 private:
  uint64_t state_;
};

}  // namespace dlperf::data
