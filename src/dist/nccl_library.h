// NCCL, loaded when the first NCCL communicator is made rather than when lmtrain starts.
//
// Why: libnccl.so.2 is 218 MB (all GPU architectures, already compressed inside), more than a
// whole bundle for a machine without NCCL can carry, and lmtrain uses it only for GPU ranks that
// sum device buffers.  Linked at load time, every CUDA build of the `lmtrain` binary failed to
// start on a machine without NCCL, even to train on one GPU or the CPU.  Loaded on use, those
// runs need no NCCL, and a GPU rank that does gets an error saying which library it looked for.
//
// Where it looks: $LMTRAIN_NCCL_LIBRARY when set (a path), else "libnccl.so.2" through the
// dynamic loader's search (LD_LIBRARY_PATH, the ld.so cache), else the libnccl.so.2 lmtrain was
// built against (its directory on the build machine).  The ABI of libnccl.so.2 is stable across
// 2.x releases; ncclConfig_t carries its own size and version, so an older 2.x library reads the
// fields it knows.  Only the functions below are used, each resolved with dlsym.
#pragma once

#include <nccl.h>

#include <string>

namespace lmtrain::dist {

struct NcclLibrary {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&::ncclCommFinalize) comm_finalize = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclGetLastError) get_last_error = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;

  std::string path;     // the file the dynamic loader opened
  std::string version;  // "2.28.9", from ncclGetVersion
};

// The loaded library (opened once per process, never closed: NCCL's threads outlive any one
// communicator).  Throws lmtrain::Error naming every place it looked and what the loader said,
// and how to point lmtrain at a libnccl.so.2 or train without NCCL.
const NcclLibrary& nccl_library();

}  // namespace lmtrain::dist
