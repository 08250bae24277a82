// Replacing a file so that a crash or a full disk never leaves a half-written one behind
// (predictions, checkpoints, reports).
#pragma once

#include <string>
#include <string_view>

namespace lmtrain::io {

// Writes `bytes` to a temporary file in the directory of `path`, fsyncs it, renames it over
// `path` (atomic on POSIX file systems) and fsyncs the directory so the rename itself is
// durable.  On any failure the temporary file is removed, `path` is left as it was, and
// lmtrain::Error is thrown with the path, the failing step (open, write, fsync, rename) and the
// system's reason (ENOENT for a missing directory, ENOSPC for a full disk, …).  The new
// file gets mode 0666 minus the umask, like a file created with fopen.
void write_file_atomically(const std::string& path, std::string_view bytes);

}  // namespace lmtrain::io
