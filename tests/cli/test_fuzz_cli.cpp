// `ovl simulate --plan FILE` fed mutated copies of `ovl plan --json` output (tests/fuzz_text.hpp): every run exits
// 0 (the damage left a valid plan) or with a one-line error, never crashes or hangs. Fixed seed, bounded iterations.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "fuzz_text.hpp"

namespace {

int run_cli(const std::vector<std::string>& argv, std::string& err) {
  std::ostringstream out, errs;
  const int status = ovl::cli::run(argv, out, errs, {});
  err = errs.str();
  return status;
}

TEST(FuzzCli, SimulateReadsMutatedPlannerOutputOrSaysWhyNot) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ovl_fuzz_cli_" + std::to_string(::getpid()) + ".json")).string();
  std::vector<std::string> outputs;
  for (const char* op : {"gemm-allreduce", "gemm-reducescatter", "allgather-gemm"}) {
    std::ostringstream out, err;
    ASSERT_EQ(ovl::cli::run({"plan", "--op", op, "--m", "4096", "--n", "2048", "--k", "1024", "--world", "8", "--gpu",
                             "h200", "--top", "2", "--json"},
                            out, err, {}),
              0)
        << err.str();
    outputs.push_back(out.str());
  }
  std::mt19937 rng(4242);
  int ok = 0, refused = 0;
  for (int i = 0; i < 240; ++i) {
    const std::string text = ovl::test::mutate_text(outputs[size_t(i) % outputs.size()], rng);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    std::string err;
    const int status = run_cli({"simulate", "--plan", path, "--gpu", "h200", "--json"}, err);
    if (status == 0) {
      ++ok;
      continue;
    }
    ++refused;
    EXPECT_TRUE(status == 1 || status == 2) << status;
    EXPECT_EQ(err.rfind("ovl simulate: ", 0), 0u) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  std::filesystem::remove(path);
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
