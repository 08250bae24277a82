// Loads the cuSOLVERMp module (liblmtrain_cusolvermp.so, src/dist/cusolvermp/) when a GPU rank
// first asks for a distributed normal matrix.  Why a module and not a link: cuSOLVERMp and
// cuBLASMp come as PyPI wheels (nvidia-cusolvermp-cu13, nvidia-cublasmp-cu13) outside the loader's
// path, and both need libnccl.so.2 ≥ 2.29 (they call ncclCommQueryProperties, ncclPutSignal, …);
// linking them would make every CUDA binary fail to start where they are absent, as linking NCCL
// did (dist/nccl_library.h).  Looked for at $LMTRAIN_CUSOLVERMP_MODULE, then the module this
// build made, then the loader's path.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/distributed_normal_matrix.h"

namespace lmtrain::dist {
namespace {

struct Module {
  void* handle = nullptr;
  std::string error;
};

const Module& module() {
  static Module m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("LMTRAIN_CUSOLVERMP_MODULE"); env != nullptr && *env != '\0')
      candidates.emplace_back(env);
#ifdef LMTRAIN_CUSOLVERMP_BUILD_MODULE
    candidates.emplace_back(LMTRAIN_CUSOLVERMP_BUILD_MODULE);
#endif
    candidates.emplace_back("liblmtrain_cusolvermp.so");
    for (const std::string& path : candidates) {
      m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (m.handle != nullptr) return;
      const char* why = dlerror();
      tried += fmt::format("\n  {}: {}", path, why != nullptr ? why : "not loadable");
    }
    m.error = fmt::format(
        "the cuSOLVERMp module could not be loaded (it needs the nvidia-cusolvermp-cu13 and "
        "nvidia-cublasmp-cu13 wheels' libraries and libnccl.so.2 ≥ 2.29, e.g. the "
        "nvidia-nccl-cu13 wheel, on the loader's path; set LMTRAIN_CUSOLVERMP_MODULE to the "
        "module's path):{}",
        tried);
  });
  return m;
}

template <typename T>
using Factory = DistributedNormalMatrix<T>* (*)(Communicator*, LinearAlgebra<T>*, std::size_t,
                                                std::size_t, char*, std::size_t);

}  // namespace

std::optional<std::string> cusolvermp_unavailable() {
  const Module& m = module();
  if (m.handle == nullptr) return m.error;
  return std::nullopt;
}

template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_cusolvermp_normal_matrix(Communicator& comm,
                                                                          LinearAlgebra<T>& backend,
                                                                          std::size_t n,
                                                                          std::size_t nb) {
  const Module& m = module();
  if (m.handle == nullptr) throw Error(m.error);
  const char* symbol = sizeof(T) == 8 ? "lmtrain_cusolvermp_normal_matrix_f64"
                                      : "lmtrain_cusolvermp_normal_matrix_f32";
  auto factory = reinterpret_cast<Factory<T>>(dlsym(m.handle, symbol));
  if (factory == nullptr)
    throw Error(fmt::format("the cuSOLVERMp module has no {}: rebuild lmtrain", symbol));
  char error[1024] = {};
  DistributedNormalMatrix<T>* matrix = factory(&comm, &backend, n, nb, error, sizeof error);
  if (matrix == nullptr) throw Error(fmt::format("cuSOLVERMp: {}", error));
  return std::unique_ptr<DistributedNormalMatrix<T>>(matrix);
}

template std::unique_ptr<DistributedNormalMatrix<float>> make_cusolvermp_normal_matrix(
    Communicator&, LinearAlgebra<float>&, std::size_t, std::size_t);
template std::unique_ptr<DistributedNormalMatrix<double>> make_cusolvermp_normal_matrix(
    Communicator&, LinearAlgebra<double>&, std::size_t, std::size_t);

}  // namespace lmtrain::dist
