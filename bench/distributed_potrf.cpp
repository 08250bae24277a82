// pdpotrf (ScaLAPACK, A block-cyclic over the ranks) against LAPACKE dpotrf (one process) on the
// same SPD matrix A = JᵀJ + I, J random of (n + 64) × n.  Prints one JSON object per line.
//   mpirun -np R distributed_potrf --n 8000 [--nb 64] [--repeats 3]    the distributed factor
//   distributed_potrf --lapacke --n 8000 [--repeats 3]                 LAPACKE on one process
// Threads: OMP_NUM_THREADS (1 per rank for the MPI runs; 1 or 2 for LAPACKE on the same cores).
// Timed: the factorization alone (the copy of A into the factor's share included for both).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "lmtrain/dist/communicator.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/lmtrain.h"

namespace {

using lmtrain::DeviceBuffer;
using Seconds = std::chrono::duration<double>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Rows [first, last) of J: a fixed pseudo-random matrix, the same whatever the split.
void fill_rows(std::size_t first, std::size_t last, std::size_t n, double* j) {
  for (std::size_t r = first; r < last; ++r) {
    lmtrain::Rng rng(1000 + r);
    for (std::size_t c = 0; c < n; ++c) j[(r - first) * n + c] = rng.normal();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 8000, nb = 64;
  int repeats = 3;
  bool lapacke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--n" && i + 1 < argc)
      n = std::stoul(argv[++i]);
    else if (a == "--nb" && i + 1 < argc)
      nb = std::stoul(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::stoi(argv[++i]);
    else if (a == "--lapacke")
      lapacke = true;
    else {
      fmt::print(stderr, "usage: distributed_potrf [--lapacke] [--n N] [--nb NB] [--repeats K]\n");
      return 2;
    }
  }
  const std::size_t m = n + 64;
  auto backend = lmtrain::make_cpu_backend<double>();
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::vector<double> times;
  if (lapacke) {
    DeviceBuffer<double> j = backend->allocate(m * n), a = backend->allocate(n * n),
                         f = backend->allocate(n * n);
    fill_rows(0, m, n, j.data());
    backend->syrk_ata(n, m, 1.0, j.data(), n, 0.0, a.data());
    backend->add_diagonal(n, a.data(), 1.0, nullptr);
    for (int k = 0; k < repeats; ++k) {
      const auto start = std::chrono::steady_clock::now();
      backend->copy_upper(n, a.data(), f.data());
      if (backend->potrf(n, f.data()) != 0) return 1;
      times.push_back(Seconds(std::chrono::steady_clock::now() - start).count());
    }
    fmt::print(
        "{{\"what\": \"LAPACKE dpotrf\", \"n\": {}, \"ranks\": 1, \"threads\": \"{}\", "
        "\"median_s\": {:.3f}, \"gflops\": {:.1f}}}\n",
        n, threads ? threads : "default", median(times),
        std::pow(static_cast<double>(n), 3) / 3e9 / median(times));
    return 0;
  }
  auto comm = lmtrain::dist::make_mpi_communicator();
  const auto ranks = static_cast<std::size_t>(comm->size()),
             rank = static_cast<std::size_t>(comm->rank());
  auto a = lmtrain::dist::make_distributed_normal_matrix<double>(*comm, *backend, n, nb);
  const std::size_t first = m * rank / ranks, last = m * (rank + 1) / ranks;
  {
    DeviceBuffer<double> j = backend->allocate(std::max<std::size_t>(last - first, 1) * n);
    fill_rows(first, last, n, j.data());
    a->begin(1);
    const auto start = std::chrono::steady_clock::now();
    a->accumulate(j.data(), last - first, n);
    const double assemble = Seconds(std::chrono::steady_clock::now() - start).count();
    if (rank == 0)
      fmt::print(
          "{{\"what\": \"assembly (GEMM panels + reduce-scatter)\", \"n\": {}, \"ranks\": "
          "{}, \"seconds\": {:.3f}}}\n",
          n, ranks, assemble);
  }
  for (int k = 0; k < repeats; ++k) {
    comm->sum(0.0);  // start together
    const auto start = std::chrono::steady_clock::now();
    if (a->factor(1.0, nullptr, 0.0) != 0) return 1;
    times.push_back(comm->sum(Seconds(std::chrono::steady_clock::now() - start).count()) /
                    static_cast<double>(ranks));
  }
  if (rank == 0)
    fmt::print(
        "{{\"what\": \"{}\", \"n\": {}, \"ranks\": {}, \"threads per rank\": \"{}\", "
        "\"median_s\": {:.3f}, \"gflops\": {:.1f}}}\n",
        a->describe(), n, ranks, threads ? threads : "default", median(times),
        std::pow(static_cast<double>(n), 3) / 3e9 / median(times));
  return 0;
}
