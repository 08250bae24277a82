// How a backend forms A = JᵀJ (SolverOptions::normal_matrix, TOML solver.normal_matrix):
//   auto     the backend's choice — on CUDA cuBLAS's SYRK or split-K, measured per shape on its
//            first call (syrk_choice.h); on the CPU OpenBLAS's SYRK;
//   syrk     the backend's SYRK always (on CUDA: no measurement, the same way on every run);
//   split_k  split-K (split_k_syrk.h) wherever J has rows enough to split, on the CPU too —
//            slower there, but the same algorithm a GPU runs, so CI trains with it.
// auto's measurement can choose differently on another GPU or run, which changes A's last bits;
// syrk or split_k fix the way.
#pragma once

#include <optional>
#include <string_view>

namespace lmtrain {

enum class NormalMatrixMethod { kAuto, kSyrk, kSplitK };

constexpr std::string_view to_string(NormalMatrixMethod m) {
  switch (m) {
    case NormalMatrixMethod::kSyrk:
      return "syrk";
    case NormalMatrixMethod::kSplitK:
      return "split_k";
    case NormalMatrixMethod::kAuto:
      break;
  }
  return "auto";
}

constexpr std::optional<NormalMatrixMethod> parse_normal_matrix_method(std::string_view s) {
  for (const NormalMatrixMethod m :
       {NormalMatrixMethod::kAuto, NormalMatrixMethod::kSyrk, NormalMatrixMethod::kSplitK})
    if (to_string(m) == s) return m;
  return std::nullopt;
}

}  // namespace lmtrain
