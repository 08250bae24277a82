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
// small arguments do not cancel.  tanh: float a·P(a²)/Q(a²), a = |x| ≤ 9, the minimax
// rational of degrees 13/6 (relative error 7.5e-9 before rounding; 2.5× faster than a tanh built
// from exp, which must also carry a series where its quotient cancels); double −e / (2 + e) with
// e = expm1(−2|x|), which cancels nowhere.  Clamps are written so that a NaN argument stays NaN.
//
// Accuracy against a higher-precision reference is asserted in tests/backend/fast_math_test.cpp:
// ≤ 3 float ulps (tanh: ≤ 7, and |tanh| ≤ 1; over every float, 5.53 with FMA, 6.93 without,
// largest near saturation, where a float ulp below 1 is 6e-8), ≤ 4 double ulps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace lmtrain::cpu {

namespace detail {
// The constants of the range reduction, and the degree of expm1's polynomial, per precision.
template <typename T>
struct ExpTraits;
template <>
struct ExpTraits<float> {
  using Bits = std::int32_t;
  using UnsignedBits = std::uint32_t;
  static constexpr float kRound = 12582912.0f;  // 1.5·2²³: adding it rounds to an integer
  static constexpr float kLog2e = 1.44269504088896341f;
  static constexpr float kLn2Hi = 0.693359375f;  // ln2 = hi + lo, k·hi exact
  static constexpr float kLn2Lo = -2.12194440e-4f;
  static constexpr int kBias = 127, kMantissa = 23;
  static constexpr float kMin = -87.0f, kMax = 88.0f;  // eˣ and 2ᵏ stay normal
  static constexpr int kExpm1Degree = 8;               // truncation < 2e-8 relative
};
template <>
struct ExpTraits<double> {
  using Bits = std::int64_t;
  using UnsignedBits = std::uint64_t;
  static constexpr double kRound = 6755399441055744.0;  // 1.5·2⁵²
  static constexpr double kLog2e = 1.4426950408889634;
  static constexpr double kLn2Hi = 6.93147180369123816490e-01;  // fdlibm's split
  static constexpr double kLn2Lo = 1.90821492927058770002e-10;
  static constexpr int kBias = 1023, kMantissa = 52;
  static constexpr double kMin = -708.0, kMax = 709.0;
  static constexpr int kExpm1Degree = 13;  // truncation < 1e-17 relative
};

template <typename T>
inline T clamp_exponent(T x) {  // written so that a NaN x stays NaN
  return x < ExpTraits<T>::kMin ? ExpTraits<T>::kMin
                                : (x > ExpTraits<T>::kMax ? ExpTraits<T>::kMax : x);
}

// x = k·ln2 + r with k = round(x·log2 e), |r| ≤ ln2/2 (slightly more from rounding), for x
// within the clamp; returns r and stores 2ᵏ in *scale.  Rounds by adding and removing 1.5·2^p
// (no libm call, vectorizes), and takes k from the low bits of the rounded sum: AVX2 has no
// packed double → int64 conversion, and a NaN x stays NaN without meeting a float → int
// conversion, which would be undefined.
template <typename T>
inline T reduce(T x, T* scale) {
  using Traits = ExpTraits<T>;
  const T shifted = x * Traits::kLog2e + Traits::kRound;
  const T k = shifted - Traits::kRound;
  typename Traits::Bits k_bits, round_bits;
  std::memcpy(&k_bits, &shifted, sizeof k_bits);
  std::memcpy(&round_bits, &Traits::kRound, sizeof round_bits);
  const auto bits = static_cast<typename Traits::UnsignedBits>(k_bits - round_bits + Traits::kBias)
                    << Traits::kMantissa;
  std::memcpy(scale, &bits, sizeof bits);
  return (x - k * Traits::kLn2Hi) - k * Traits::kLn2Lo;
}

constexpr std::uint64_t factorial(int n) {
  return n <= 1 ? 1 : static_cast<std::uint64_t>(n) * factorial(n - 1);
}
// 1/n!, one rounding from the exact n! (n ≤ 13 in double, ≤ 8 in float, are exact).
template <typename T, int n>
constexpr T kInverseFactorial = T(1) / static_cast<T>(factorial(n));

// Σ_{n=bottom}^{top} r^{n−bottom}/n! by Horner's rule, unrolled at compile time.
template <typename T, int top, int bottom, std::size_t... i>
inline T horner(T r, std::index_sequence<i...>) {
  T p = kInverseFactorial<T, top>;
  ((p = p * r + kInverseFactorial<T, top - 1 - static_cast<int>(i)>), ...);
  return p;
}
template <typename T, int top, int bottom>
inline T horner(T r) {
  return horner<T, top, bottom>(r, std::make_index_sequence<top - bottom>());
}

// expm1(r) = r + r²·Σ rⁿ/(n+2)! for the reduced r, to the precision's degree.
template <typename T>
inline T expm1_reduced(T r) {
  return r + r * r * horner<T, ExpTraits<T>::kExpm1Degree, 2>(r);
}
}  // namespace detail

inline float fast_exp(float x) {
  float scale;
  const float r = detail::reduce(detail::clamp_exponent(x), &scale);
  return detail::horner<float, 7, 0>(r) * scale;  // the degree-7 Taylor polynomial of eʳ
}

inline float fast_tanh(float x) {
  // tanh|x| ≈ a·P(a²)/Q(a²) for a = |x| ≤ 9 (coefficients: scripts/fit_tanh.py, fitted on
  // [0, 9.1]); 1 beyond, where tanh rounds to 1 within 0.51 ulps, and wherever the rounded
  // quotient would pass 1.  The sign bit is put back last.  Beyond 9 the quotient may be inf or NaN
  // and is discarded; a NaN x stays NaN, as both comparisons are false for it.
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  float a;
  std::memcpy(&a, &bits, sizeof a);
  const float t = a * a;
  float p = -8.228178338329228e-14f;
  p = p * t + 5.177577117043697e-11f;
  p = p * t - 2.0018914526076514e-08f;
  p = p * t + 1.1103872566309292e-05f;
  p = p * t + 0.0030991570092737675f;
  p = p * t + 0.13079719245433807f;
  p = p * t + 1.0f;
  float q = 0.0002539143606554717f;
  q = q * t + 0.02447608672082424f;
  q = q * t + 0.4641304612159729f;
  q = q * t + 1.0f;
  const float quotient = a * p / q;
  const float magnitude = (a > 9.0f || quotient > 1.0f) ? 1.0f : quotient;
  std::memcpy(&bits, &magnitude, sizeof bits);
  bits |= sign;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

// eˣ − 1 = 2ᵏ·expm1(r) + (2ᵏ − 1): for |x| < ln2/2, k = 0 and r = x, so small arguments do
// not cancel.  ELU's e^z − 1 for z ≤ 0.  (In float one polynomial is 1.6× faster than a series
// for |x| < 1 beside eˣ − 1, both evaluated in a vectorized loop, and ≤ 1.3 ulps against 1.6.)
template <typename T>
inline T fast_expm1(T x) {
  T scale;
  const T em = detail::expm1_reduced(detail::reduce(detail::clamp_exponent(x), &scale));
  return scale * em + (scale - T(1));
}

inline double fast_exp(double x) {
  double scale;
  const double r = detail::reduce(detail::clamp_exponent(x), &scale);
  return (1.0 + detail::expm1_reduced(r)) * scale;
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
