// Vectorizable exp, expm1, tanh, sigmoid and ELU, in float32 and float64, for the CPU backend's
// activation loops.  The libm versions are scalar calls (~10 ns each in float, ~20 ns for a
// double tanh, which libm builds from expm1) and dominate a small network's forward pass; these
// are branch-free so the compiler vectorizes the loops that call them.
//
// exp: Cody–Waite range reduction x = k·ln2 + r, |r| ≤ ln2/2, with ln2 split in two so k·ln2 is
// exact, then the Taylor polynomial of eʳ (degree 7 in float, truncation < 2e-9 relative; 13 in
// double, < 1e-17) and 2ᵏ assembled in the exponent bits, k taken from the rounding constant's
// low bits (AVX2 has no packed double → int64 conversion).  expm1 from the same reduction:
// 2ᵏ·expm1(r) + (2ᵏ − 1) with expm1(r) = r + r²·Σ rⁿ/(n+2)!; for |x| < ln2/2, k = 0 and r = x, so
// small arguments do not cancel.  tanh: float (1 − e^{−2|x|}) / (1 + e^{−2|x|}) with the sign put
// back, and for |x| < 0.25 — where that quotient cancels — the odd Taylor series to x¹¹
// (truncation < 3e-9 relative); double −e / (2 + e) with e = expm1(−2|x|), which cancels nowhere.
// Clamps are written so that a NaN argument stays NaN.
//
// Accuracy against a higher-precision reference is asserted in tests/backend/fast_math_test.cpp:
// ≤ 3 float ulps, ≤ 4 double ulps.
#pragma once

#include <cstdint>
#include <cstring>

namespace lmtrain::cpu {

namespace detail {
// x = k·ln2 + r with k = round(x·log2 e), |r| ≤ ln2/2, for |x| ≤ 88; returns r and stores 2ᵏ in
// *scale.  Rounds by adding and removing 1.5·2²³ (no libm call, vectorizes), and takes k from the
// low bits of the rounded sum: a NaN x stays NaN and never meets a float → int conversion, which
// would be undefined.
inline float reduce(float x, float* scale) {
  constexpr float kRound = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + kRound;
  const float k = shifted - kRound;
  std::int32_t k_bits, round_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  std::memcpy(&round_bits, &kRound, sizeof round_bits);
  const auto bits = static_cast<std::uint32_t>(k_bits - round_bits + 127) << 23;
  std::memcpy(scale, &bits, sizeof bits);
  return (x - k * 0.693359375f) + k * 2.12194440e-4f;
}
}  // namespace detail

inline float fast_exp(float x) {
  // Clamp to the range where eˣ is a normal float; exp(−87.3) ≈ 1.2e-38.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float scale;
  const float r = detail::reduce(x, &scale);
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * scale;
}

inline float fast_tanh(float x) {
  const float ax = x < 0 ? -x : x;
  // Large branch: tanh|x| = (1 − t)/(1 + t), t = e^{−2|x|}; |x| ≥ 9 gives 1 to float precision.
  // (Written so that a NaN x stays NaN.)
  const float t = fast_exp(-2.0f * (ax > 9.0f ? 9.0f : ax));
  const float large = (1.0f - t) / (1.0f + t);
  // Small branch: x − x³/3 + 2x⁵/15 − 17x⁷/315 + 62x⁹/2835 − 1382x¹¹/155925.
  const float x2 = ax * ax;
  float p = -1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = ax + ax * x2 * p;
  const float magnitude = ax < 0.25f ? small : large;
  return x < 0 ? -magnitude : magnitude;
}

// eˣ − 1 = 2ᵏ·expm1(r) + (2ᵏ − 1) with expm1(r) = r + r²·Σ rⁿ/(n+2)! to r⁸ (truncation
// < 2e-8 relative): for |x| < ln2/2, k = 0 and r = x, so small arguments do not cancel.  ELU's
// e^z − 1 for z ≤ 0.  (One polynomial: 1.6× faster than a series for |x| < 1 beside eˣ − 1,
// both evaluated in a vectorized loop, and ≤ 1.3 ulps against 1.6.)
inline float fast_expm1(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float scale;
  const float r = detail::reduce(x, &scale);
  float q = 1.0f / 40320.0f;  // 1/8!
  q = q * r + 1.0f / 5040.0f;
  q = q * r + 1.0f / 720.0f;
  q = q * r + 1.0f / 120.0f;
  q = q * r + 1.0f / 24.0f;
  q = q * r + 1.0f / 6.0f;
  q = q * r + 0.5f;
  const float em = r + r * r * q;  // expm1(r)
  return scale * em + (scale - 1.0f);
}

// float64 (see the header comment).
namespace detail {
constexpr double kRoundDouble = 6755399441055744.0;  // 1.5·2⁵²: adding it rounds to an integer
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;

// x = k·ln2 + r with k = round(x·log2 e), |r| ≤ ln2/2 (slightly more from rounding), for
// |x| ≤ 709; returns r and stores 2ᵏ in *scale.
inline double reduce(double x, double* scale) {
  const double shifted = x * kLog2e + kRoundDouble;
  const double k = shifted - kRoundDouble;
  // k sits in the low bits of `shifted`'s significand: its bits minus the constant's are k.
  std::int64_t k_bits, round_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  std::memcpy(&round_bits, &kRoundDouble, sizeof round_bits);
  const auto bits = static_cast<std::uint64_t>(k_bits - round_bits + 1023) << 52;
  std::memcpy(scale, &bits, sizeof bits);
  return (x - k * kLn2Hi) - k * kLn2Lo;
}

// expm1(r) = r + r²·Σ rⁿ/(n+2)! to r¹³ for the reduced |r| ≤ ln2/2 (truncation < 1e-17
// relative); exp and expm1 both build on it.
inline double expm1_reduced(double r) {
  double q = 1.0 / 6227020800.0;  // 1/13!
  q = q * r + 1.0 / 479001600.0;
  q = q * r + 1.0 / 39916800.0;
  q = q * r + 1.0 / 3628800.0;
  q = q * r + 1.0 / 362880.0;
  q = q * r + 1.0 / 40320.0;
  q = q * r + 1.0 / 5040.0;
  q = q * r + 1.0 / 720.0;
  q = q * r + 1.0 / 120.0;
  q = q * r + 1.0 / 24.0;
  q = q * r + 1.0 / 6.0;
  q = q * r + 0.5;
  return r + r * r * q;
}
}  // namespace detail

inline double fast_exp(double x) {
  // Clamp to the range where eˣ and 2ᵏ are normal doubles; exp(−708) ≈ 3.3e-308.
  x = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
  double scale;
  const double r = detail::reduce(x, &scale);
  return (1.0 + detail::expm1_reduced(r)) * scale;
}

inline double fast_expm1(double x) {
  x = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
  double scale;
  const double em = detail::expm1_reduced(detail::reduce(x, &scale));
  return scale * em + (scale - 1.0);
}

inline double fast_tanh(double x) {
  // tanh|x| rounds to 1 for |x| ≥ 19.1; the clamp keeps e^{−2|x|} normal.
  const double ax = x < 0 ? -x : x;
  const double e = fast_expm1(-2.0 * (ax > 20.0 ? 20.0 : ax));  // a NaN x stays NaN
  const double magnitude = -e / (2.0 + e);
  return x < 0 ? -magnitude : magnitude;
}

// ELU and sigmoid from exp and expm1, the same code for float and double.
template <typename T>
inline T fast_elu(T x) {
  return x > 0 ? x : fast_expm1(x);
}

template <typename T>
inline T fast_sigmoid(T x) {
  // e^{−|x|} never overflows; σ(x) = 1/(1 + e^{−x}) for x ≥ 0, e^{x}/(1 + e^{x}) otherwise.
  const T e = fast_exp(x < 0 ? x : -x);
  const T inverse = T(1) / (T(1) + e);
  return x < 0 ? e * inverse : inverse;
}

}  // namespace lmtrain::cpu
