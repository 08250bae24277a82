#include "lmtrain/io/atomic_write.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

std::string errno_text(int err) {
  return fmt::format("{} (errno {})", std::strerror(err), err);
}

[[noreturn]] void fail(const std::string& path, std::string_view step, int err) {
  throw Error(
      fmt::format("cannot write \"{}\": {} failed: {}; check that the directory exists, "
                  "is writable and has free space",
                  path, step, errno_text(err)));
}

// Closes a descriptor and removes the temporary file unless release()d after the rename.
class TemporaryFile {
 public:
  TemporaryFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor, reporting close's errno (0 on success): NFS reports write errors here.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
  int fd_;
};

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::filesystem::path target(path);
  if (!target.has_filename())
    throw Error(fmt::format("cannot write \"{}\": the path names a directory, not a file", path));
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");

  // A name no other writer uses: the target's name, this process and a per-process counter.
  static std::atomic<unsigned> counter{0};
  int fd = -1;
  std::string temp_path;
  for (int attempt = 0; fd < 0; ++attempt) {
    temp_path = (dir / fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(),
                                   counter.fetch_add(1)))
                    .string();
    fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100))
      fail(path, "creating a temporary file", errno);
  }
  TemporaryFile temp(temp_path, fd);

  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(temp.fd(), bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, fmt::format("write (after {} of {} bytes)", written, bytes.size()), errno);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(temp.fd()) != 0) fail(path, "fsync", errno);
  if (const int err = temp.close(); err != 0) fail(path, "close", err);
  if (::rename(temp.path().c_str(), path.c_str()) != 0)
    fail(path, fmt::format("rename from \"{}\"", temp.path()), errno);
  temp.release();

  // Persist the directory entry.  Some file systems refuse fsync on a directory (EINVAL); the
  // data itself is already durable then, so that is not an error.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    const int rc = ::fsync(dir_fd);
    const int err = errno;
    ::close(dir_fd);
    if (rc != 0 && err != EINVAL && err != EROFS) fail(path, "fsync of the directory", err);
  }
}

}  // namespace lmtrain::io
