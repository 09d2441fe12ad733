// Element access for the hand-written CPU loops (embedding, dropout, masked softmax, gather):
// they read and write f32 or bf16 storage and compute in f32. bf16 is the upper half of an
// IEEE f32; stores round to nearest even, as oneDNN's own conversions do.
#pragma once

#include <bit>
#include <cstdint>

#include "backend/tensor.h"

namespace dlperf::onednn {

struct bf16_t {
  uint16_t bits;
};

inline float to_f32(float v) { return v; }
inline float to_f32(bf16_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16); }

template <class T>
inline T from_f32(float v);
template <>
inline float from_f32<float>(float v) { return v; }
template <>
inline bf16_t from_f32<bf16_t>(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  if ((u & 0x7F800000u) == 0x7F800000u) return {static_cast<uint16_t>((u >> 16) | ((u & 0xFFFFu) ? 0x40u : 0u))};  // inf, nan
  return {static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

// Calls f(float{}) or f(bf16_t{}) for a tensor dtype: one template body serves both.
template <class F>
inline void dispatch_float(DType t, F&& f) {
  if (t == DType::bf16) f(bf16_t{});
  else f(float{});
}

}  // namespace dlperf::onednn
