// Scalar types of the AscendC API on the host: half and bfloat16_t as 16-bit storage
// with IEEE round-to-nearest-even conversions, plus the rounding modes Cast offers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace AscendC {

enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

}  // namespace AscendC

namespace sim {

inline uint32_t FloatBits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float BitsFloat(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// float -> IEEE binary16, round to nearest even, overflow to inf, NaN kept.
inline uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (absx < 0x38800000u) {  // subnormal half (or zero): scale by 2^24 and round as integer
    const float scaled = BitsFloat(absx) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t mant_odd = (absx >> 13) & 1u;
  const uint32_t rounded = absx + 0xfffu + mant_odd;
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t FloatToBf16Bits(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float Bf16BitsToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

}  // namespace sim

// 16-bit float types as the AscendC headers name them (global `half`, AscendC::bfloat16_t
// is `bfloat16_t` at global scope too).
struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(sim::FloatToHalfBits(f)) {}  // NOLINT: implicit like the device type
  operator float() const { return sim::HalfBitsToFloat(bits); }
  static half FromBits(uint16_t b) { half h; h.bits = b; return h; }
};

struct bfloat16_t {
  uint16_t bits = 0;
  bfloat16_t() = default;
  bfloat16_t(float f) : bits(sim::FloatToBf16Bits(f)) {}  // NOLINT
  operator float() const { return sim::Bf16BitsToFloat(bits); }
  static bfloat16_t FromBits(uint16_t b) { bfloat16_t h; h.bits = b; return h; }
};

namespace AscendC {
using ::bfloat16_t;
using ::half;

inline float ToFloat(const bfloat16_t& v) { return static_cast<float>(v); }
inline float ToFloat(const half& v) { return static_cast<float>(v); }
inline float ToFloat(float v) { return v; }
}  // namespace AscendC

namespace sim {

// Rounds `x` to the 16-bit type U under `mode`: RNE first, then one step toward the
// direction the mode asks for when RNE went the other way.
template <typename U>
U RoundTo(float x, AscendC::RoundMode mode) {
  U r(x);
  if (std::isnan(x) || std::isinf(x)) return r;
  const float back = static_cast<float>(r);
  auto step = [&](bool up) {
    // Next representable value up or down: adjust the magnitude bits by one.
    const bool neg = (r.bits & 0x8000u) != 0;
    const bool grow = (up != neg);
    uint16_t mag = r.bits & 0x7fffu;
    if (mag == 0 && !grow) { r.bits = static_cast<uint16_t>(up ? 0x0001u : 0x8001u); return; }
    mag = static_cast<uint16_t>(grow ? mag + 1 : mag - 1);
    r.bits = static_cast<uint16_t>((r.bits & 0x8000u) | mag);
  };
  switch (mode) {
    case AscendC::RoundMode::CAST_NONE:
    case AscendC::RoundMode::CAST_RINT: break;
    case AscendC::RoundMode::CAST_FLOOR: if (back > x) step(false); break;
    case AscendC::RoundMode::CAST_CEIL: if (back < x) step(true); break;
    case AscendC::RoundMode::CAST_TRUNC:
      if (std::fabs(back) > std::fabs(x)) step(x < 0);
      break;
    case AscendC::RoundMode::CAST_ROUND: {  // ties away from zero: differs from RNE only on ties
      if (back == x) break;
      U nearest = r;
      step(x > back);  // the neighbour on the other side of x
      const float other = static_cast<float>(r);
      const bool tie = std::fabs(other - x) == std::fabs(back - x);
      if (!(tie && std::fabs(other) > std::fabs(back))) r = nearest;
      break;
    }
    case AscendC::RoundMode::CAST_ODD: {
      if (back != x && (r.bits & 1u) == 0) step(back < x);
      break;
    }
  }
  return r;
}

}  // namespace sim

namespace sim {

// Cast to half/bfloat16_t saturates by default on the hardware: a finite value beyond
// the type's range becomes its largest finite value (with the sign), not inf.
template <typename U>
U Saturate(U r, float x) {
  if (std::isinf(x) || std::isnan(x)) return r;
  if ((r.bits & 0x7fffu) == (std::is_same<U, half>::value ? 0x7c00u : 0x7f80u))
    return U::FromBits(static_cast<uint16_t>((r.bits & 0x8000u) | (std::is_same<U, half>::value ? 0x7bffu : 0x7f7fu)));
  return r;
}

}  // namespace sim
