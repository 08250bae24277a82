// Device-buffer collectives (DESIGN.md §6).  On one rank over the local communicator, NCCL's sum
// and broadcast are the identity, which is checked bit for bit on random buffers.  Host-only
// communicators and a build without NCCL refuse with a message saying why.  Tests that need a
// GPU skip with "no CUDA device visible"; several ranks need several GPUs (NCCL allows one rank
// per device) and are not covered here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {
namespace {

// Runs `f`, which must throw E, and returns the message.
template <typename E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

// Values of both signs spread over 2^-20 … 2^20, never zero: a sum that drops or doubles any
// bit shows up.
template <typename T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mantissa(0.5, 1.0);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>((rng() % 2 ? 1.0 : -1.0) * std::ldexp(mantissa(rng), exponent(rng)));
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// First in this file: NCCL is loaded once per process, and this must see the load fail.
TEST(NcclLibrary, AMissingLibraryIsNamedWithTheWayOut) {
  if (!nccl_built()) GTEST_SKIP() << "lmtrain was built without NCCL";
  ::setenv("LMTRAIN_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  const std::string description = nccl_runtime_description();
  ::unsetenv("LMTRAIN_NCCL_LIBRARY");
  EXPECT_NE(description.find("not loadable"), std::string::npos) << description;
  EXPECT_NE(description.find("/nonexistent/libnccl.so.2"), std::string::npos) << description;
  EXPECT_NE(description.find("communicator = \"host\""), std::string::npos) << description;
}

TEST(HostCommunicator, RefusesDeviceBuffers) {
  auto local = make_local_communicator();
  EXPECT_FALSE(local->supports_device_buffers());
  float f = 1.5f;
  double d = 2.5;
  for (const std::string& message :
       {message_of<Error>([&] { local->allreduce_sum_device(&f, 1, nullptr); }),
        message_of<Error>([&] { local->allreduce_sum_device(&d, 1, nullptr); }),
        message_of<Error>([&] { local->broadcast_device(&d, sizeof d, 0, nullptr); })}) {
    EXPECT_NE(message.find("only sums host buffers"), std::string::npos) << message;
    EXPECT_NE(message.find("local"), std::string::npos) << message;
  }
}

TEST(NcclCommunicator, BuildWithoutNcclSaysSo) {
  if (nccl_built()) GTEST_SKIP() << "lmtrain was built with NCCL; this checks a build without it";
  const std::string message =
      message_of<Error>([] { make_nccl_communicator(make_local_communicator(), 0); });
  EXPECT_NE(message.find("built without NCCL"), std::string::npos) << message;
}

TEST(NcclCommunicator, MissingDeviceThrowsOnOneRank) {
  if (!nccl_built()) GTEST_SKIP() << "lmtrain was built without NCCL";
  // One past the last visible device (device 0 when none is visible).
  const std::string message = message_of<BackendError>(
      [] { make_nccl_communicator(make_local_communicator(), cuda_device_count()); });
  EXPECT_NE(message.find("rank 0 of 1"), std::string::npos) << message;
}

TEST(NcclCommunicator, BadTimeoutIsRejected) {
  if (!nccl_built()) GTEST_SKIP() << "lmtrain was built without NCCL";
  ::setenv("LMTRAIN_NCCL_TIMEOUT_S", "soon", 1);
  const std::string message =
      message_of<InvalidArgument>([] { make_nccl_communicator(make_local_communicator(), 0); });
  ::unsetenv("LMTRAIN_NCCL_TIMEOUT_S");
  EXPECT_NE(message.find("LMTRAIN_NCCL_TIMEOUT_S"), std::string::npos) << message;
}

template <typename T>
class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    if (!nccl_built()) GTEST_SKIP() << "lmtrain was built without NCCL";
    backend_ = make_cuda_backend<T>(0);
    comm_ = make_nccl_communicator(make_local_communicator(), backend_->device_index());
  }

  // Uploads `host`, applies `collective` to the device copy and returns what comes back.
  std::vector<T> round_trip(const std::vector<T>& host,
                            const std::function<void(T*, void*)>& collective) {
    auto buffer = backend_->allocate(host.size());
    backend_->copy_from_host(host.data(), buffer.data(), host.size());
    collective(buffer.data(), backend_->native_stream());
    backend_->synchronize();
    // A kernel launched after the collective must not inherit an error the wait left behind
    // (cudaStreamQuery's "not ready" is recorded as the thread's last error).
    EXPECT_TRUE(backend_->all_finite(host.size(), buffer.data()));
    std::vector<T> back(host.size());
    backend_->copy_to_host(buffer.data(), back.data(), back.size());
    return back;
  }

  std::unique_ptr<Backend<T>> backend_;
  std::unique_ptr<Communicator> comm_;
};

using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NcclOneRank, Precisions);

TYPED_TEST(NcclOneRank, DescribesItself) {
  EXPECT_TRUE(this->comm_->supports_device_buffers());
  EXPECT_EQ(this->comm_->rank(), 0);
  EXPECT_EQ(this->comm_->size(), 1);
  const std::string name = this->comm_->name();
  EXPECT_EQ(name.rfind("nccl ", 0), 0u) << name;
  EXPECT_NE(name.find("(1 rank)"), std::string::npos) << name;
}

TYPED_TEST(NcclOneRank, AllreduceSumOfOneRankIsIdentity) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{4099}, std::size_t{1} << 20}) {
    const auto host = random_values<TypeParam>(n, 17 + n);
    const auto back = this->round_trip(host, [&](TypeParam* data, void* stream) {
      this->comm_->allreduce_sum_device(data, n, stream);
    });
    EXPECT_TRUE(same_bits(back, host)) << n << " values";
  }
}

TYPED_TEST(NcclOneRank, BroadcastFromRootIsIdentity) {
  const auto host = random_values<TypeParam>(3001, 5);
  const auto back = this->round_trip(host, [&](TypeParam* data, void* stream) {
    this->comm_->broadcast_device(data, host.size() * sizeof(TypeParam), 0, stream);
  });
  EXPECT_TRUE(same_bits(back, host));
}

TYPED_TEST(NcclOneRank, HostCollectivesStillWork) {
  EXPECT_EQ(this->comm_->sum(2.5), 2.5);
  std::vector<TypeParam> v = random_values<TypeParam>(7, 3), copy = v;
  this->comm_->allreduce_sum(v.data(), v.size());
  EXPECT_TRUE(same_bits(v, copy));
}

TYPED_TEST(NcclOneRank, BroadcastFromAMissingRootIsRejected) {
  TypeParam x{};
  const std::string message = message_of<InvalidArgument>(
      [&] { this->comm_->broadcast_device(&x, sizeof x, 1, this->backend_->native_stream()); });
  EXPECT_NE(message.find("root 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace lmtrain::dist
