#include "lmtrain/backend/device.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

[[noreturn]] void throw_bad_device(std::string_view text, std::string_view why) {
  throw InvalidArgument(fmt::format(
      "device = \"{}\": {}; expected \"cpu\", \"cuda\" (the GPU of this rank: node-local rank "
      "mod visible devices), \"cuda:N\" (device N of the visible ones) or \"auto\" (\"cuda\" when "
      "a CUDA device is visible, else \"cpu\")",
      text, why));
}

std::string visible_devices_text(int visible, bool cuda_built) {
  if (!cuda_built) return "lmtrain was built without CUDA";
  const char* mask = std::getenv("CUDA_VISIBLE_DEVICES");
  return fmt::format("{} CUDA device(s) are visible (CUDA_VISIBLE_DEVICES={})", visible,
                     mask != nullptr ? mask : "<unset>");
}

}  // namespace

DeviceRequest parse_device(std::string_view text) {
  DeviceRequest r;
  if (text == "cpu") return r;
  if (text == "auto") {
    r.kind = DeviceRequest::Kind::kAuto;
    return r;
  }
  if (text == "cuda") {
    r.kind = DeviceRequest::Kind::kCuda;
    return r;
  }
  if (!text.starts_with("cuda:")) throw_bad_device(text, "unknown device");
  const std::string_view digits = text.substr(5);
  if (digits.empty()) throw_bad_device(text, "no device index after \"cuda:\"");
  int index = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (error != std::errc() || end != digits.data() + digits.size() || digits.front() == '-' ||
      digits.front() == '+')
    throw_bad_device(text, fmt::format("\"{}\" is not a device index (0, 1, 2, …)", digits));
  r.kind = DeviceRequest::Kind::kCuda;
  r.index = index;
  return r;
}

std::string DeviceChoice::label() const {
  return kind == DeviceKind::kCpu ? std::string("cpu") : fmt::format("cuda:{}", index);
}

int cuda_device_for_local_rank(int local_rank, int visible_devices) {
  if (local_rank < 0)
    throw InvalidArgument(fmt::format("node-local rank {} is negative", local_rank));
  if (visible_devices <= 0)
    throw InvalidArgument(fmt::format("no CUDA device to map node-local rank {} to ({} visible)",
                                      local_rank, visible_devices));
  return local_rank % visible_devices;
}

DeviceChoice choose_device(const DeviceRequest& request, int local_rank, int visible_cuda_devices,
                           bool cuda_built) {
  const int visible = cuda_built ? visible_cuda_devices : 0;
  DeviceChoice c;
  switch (request.kind) {
    case DeviceRequest::Kind::kCpu:
      c.reason = "asked for cpu";
      return c;
    case DeviceRequest::Kind::kAuto:
      if (visible == 0) {
        c.reason = fmt::format("auto: {}", visible_devices_text(visible, cuda_built));
        return c;
      }
      break;
    case DeviceRequest::Kind::kCuda:
      if (visible == 0)
        throw InvalidArgument(fmt::format(
            "device = \"cuda{}\" but {}; `lmtrain info --devices` lists what this process sees, "
            "or use device = \"cpu\" (or \"auto\")",
            request.index ? fmt::format(":{}", *request.index) : "",
            visible_devices_text(visible, cuda_built)));
      break;
  }
  c.kind = DeviceKind::kCuda;
  if (request.index) {
    if (*request.index >= visible)
      throw InvalidArgument(fmt::format(
          "device = \"cuda:{}\" but {}; pick an index in [0, {}), or device = \"cuda\" to map "
          "ranks to devices by node-local rank",
          *request.index, visible_devices_text(visible, cuda_built), visible));
    c.index = *request.index;
    c.reason = fmt::format("asked for cuda:{}", c.index);
    return c;
  }
  c.index = cuda_device_for_local_rank(local_rank, visible);
  c.reason = fmt::format("{}node-local rank {} mod {} visible CUDA device{}",
                         request.kind == DeviceRequest::Kind::kAuto ? "auto: " : "", local_rank,
                         visible, visible == 1 ? "" : "s");
  return c;
}

DeviceChoice choose_device(std::string_view device, int local_rank) {
  return choose_device(parse_device(device), local_rank, cuda_device_count(), cuda_backend_built());
}

double float64_rate(DeviceKind kind, int index) {
  return kind == DeviceKind::kCuda ? cuda_float64_rate(index) : 0.5;
}

template <typename T>
std::unique_ptr<Backend<T>> make_backend(const DeviceChoice& choice) {
  if (choice.kind == DeviceKind::kCpu) return make_cpu_backend<T>();
  return make_cuda_backend<T>(choice.index);
}

template std::unique_ptr<Backend<float>> make_backend<float>(const DeviceChoice&);
template std::unique_ptr<Backend<double>> make_backend<double>(const DeviceChoice&);

}  // namespace lmtrain
