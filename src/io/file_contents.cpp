#include "file_contents.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "lmtrain/core/error.h"

namespace lmtrain::io::detail {
namespace {

std::string errno_text(int err) {
  return fmt::format("{} (errno {})", std::strerror(err), err);
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose_r(f); }
};

}  // namespace

std::string read_file_contents(const std::string& path, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw InvalidArgument(fmt::format("cannot open \"{}\": {}; check the path and its permissions",
                                      path, errno_text(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    throw InvalidArgument(
        fmt::format("cannot read \"{}\": {}; give the path of a data file", path, errno_text(err)));
  }
  // gzdopen reads plain files transparently (no gzip magic: bytes are copied as they are).
  std::unique_ptr<gzFile_s, GzCloser> gz(gzdopen(fd, "rb"));
  if (!gz) {
    ::close(fd);
    throw InvalidArgument(
        fmt::format("cannot read \"{}\": zlib could not allocate its state", path));
  }
  gzbuffer(gz.get(), 1u << 17);

  std::string bytes;
  if (S_ISREG(st.st_mode) && st.st_size > 0)
    bytes.reserve(std::min(static_cast<std::size_t>(st.st_size), max_bytes));
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  while (bytes.size() < max_bytes) {
    const std::size_t old = bytes.size();
    const auto want = static_cast<unsigned>(std::min(kChunk, max_bytes - old));
    bytes.resize(old + want);
    errno = 0;
    const int got = gzread(gz.get(), bytes.data() + old, want);
    if (got < 0) {
      const int err = errno;
      int zerr = Z_OK;
      const char* zmsg = gzerror(gz.get(), &zerr);
      const std::string reason = zerr == Z_ERRNO ? errno_text(err) : std::string(zmsg);
      throw InvalidArgument(fmt::format(
          "cannot read \"{}\" after {} bytes: {}; the file is unreadable or a corrupt gzip stream",
          path, old, reason));
    }
    bytes.resize(old + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  int zerr = Z_OK;
  const char* zmsg = gzerror(gz.get(), &zerr);
  if (zerr != Z_OK && zerr != Z_STREAM_END) {
    throw InvalidArgument(fmt::format(
        "cannot read \"{}\": gzip stream ended early or is corrupt after {} decompressed bytes "
        "({}); the download or copy is probably incomplete: fetch the file again",
        path, bytes.size(), zmsg));
  }
  return bytes;
}

}  // namespace lmtrain::io::detail
