// The one-rank (local) communicator's node-local rank and all-gather, and the launcher
// environment's node-local rank.  The MPI implementations run under mpirun in mpi_test.cpp.
#include "lmtrain/dist/communicator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace lmtrain::dist {
namespace {

// Sets the launcher variables for one test and restores what was there.
class LauncherEnvironment {
 public:
  LauncherEnvironment() {
    for (const char* var : kVariables) {
      const char* v = std::getenv(var);
      saved_.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(var);
    }
  }
  ~LauncherEnvironment() {
    for (std::size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i])
        setenv(kVariables[i], saved_[i]->c_str(), 1);
      else
        unsetenv(kVariables[i]);
    }
  }
  LauncherEnvironment(const LauncherEnvironment&) = delete;
  LauncherEnvironment& operator=(const LauncherEnvironment&) = delete;

  static constexpr const char* kVariables[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                               "MPI_LOCALRANKID"};

 private:
  std::vector<std::optional<std::string>> saved_;
};

TEST(LocalRankFromEnvironment, ReadsTheLaunchersVariablesInOrder) {
  const LauncherEnvironment env;
  EXPECT_FALSE(local_rank_from_environment().has_value());
  setenv("MPI_LOCALRANKID", "5", 1);
  EXPECT_EQ(local_rank_from_environment(), 5);
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(local_rank_from_environment(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(local_rank_from_environment(), 1);
  // A value that is not a rank is not silently replaced by the next variable's.
  for (const char* bad : {"-1", "x", "1.5", "2 "}) {
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", bad, 1);
    EXPECT_FALSE(local_rank_from_environment().has_value()) << bad;
  }
}

TEST(LocalCommunicator, IsNodeLocalRankZeroAndGathersItself) {
  auto local = make_local_communicator();
  EXPECT_EQ(local->local_rank(), 0);
  const std::uint64_t mine = 0x0123456789abcdefULL;
  std::uint64_t all = 0;
  local->allgather(&mine, sizeof mine, &all);
  EXPECT_EQ(all, mine);
  EXPECT_EQ(local->allgather_strings("cuda:0 on node7"),
            std::vector<std::string>{"cuda:0 on node7"});
  EXPECT_EQ(local->allgather_strings(""), std::vector<std::string>{""});
}

}  // namespace
}  // namespace lmtrain::dist
