// Faults of a data-parallel job launched as users launch it (mpirun -np 3 lmtrain fit …): one
// rank killed mid-training ends the whole job with a non-zero exit within 30 s and a message
// naming the rank; the last checkpoint stays intact, and the runs resumed from it reproduce an
// uninterrupted run: exactly on the same rank count (README, "Checkpoints and resume"), to
// float64 summation order on another.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "lmtrain/records/model_file.h"

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

// A fresh directory of this process: checkouts that run their tests at the same time must not
// share one.
fs::path scratch_directory(const std::string& name) {
  std::string path = (fs::temp_directory_path() / (name + "-XXXXXX")).string();
  if (mkdtemp(path.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + path);
  return path;
}

// max |a − b| / max |b|.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

std::vector<double> trained_parameters(const fs::path& run_dir) {
  return lmtrain::io::read_model_file((run_dir / "model.safetensors").string()).parameters;
}

// The training loss of each epoch, from a run directory's epochs.csv (epoch, training_loss, …).
std::vector<double> epoch_losses(const fs::path& run_dir) {
  std::ifstream in(run_dir / "epochs.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("epoch,training_loss,", 0), 0u) << line;
  std::vector<double> losses;
  while (std::getline(in, line)) losses.push_back(std::stod(line.substr(line.find(',') + 1)));
  return losses;
}

// Runs `command` to completion with its output in `log`; true when it exited with 0.
bool run_to_completion(const std::string& command, const fs::path& log) {
  int status = 0;
  waitpid(spawn(command, log), &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string mpirun(int ranks) {
  return std::string(MPIEXEC) + " -np " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 " + LMTRAIN_CLI_PATH;
}

TEST(RankFaults, KilledRankEndsTheJobAndResumedRunsReproduceAnUninterruptedOne) {
  const fs::path dir = scratch_directory("lmtrain-rank-fault-test");
  const fs::path config = dir / "run.toml";
  {
    std::ofstream data(dir / "data.csv");
    data << "x,y\n";
    for (int i = 0; i < 6000; ++i) {
      const double x = -1 + 2.0 * i / 5999, t = 10 * M_PI * x;
      data << x << "," << (t == 0 ? 1.0 : std::sin(t) / t) << "\n";
    }
    std::ofstream(config) << "seed = 1\nprecision = \"float64\"\noutput_dir = \"out\"\n"
                             "[model]\nlayers = [{ type = \"dense\", units = 30 }, { type = "
                             "\"tanh\" }, { type = \"dense\", units = 1 }]\n"
                             "[data]\nnormalize_inputs = \"none\"\nnormalize_targets = \"none\"\n"
                             "[data.train]\npath = \"data.csv\"\n"
                             "[trainer]\nmax_epochs = 40\nbatch_size = 500\ncheckpoint_every = 1\n";
  }
  const std::string fit = " fit " + config.string() + " --quiet";

  // The uninterrupted run on 3 ranks: the reference of the resumed ones.
  const fs::path uninterrupted = dir / "uninterrupted";
  ASSERT_TRUE(
      run_to_completion(mpirun(3) + fit + " --set 'output_dir=\"" + uninterrupted.string() + "\"'",
                        dir / "uninterrupted.log"))
      << read_all(dir / "uninterrupted.log");
  const std::vector<double> expected = trained_parameters(uninterrupted);

  const fs::path out = dir / "out";
  const pid_t job = spawn(mpirun(3) + fit, dir / "job.log");
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
  while ((done = waitpid(job, &status, WNOHANG)) == 0 &&
         Clock::now() - killed_at < std::chrono::seconds(60))
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

  // Resume from the intact checkpoint twice: on 3 ranks (a copy of the run directory) and on 2.
  const fs::path same_ranks = dir / "resumed-on-3";
  fs::copy(out, same_ranks, fs::copy_options::recursive);
  ASSERT_TRUE(
      run_to_completion(mpirun(3) + fit + " --resume " + same_ranks.string(), dir / "resume3.log"))
      << read_all(dir / "resume3.log");
  // Not --quiet: the command says where it resumes ("resuming DIR from epoch N, batch M").
  const std::string resume2 = mpirun(2) + " fit " + config.string() + " --resume " + out.string();
  ASSERT_TRUE(run_to_completion(resume2, dir / "resume2.log")) << read_all(dir / "resume2.log");
  const std::string resume_log = read_all(dir / "resume2.log");
  int epochs_done = -1, batches_done = -1;
  const auto at = resume_log.find("from epoch ");
  ASSERT_NE(at, std::string::npos) << resume_log;
  ASSERT_EQ(
      std::sscanf(resume_log.c_str() + at, "from epoch %d, batch %d", &epochs_done, &batches_done),
      2)
      << resume_log;
  RecordProperty("resumed_from_epoch", epochs_done);
  const auto model = lmtrain::io::read_model_file((out / "model.safetensors").string());
  EXPECT_EQ(model.provenance.at("epochs").get<int>(), 40);

  // Same seed, same rank count, one thread per rank: the uninterrupted run's parameters exactly
  // (README, "Checkpoints and resume").
  EXPECT_EQ(trained_parameters(same_ranks), expected);

  // On 2 ranks every step after the checkpoint sums A and g over other shards: the same run up
  // to float64 rounding, which this problem amplifies over the ~450 remaining mini-batch steps
  // (uninterrupted runs on 1, 2 and 3 ranks agree to 6e-9 in parameters after 5 epochs, 7e-6
  // after 10, and end 1.6e-3 and 3.1e-3 apart after 40 at the same loss within 6 %).  Measured
  // for resumes from epochs 1, 2, 3, 5 and 8: parameters 4.4e-4, 1.1e-3, 2.1e-5, 1.6e-5, 4.0e-6
  // from the uninterrupted run; final loss 0.989–1.000 of its; the three epochs after the
  // checkpoint within 1e-8 of its losses.  So: the history up to the checkpoint is the
  // uninterrupted run's, the next epochs follow it closely (a resume from a wrong state would
  // not), and the end is the same fit.
  const std::vector<double> reference = epoch_losses(uninterrupted);
  const std::vector<double> resumed = epoch_losses(out);
  ASSERT_EQ(reference.size(), 40u);
  ASSERT_EQ(resumed.size(), 40u);
  ASSERT_GE(epochs_done, 1);
  for (int e = 0; e < std::min(epochs_done + 3, 40); ++e) {
    if (e < epochs_done) {
      EXPECT_EQ(resumed[e], reference[e]) << "epoch " << e + 1;
    } else {
      EXPECT_NEAR(resumed[e], reference[e], 1e-7 * reference[e]) << "epoch " << e + 1;
    }
  }
  const double difference = relative_difference(model.parameters, expected);
  const double loss_ratio =
      model.provenance.at("final_loss").get<double>() /
      lmtrain::io::read_model_file((uninterrupted / "model.safetensors").string())
          .provenance.at("final_loss")
          .get<double>();
  RecordProperty("resumed_on_2_ranks_parameter_difference", std::to_string(difference));
  RecordProperty("resumed_on_2_ranks_final_loss_ratio", std::to_string(loss_ratio));
  std::printf(
      "resumed from epoch %d on 2 ranks: parameters %.2e from the uninterrupted run, "
      "final loss %.4f of its\n",
      epochs_done, difference, loss_ratio);
  EXPECT_LE(difference, 1e-2);
  EXPECT_NEAR(loss_ratio, 1.0, 0.1);
  fs::remove_all(dir);
}

}  // namespace
