// The problem the memory-recovery tests train on a "device" of kLimit bytes — a CPU backend with
// a byte limit (tests/train/memory_recovery_test.cpp) or a limited CUDA backend
// (tests/cuda/memory_recovery_test.cpp) — so that both train exactly the same thing.
#pragma once

#include <cmath>

#include "support/reference.h"

namespace lmtrain::testing::memory_recovery {

inline constexpr std::size_t kLimit = std::size_t{16} << 20;  // the "device": 16 MiB
inline constexpr std::size_t kSamples = 600;

inline Dataset<double> data() {
  Dataset<double> d(kSamples, 4, 3);
  Rng rng(7);
  for (auto& v : d.x) v = rng.normal();
  for (std::size_t i = 0; i < kSamples; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      d.y[i * 3 + c] = std::sin(d.x[i * 4 + c] + 0.5 * d.x[i * 4 + 3]);
  return d;
}

// 795 parameters: A and its factor take 10.1 MB of the 16 MiB, a sample's Jacobian rows 19 KB.
inline ModelSpec spec() {
  return ModelSpec::mlp(4, {24, 24}, 3, Activation::kTanh);
}

struct Result {
  std::vector<double> params;
  Summary summary;
};

// Three epochs from the torch initialization of seed 3, on `backend`.
inline Result train(Backend<double>& backend, const SolverOptions& solver) {
  TrainerOptions options;
  options.max_epochs = 3;
  options.seed = 3;
  Trainer<double> trainer(spec(), LossOptions{}, solver, options, backend);
  Result r;
  r.params = Sequential<double>(spec(), backend).initial_parameters(Init::kTorch, 3);
  r.summary = trainer.fit(r.params, data());
  return r;
}

}  // namespace lmtrain::testing::memory_recovery
