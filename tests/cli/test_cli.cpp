// The `ovl` subcommands driven as library calls: exit statuses, one-line errors naming the bad value, JSON
// output shape, traces that parse as Chrome trace JSON, and a randomized feed of garbage arguments.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/json_files.hpp"

namespace {

struct CliRun {
  int status;
  std::string out, err;
};

CliRun invoke(const std::vector<std::string>& argv) {
  std::ostringstream out, err;
  const int status = ovl::cli::run(argv, out, err, {});
  return {status, out.str(), err.str()};
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

const std::vector<std::string> kDefault = {"plan", "--op", "gemm-allreduce", "--m", "8192", "--n", "8192",
                                           "--k", "8192", "--world", "8", "--gpu", "h200"};

TEST(Cli, PlanPrintsATable) {
  const CliRun r = invoke(kDefault);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("sequential"), std::string::npos) << r.out;
}

TEST(Cli, PlanTakesFp8) {
  std::vector<std::string> argv = kDefault;
  argv.insert(argv.end(), {"--dtype", "e4m3"});
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("e4m3"), std::string::npos) << r.out;
  argv.back() = "fp8";
  const CliRun bad = invoke(argv);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("fp8"), std::string::npos) << bad.err;
}

TEST(Cli, PlanJsonHasTheDocumentedFields) {
  std::vector<std::string> argv = kDefault;
  argv.push_back("--json");
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"mode", "gemm_sms", "comm_sms", "tile_groups"}) EXPECT_TRUE(j["plan"].contains(key)) << key;
  EXPECT_GT(j["predicted_us"].get<double>(), 0);
  EXPECT_GT(j["sequential_us"].get<double>(), 0);
  ASSERT_FALSE(j["alternatives"].empty());
  for (const auto& alt : j["alternatives"]) {
    for (const char* key : {"mode", "comm_sms", "predicted_us"}) EXPECT_TRUE(alt.contains(key)) << key;
  }
}

TEST(Cli, PlanOnAPacedLoopbackShowsNcclsCtaCountBaseline) {
  std::vector<std::string> argv = kDefault;
  for (const char* a : {"--loopback", "rank0", "--link-profile", "nvlink4-node8", "--json"}) argv.push_back(a);
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["sequential"]["comm_ctas"].get<int>(), 24) << j["sequential"].dump();
  EXPECT_NE(j["hardware"].dump().find("nvlink4-node8"), std::string::npos) << j["hardware"].dump();
  // The paced baseline takes longer than the unpaced loopback's (HBM-speed) one.
  argv.resize(argv.size() - 3);
  argv.push_back("--json");
  const auto unpaced = nlohmann::json::parse(invoke(argv).out);
  EXPECT_GT(j["sequential_us"].get<double>(), unpaced["sequential_us"].get<double>());
}

TEST(Cli, PlanWritesAChromeTrace) {
  const std::string path = testing::TempDir() + "ovl_cli_trace.json";
  std::vector<std::string> argv = kDefault;
  argv.insert(argv.end(), {"--trace", path});
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  ASSERT_TRUE(trace.contains("traceEvents"));
  EXPECT_FALSE(trace["traceEvents"].empty());
  for (const auto& e : trace["traceEvents"]) EXPECT_TRUE(e.contains("ph"));
  std::remove(path.c_str());
}

TEST(Cli, SimulateRunsThePlannersOutput) {
  std::vector<std::string> argv = kDefault;
  argv.push_back("--json");
  const CliRun planned = invoke(argv);
  ASSERT_EQ(planned.status, 0);
  const std::string path = testing::TempDir() + "ovl_cli_plan.json";
  std::ofstream(path) << planned.out;
  const CliRun r = invoke({"simulate", "--plan", path, "--gpu", "h200", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // The planner ranked by the simulator, so simulating its best plan gives its predicted time.
  EXPECT_NEAR(j["total_us"].get<double>(), nlohmann::json::parse(planned.out)["predicted_us"].get<double>(), 1e-6);
  std::remove(path.c_str());
}

struct BadCase {
  std::vector<std::string> argv;
  std::string names;  // the one line must contain this
};

TEST(Cli, BadArgumentsExitTwoWithOneLineNamingTheValue) {
  const std::vector<BadCase> cases = {
      {{"plan", "--op", "gemm-allgather", "--m", "8", "--n", "8", "--k", "8"}, "gemm-allgather"},
      {{"plan", "--op", "gemm-allreduce", "--m", "0", "--n", "8", "--k", "8"}, "--m = 0"},
      {{"plan", "--op", "gemm-reducescatter", "--m", "1000", "--n", "8", "--k", "8", "--world", "3"}, "3"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--gpu", "b200x"}, "b200x"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--profile", "/nonexistent.json"},
       "/nonexistent.json"},
      {{"plan", "--op", "gemm-allreduce", "--m", "abc", "--n", "8", "--k", "8"}, "abc"},
      {{"plan", "--bogus"}, "--bogus"},
      {{"plan", "--op", "gemm-allreduce", "--n", "8", "--k", "8"}, "--m"},
      {{"simulate", "--plan", "/nonexistent.json"}, "/nonexistent.json"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--loopback", "rank0", "--link-profile",
        "nvlink9"},
       "nvlink9"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--link-profile", "h200x2"},
       "--loopback"},
      {{"frobnicate"}, "frobnicate"},
  };
  for (const BadCase& c : cases) {
    const CliRun r = invoke(c.argv);
    EXPECT_EQ(r.status, 2) << c.argv[0] << " " << c.names << ": " << r.err;
    if (c.argv[0] != "frobnicate") EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << "expected '" << c.names << "' in: " << r.err;
  }
}

// Google Benchmark's bare NaN / inf (in aggregates) read as null; strings that spell them are left alone.
TEST(Cli, BenchmarkJsonWithNanReads) {
  const std::string text =
      R"({"benchmarks": [{"name": "NaN", "cv": NaN, "a": [inf, -nan, 1.5], "b": -Infinity, "s": "x: NaN"}]})";
  const nlohmann::json j = nlohmann::json::parse(ovl::cli::nan_to_null(text));
  const auto& b = j["benchmarks"][0];
  EXPECT_EQ(b["name"], "NaN");
  EXPECT_TRUE(b["cv"].is_null());
  EXPECT_TRUE(b["a"][0].is_null());
  EXPECT_TRUE(b["a"][1].is_null());
  EXPECT_DOUBLE_EQ(b["a"][2].get<double>(), 1.5);
  EXPECT_TRUE(b["b"].is_null());
  EXPECT_EQ(b["s"], "x: NaN");
  EXPECT_EQ(ovl::cli::nan_to_null(R"({"n": null, "x": 2})"), R"({"n": null, "x": 2})");
}

// --help after any command prints the usage (every command's options) and exits 0; bare `ovl` prints it to stderr
// and exits 2.
TEST(Cli, HelpPrintsTheUsage) {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"--help"}, {"plan", "--help"}, {"validate", "-h"}, {"simulate", "--plan", "x.json", "--help"}}) {
    const CliRun r = invoke(argv);
    EXPECT_EQ(r.status, 0) << argv[0];
    EXPECT_NE(r.out.find("usage: ovl <command>"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--op gemm-allreduce"), std::string::npos) << r.out;
  }
  const CliRun bare = invoke({});
  EXPECT_EQ(bare.status, 2);
  EXPECT_NE(bare.err.find("usage: ovl <command>"), std::string::npos);
}

TEST(Cli, InfoWithoutCudaSaysSo) {
  const CliRun r = invoke({"info"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(lines(r.out), 1);
}

// Randomized arguments: options, values and junk mixed; the command may succeed or refuse, never crash, and a
// refusal is always exit 2 (bad argument) or 1 (a library error), with a message.
TEST(Cli, RandomArgumentsNeverCrash) {
  std::mt19937 rng(1234);
  const std::vector<std::string> words = {"plan", "simulate", "--op", "gemm-allreduce", "allgather-gemm", "--m",
                                          "--n", "--k", "--world", "--gpu", "h100", "--dtype", "fp16", "bf16",
                                          "--json", "--top", "-1", "0", "7", "4096", "99999999999999999999", "",
                                          "--layout", "nn", "--=", "--m=8", "\x01\xff", "--gpus-per-node", "3",
                                          "--profile", "--trace", "--modes", "tma,sequential", "nonsense"};
  for (int i = 0; i < 300; ++i) {
    std::vector<std::string> argv = {i % 2 ? "plan" : "simulate"};
    const int n = std::uniform_int_distribution<int>(0, 10)(rng);
    for (int j = 0; j < n; ++j) argv.push_back(words[std::uniform_int_distribution<size_t>(0, words.size() - 1)(rng)]);
    // Never let the fuzz write files anywhere: drop --trace/--profile values.
    for (size_t j = 0; j < argv.size(); ++j)
      if ((argv[j] == "--trace" || argv[j] == "--profile") && j + 1 < argv.size()) argv[j + 1] = "/nonexistent/x";
    const CliRun r = invoke(argv);
    if (r.status != 0) {
      EXPECT_TRUE(r.status == 1 || r.status == 2) << r.status;
      EXPECT_FALSE(r.err.empty());
    }
  }
}

}  // namespace
