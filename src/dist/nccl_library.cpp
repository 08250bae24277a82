#include "nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {
namespace {

// NCCL_VERSION(X, Y, Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
std::string version_text(int code) {
  return code < 10000 ? fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
                      : fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
}

template <typename F>
void resolve(void* handle, const char* symbol, F& function, std::string& missing) {
  function = reinterpret_cast<F>(dlsym(handle, symbol));
  if (function == nullptr) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", symbol);
}

NcclLibrary load() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("LMTRAIN_NCCL_LIBRARY"); path != nullptr && *path != '\0') {
    candidates.emplace_back(path);  // asked for: no other library is tried
  } else {
    candidates.emplace_back("libnccl.so.2");
#ifdef LMTRAIN_NCCL_BUILD_LIBRARY
    candidates.emplace_back(LMTRAIN_NCCL_BUILD_LIBRARY);
#endif
  }
  void* handle = nullptr;
  std::string tried;
  for (const std::string& candidate : candidates) {
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* why = dlerror();
    tried += fmt::format("\n  {}: {}", candidate, why != nullptr ? why : "not loadable");
  }
  if (handle == nullptr)
    throw Error(fmt::format(
        "NCCL is needed to sum device buffers across GPU ranks, but no libnccl.so.2 could be "
        "loaded:{}\nInstall NCCL (or the nvidia-nccl wheel), put its lib/ directory on "
        "LD_LIBRARY_PATH or set LMTRAIN_NCCL_LIBRARY to the file; or train with communicator = "
        "\"host\" (MPI through host memory), which needs no NCCL",
        tried));

  NcclLibrary lib;
  std::string missing;
  resolve(handle, "ncclGetVersion", lib.get_version, missing);
  resolve(handle, "ncclGetUniqueId", lib.get_unique_id, missing);
  resolve(handle, "ncclCommInitRankConfig", lib.comm_init_rank_config, missing);
  resolve(handle, "ncclCommFinalize", lib.comm_finalize, missing);
  resolve(handle, "ncclCommDestroy", lib.comm_destroy, missing);
  resolve(handle, "ncclCommAbort", lib.comm_abort, missing);
  resolve(handle, "ncclCommGetAsyncError", lib.comm_get_async_error, missing);
  resolve(handle, "ncclGetErrorString", lib.get_error_string, missing);
  resolve(handle, "ncclGetLastError", lib.get_last_error, missing);
  resolve(handle, "ncclAllReduce", lib.all_reduce, missing);
  resolve(handle, "ncclBroadcast", lib.broadcast, missing);
  Dl_info info{};
  lib.path = dladdr(reinterpret_cast<void*>(lib.get_version), &info) != 0 && info.dli_fname
                 ? info.dli_fname
                 : candidates.front();
  if (!missing.empty())
    throw Error(fmt::format(
        "{} lacks {}: lmtrain needs NCCL 2.14 or newer (non-blocking communicators, "
        "ncclCommFinalize, ncclGetLastError); point LMTRAIN_NCCL_LIBRARY at a newer libnccl.so.2",
        lib.path, missing));
  int code = 0;
  if (lib.get_version(&code) != ncclSuccess)
    throw Error(fmt::format("{}: ncclGetVersion failed", lib.path));
  lib.version = version_text(code);
  return lib;
}

}  // namespace

const NcclLibrary& nccl_library() {
  // Loaded once; a failure is not cached, so fixing the environment and retrying works.
  static std::mutex mutex;
  static std::optional<NcclLibrary> loaded;
  const std::lock_guard lock(mutex);
  if (!loaded) loaded = load();
  return *loaded;
}

std::string nccl_runtime_description() {
  try {
    const NcclLibrary& lib = nccl_library();
    return fmt::format("NCCL {} ({})", lib.version, lib.path);
  } catch (const Error& e) {
    return fmt::format("not loadable: {}", e.what());
  }
}

}  // namespace lmtrain::dist
