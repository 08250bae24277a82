// Whole-file reading shared by every reader in io/.  Files that start with the gzip magic
// (1f 8b) are decompressed transparently, so "train.csv.gz", "train-images-idx3-ubyte.gz" and a
// Debian-compressed FANN file read like their plain versions.
#pragma once

#include <cstddef>
#include <limits>
#include <string>

namespace lmtrain::io::detail {

// The decompressed bytes of `path`, or its first `max_bytes` of them (fewer only at the end of
// the file): a reader that needs a header reads no more than that of a large or compressed file.
// Throws InvalidArgument naming the path and the system's reason (strerror text) when the file
// cannot be opened or read, and zlib's reason when a gzip stream is corrupt or truncated.
std::string read_file_contents(const std::string& path,
                               std::size_t max_bytes = std::numeric_limits<std::size_t>::max());

}  // namespace lmtrain::io::detail
