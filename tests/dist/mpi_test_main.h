// The main() of the MPI test binaries (mpi_test.cpp, distributed_cholesky_test.cpp): checks the
// launch's rank count, lets only rank 0 print, and fails the job when any rank failed.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "lmtrain/dist/communicator.h"

namespace lmtrain::testing {

// Runs every test on `world` (kept alive until they end).  tests/dist/CMakeLists.txt passes
// --expected-ranks=N with mpirun -np N: a launcher that started N separate one-rank jobs would
// otherwise pass every comparison.
inline int run_tests_on_ranks(int argc, char** argv, dist::Communicator& world) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with("--expected-ranks=") && std::stoi(arg.substr(17)) != world.size()) {
      std::fprintf(stderr, "rank %d: the world has %d ranks, but the test was launched with %s\n",
                   world.rank(), world.size(), arg.c_str());
      return 1;
    }
  }
  // Only rank 0 prints; every rank asserts (a failure anywhere fails the job).
  if (!world.is_root()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int result = RUN_ALL_TESTS();
  const double failed = world.sum(result != 0 ? 1.0 : 0.0);
  return failed > 0 ? 1 : 0;
}

}  // namespace lmtrain::testing
