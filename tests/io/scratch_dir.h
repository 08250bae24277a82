// A fresh temporary directory per test for the fixture files the io tests write, and helpers
// shared by those tests.  Fixtures are generated at run time; nothing binary is committed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>

#include "lmtrain/core/error.h"

namespace lmtrain::io::testing {

class ScratchDir : public ::testing::Test {
 public:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device entropy;
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("lmtrain_io_") + info->test_suite_name() + "_" + info->name() + "_" +
            std::to_string(::getpid()) + "_" + std::to_string(entropy()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string path(std::string_view name) const { return (dir_ / name).string(); }

  // Writes `bytes` to a file in the scratch directory and returns its path.
  std::string write(std::string_view name, std::string_view bytes) const {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "cannot write fixture " << p;
    return p;
  }

  // Writes `bytes` gzip-compressed with zlib's gzwrite and returns the path.
  std::string write_gzip(std::string_view name, std::string_view bytes) const {
    const std::string p = path(name);
    gzFile gz = gzopen(p.c_str(), "wb");
    EXPECT_NE(gz, nullptr) << "cannot create " << p;
    if (!gz) return p;
    EXPECT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    EXPECT_EQ(gzclose(gz), Z_OK);
    return p;
  }

  static std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// The message of the InvalidArgument that `action` throws (a test failure if it throws none).
inline std::string invalid_argument_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const lmtrain::InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected lmtrain::InvalidArgument, nothing was thrown";
  return {};
}

// Expects every one of `parts` in `message`.
inline void expect_contains(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "message lacks \"" << part << "\"\n  message: " << message;
}

// Random doubles of mixed sign and magnitude (1e-8 … 1e8), never zero: values whose every digit
// matters for an exact round trip.
inline double random_value(std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-8, 8);
  double v = 0.0;
  while (v == 0.0) v = normal(rng) * std::pow(10.0, exponent(rng));
  return v;
}

inline bool numpy_available() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

}  // namespace lmtrain::io::testing
