// Device selection (lmtrain/backend/device.h): the parser and the rank → device rule, with made-up
// device counts and node-local ranks, so it runs on any machine; make_backend only on the CPU.
#include "lmtrain/backend/device.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

std::string message_of_bad_device(std::string_view text) {
  try {
    (void)parse_device(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse_device(\"" << text << "\") accepted it";
  return {};
}

TEST(ParseDevice, AcceptsTheFourForms) {
  EXPECT_EQ(parse_device("cpu").kind, DeviceRequest::Kind::kCpu);
  EXPECT_EQ(parse_device("auto").kind, DeviceRequest::Kind::kAuto);
  const DeviceRequest cuda = parse_device("cuda");
  EXPECT_EQ(cuda.kind, DeviceRequest::Kind::kCuda);
  EXPECT_FALSE(cuda.index.has_value());
  const DeviceRequest third = parse_device("cuda:3");
  EXPECT_EQ(third.kind, DeviceRequest::Kind::kCuda);
  ASSERT_TRUE(third.index.has_value());
  EXPECT_EQ(*third.index, 3);
  EXPECT_EQ(*parse_device("cuda:17").index, 17);
}

TEST(ParseDevice, RejectsEverythingElseNamingTheTextAndTheForms) {
  for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:-1", "cuda:+1", "cuda:x", "cuda:1x",
                          "cuda:99999999999", "cuda 0", "", "cpu:0"}) {
    SCOPED_TRACE(bad);
    const std::string message = message_of_bad_device(bad);
    EXPECT_NE(message.find(std::string("device = \"") + bad + "\""), std::string::npos) << message;
    EXPECT_NE(message.find("\"cuda:N\""), std::string::npos) << message;
    EXPECT_NE(message.find("\"auto\""), std::string::npos) << message;
  }
}

TEST(DeviceMapping, NodeLocalRankModuloVisibleDevices) {
  // 8 ranks of a node on 4 GPUs share them round-robin; on 1 GPU they all get device 0.
  std::vector<int> got;
  for (int rank = 0; rank < 8; ++rank) got.push_back(cuda_device_for_local_rank(rank, 4));
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  for (int rank = 0; rank < 5; ++rank) EXPECT_EQ(cuda_device_for_local_rank(rank, 1), 0);
  EXPECT_EQ(cuda_device_for_local_rank(2, 3), 2);
  EXPECT_EQ(cuda_device_for_local_rank(7, 3), 1);
  EXPECT_THROW((void)cuda_device_for_local_rank(-1, 2), InvalidArgument);
  EXPECT_THROW((void)cuda_device_for_local_rank(0, 0), InvalidArgument);
}

TEST(DeviceMapping, CudaFollowsTheLocalRankAndAnExplicitIndexWins) {
  const DeviceChoice second = choose_device(parse_device("cuda"), 5, 4, true);
  EXPECT_EQ(second.kind, DeviceKind::kCuda);
  EXPECT_EQ(second.index, 1);
  EXPECT_EQ(second.label(), "cuda:1");
  EXPECT_NE(second.reason.find("node-local rank 5 mod 4"), std::string::npos) << second.reason;

  // cuda:N is the same device for every rank.
  for (int rank = 0; rank < 6; ++rank) {
    const DeviceChoice pinned = choose_device(parse_device("cuda:2"), rank, 4, true);
    EXPECT_EQ(pinned.index, 2);
    EXPECT_EQ(pinned.reason, "asked for cuda:2");
  }
}

TEST(DeviceMapping, AutoUsesCudaWhenVisibleElseTheCpu) {
  const DeviceChoice gpu = choose_device(parse_device("auto"), 3, 2, true);
  EXPECT_EQ(gpu.kind, DeviceKind::kCuda);
  EXPECT_EQ(gpu.index, 1);
  EXPECT_NE(gpu.reason.find("auto"), std::string::npos);

  const DeviceChoice none = choose_device(parse_device("auto"), 3, 0, true);
  EXPECT_EQ(none.kind, DeviceKind::kCpu);
  EXPECT_EQ(none.label(), "cpu");
  EXPECT_NE(none.reason.find("0 CUDA device(s) are visible"), std::string::npos) << none.reason;

  // A build without CUDA sees no device whatever the driver says.
  const DeviceChoice unbuilt = choose_device(parse_device("auto"), 0, 4, false);
  EXPECT_EQ(unbuilt.kind, DeviceKind::kCpu);
  EXPECT_NE(unbuilt.reason.find("built without CUDA"), std::string::npos) << unbuilt.reason;

  EXPECT_EQ(choose_device(parse_device("cpu"), 3, 8, true).kind, DeviceKind::kCpu);
}

TEST(DeviceMapping, UnsatisfiableCudaRequestsSayWhatIsVisible) {
  try {
    (void)choose_device(parse_device("cuda"), 0, 0, true);
    FAIL() << "cuda with no device visible";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("device = \"cuda\" but 0 CUDA device(s) are visible"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)choose_device(parse_device("cuda:2"), 0, 2, true);
    FAIL() << "cuda:2 with two devices";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:2"), std::string::npos) << what;
    EXPECT_NE(what.find("[0, 2)"), std::string::npos) << what;
  }
  try {
    (void)choose_device(parse_device("cuda:0"), 0, 4, false);
    FAIL() << "cuda:0 in a build without CUDA";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
  }
}

TEST(DeviceMapping, MakeBackendOfTheCpuChoice) {
  const DeviceChoice cpu = choose_device("cpu", 0);
  auto backend = make_backend<double>(cpu);
  EXPECT_EQ(backend->device_kind(), DeviceKind::kCpu);
  // With no GPU visible, "auto" is the CPU here too (the CUDA tests cover the other case).
  if (cuda_device_count() == 0) {
    EXPECT_EQ(make_backend<float>(choose_device("auto", 1))->device_kind(), DeviceKind::kCpu);
    EXPECT_THROW((void)choose_device("cuda", 0), InvalidArgument);
  }
}

}  // namespace
}  // namespace lmtrain
