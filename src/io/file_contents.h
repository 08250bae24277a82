// Whole-file reading shared by every reader in io/.  Files that start with the gzip magic
// (1f 8b) are decompressed transparently, so "train.csv.gz", "train-images-idx3-ubyte.gz" and a
// Debian-compressed FANN file read like their plain versions.
#pragma once

#include <string>

namespace lmtrain::io::detail {

// The decompressed bytes of `path`.  Throws InvalidArgument naming the path and the system's
// reason (strerror text) when the file cannot be opened or read, and zlib's reason when a gzip
// stream is corrupt or truncated.
std::string read_file_contents(const std::string& path);

}  // namespace lmtrain::io::detail
