// Loading and storing fixed-size values in a given byte order, independent of the host's.
// Binary formats fix their byte order: NPY (as lmtrain reads and writes it) little-endian, IDX
// big-endian.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace lmtrain::io::detail {

template <std::size_t N>
using UintOfSize = std::conditional_t<
    N == 1, std::uint8_t,
    std::conditional_t<N == 2, std::uint16_t,
                       std::conditional_t<N == 4, std::uint32_t, std::uint64_t>>>;

// The value of type T stored at p with the most significant byte last (little) or first (big).
template <typename T>
T load_little_endian(const unsigned char* p) {
  using U = UintOfSize<sizeof(T)>;
  U bits = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    bits |= static_cast<U>(static_cast<U>(p[i]) << (8 * i));
  return std::bit_cast<T>(bits);
}

template <typename T>
T load_big_endian(const unsigned char* p) {
  using U = UintOfSize<sizeof(T)>;
  U bits = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    bits = static_cast<U>(static_cast<U>(bits << 8) | static_cast<U>(p[i]));
  return std::bit_cast<T>(bits);
}

template <typename T>
void store_little_endian(T value, unsigned char* p) {
  using U = UintOfSize<sizeof(T)>;
  const U bits = std::bit_cast<U>(value);
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<unsigned char>(bits >> (8 * i));
}

}  // namespace lmtrain::io::detail
