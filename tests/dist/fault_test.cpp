// Faults of a data-parallel job launched as users launch it (mpirun -np 3 lmtrain fit …): one
// rank killed mid-training ends the whole job with a non-zero exit within 30 s and a message
// naming the rank; the last checkpoint stays intact and a run resumed on another rank count
// finishes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "lmtrain/io/model_file.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts `command` with stdout/stderr to `log`; returns the pid.
pid_t spawn(const std::string& command, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const std::string shell = "exec " + command + " > '" + log.string() + "' 2>&1";
    execl("/bin/sh", "sh", "-c", shell.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

std::vector<pid_t> children(pid_t parent) {
  std::vector<pid_t> out;
  FILE* p = popen(("pgrep -P " + std::to_string(parent)).c_str(), "r");
  if (p == nullptr) return out;
  int pid = 0;
  while (std::fscanf(p, "%d", &pid) == 1) out.push_back(pid);
  pclose(p);
  return out;
}

std::string mpirun(int ranks) {
  return std::string(MPIEXEC) + " -np " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 " + LMTRAIN_CLI_PATH;
}

TEST(RankFaults, KilledRankEndsTheJobAndAnotherRankCountResumes) {
  const fs::path dir = fs::temp_directory_path() / "lmtrain-rank-fault-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::ofstream data(dir / "data.csv");
    data << "x,y\n";
    for (int i = 0; i < 6000; ++i) {
      const double x = -1 + 2.0 * i / 5999, t = 10 * M_PI * x;
      data << x << "," << (t == 0 ? 1.0 : std::sin(t) / t) << "\n";
    }
    std::ofstream(dir / "run.toml")
        << "seed = 1\nprecision = \"float64\"\noutput_dir = \"out\"\n"
           "[model]\nlayers = [{ type = \"dense\", units = 30 }, { type = \"tanh\" }, { type = \"dense\", units = 1 }]\n"
           "[data]\nnormalize_inputs = \"none\"\nnormalize_targets = \"none\"\n"
           "[data.train]\npath = \"data.csv\"\n"
           "[trainer]\nmax_epochs = 40\nbatch_size = 500\ncheckpoint_every = 1\n";
  }
  const fs::path out = dir / "out";
  const pid_t job = spawn(mpirun(3) + " fit " + (dir / "run.toml").string() + " --quiet",
                          dir / "job.log");
  // Wait for the first checkpoint, then kill one rank.
  const auto give_up = Clock::now() + std::chrono::seconds(240);
  while (!fs::exists(out / "checkpoint.safetensors") && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(out / "checkpoint.safetensors")) << read_all(dir / "job.log");
  std::vector<pid_t> ranks;
  for (int tries = 0; tries < 100 && ranks.size() < 3; ++tries) {
    ranks = children(job);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(ranks.size(), 2u) << "could not find the ranks of mpirun " << job;
  const auto killed_at = Clock::now();
  kill(ranks[1], SIGKILL);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(job, &status, WNOHANG)) == 0 && Clock::now() - killed_at < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  if (done == 0) {
    kill(-job, SIGKILL);
    waitpid(job, &status, 0);
  }
  ASSERT_EQ(done, job) << "the job still ran 60 s after a rank was killed";
  EXPECT_LT(seconds, 30.0);
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  const std::string log = read_all(dir / "job.log");
  EXPECT_NE(log.find("rank"), std::string::npos) << log;
  EXPECT_NE(log.find("signal 9"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));

  // Resume on 2 ranks from the intact checkpoint: the run finishes its 40 epochs.
  const pid_t resumed = spawn(mpirun(2) + " fit " + (dir / "run.toml").string() + " --quiet --resume " +
                                  out.string(),
                              dir / "resume.log");
  waitpid(resumed, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_all(dir / "resume.log");
  const auto model = lmtrain::io::read_model_file((out / "model.safetensors").string());
  EXPECT_EQ(model.provenance.at("epochs").get<int>(), 40);
  fs::remove_all(dir);
}

}  // namespace
