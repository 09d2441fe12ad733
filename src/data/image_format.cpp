#include "data/image_format.h"

namespace dlperf::data {

const char* to_string(PixelType t) {
  switch (t) {
    case PixelType::f32: return "f32";
    case PixelType::bf16: return "bf16";
    case PixelType::f16: return "f16";
  }
  return "?";
}

const char* to_string(PixelLayout l) { return l == PixelLayout::nchw ? "nchw" : "nhwc"; }

size_t pixel_bytes(PixelType t) { return t == PixelType::f32 ? 4 : 2; }

std::string ImageBatchFormat::describe() const {
  return std::to_string(batch) + "x" + std::to_string(height) + "x" + std::to_string(width) + " " + to_string(type) + " " +
         to_string(layout);
}

uint16_t to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | (abs > 0x7F800000u ? 0x7E00u : 0x7C00u));  // inf/NaN/overflow
  if (abs < 0x38800000u) {  // subnormal half (or zero): round |f| * 2^24 to an integer, ties to even
    float a;
    std::memcpy(&a, &abs, 4);
    a *= 16777216.0f;  // exact: a power of two
    auto m = static_cast<uint32_t>(a);
    const float rest = a - static_cast<float>(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias the exponent (127 -> 15), round the 13 dropped mantissa bits to nearest even.
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t dropped = abs & 0x1FFFu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still right
  return static_cast<uint16_t>(sign | h);
}

float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  float f;
  if (exp == 0) {
    f = static_cast<float>(man) / 16777216.0f;  // subnormal: man * 2^-24
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= sign;
    std::memcpy(&f, &u, 4);
    return f;
  }
  uint32_t u = sign | (exp == 31 ? (0xFFu << 23) | (man << 13) : ((exp + 112u) << 23) | (man << 13));
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace dlperf::data
