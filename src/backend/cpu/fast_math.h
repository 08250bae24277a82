// Vectorizable float32 exp, expm1, tanh, sigmoid and ELU for the CPU backend's activation loops.
// The libm versions are scalar calls (~10 ns each) and dominate a small network's forward pass;
// these are branch-free so the compiler vectorizes the loops that call them.
//
// exp: Cody–Waite range reduction x = k·ln2 + r, |r| ≤ ln2/2, with ln2 split in two so k·ln2 is
// exact, then the degree-7 Taylor polynomial of eʳ (truncation error r⁸/8! < 2e-9 relative) and
// 2ᵏ assembled in the exponent bits.  tanh: (1 − e^{−2|x|}) / (1 + e^{−2|x|}) with the sign put
// back, and for |x| < 0.25 — where that quotient cancels — the odd Taylor series to x¹¹
// (truncation < 3e-9 relative).  Accuracy against double precision is asserted in
// tests/backend/fast_math_test.cpp (≤ 3 float ulps).
#pragma once

#include <cstdint>
#include <cstring>

namespace lmtrain::cpu {

inline float fast_exp(float x) {
  // Clamp to the range where eˣ is a normal float; exp(−87.3) ≈ 1.2e-38.
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round to nearest by adding and removing 1.5·2²³ (no libm call, vectorizes).
  constexpr float kRound = 12582912.0f;
  const float k = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline float fast_tanh(float x) {
  const float ax = x < 0 ? -x : x;
  // Large branch: tanh|x| = (1 − t)/(1 + t), t = e^{−2|x|}; |x| ≥ 9 gives 1 to float precision.
  const float t = fast_exp(-2.0f * (ax < 9.0f ? ax : 9.0f));
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

// eˣ − 1: for |x| < 1 the Taylor series to x¹² (truncation 1/13! < 2e-10, relative to |eˣ − 1|
// ≥ 0.37|x| there), where eˣ − 1 would cancel; beyond, fast_exp(x) − 1 (|eˣ − 1| ≥ 0.63, so the
// subtraction costs under one ulp).  ELU's e^z − 1 for z ≤ 0.
inline float fast_expm1(float x) {
  const float ax = x < 0 ? -x : x;
  const float large = fast_exp(x) - 1.0f;
  float p = 1.0f / 479001600.0f;  // 1/12!
  p = p * x + 1.0f / 39916800.0f;
  p = p * x + 1.0f / 3628800.0f;
  p = p * x + 1.0f / 362880.0f;
  p = p * x + 1.0f / 40320.0f;
  p = p * x + 1.0f / 5040.0f;
  p = p * x + 1.0f / 720.0f;
  p = p * x + 1.0f / 120.0f;
  p = p * x + 1.0f / 24.0f;
  p = p * x + 1.0f / 6.0f;
  p = p * x + 0.5f;
  const float small = x + x * x * p;
  return ax < 1.0f ? small : large;
}

inline float fast_elu(float x) {
  return x > 0 ? x : fast_expm1(x);
}

inline float fast_sigmoid(float x) {
  // e^{−|x|} never overflows; σ(x) = 1/(1 + e^{−x}) for x ≥ 0, e^{x}/(1 + e^{x}) otherwise.
  const float e = fast_exp(x < 0 ? x : -x);
  const float inverse = 1.0f / (1.0f + e);
  return x < 0 ? e * inverse : inverse;
}

}  // namespace lmtrain::cpu
