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

// A real world over a measured link: the calls its tables hold are priced by them (NCCL's AllReduce of the
// 8192 x 8192 bf16 output at world 2 and NCCL's own 24 CTAs: 128 MiB at the h200x2 table's busbw), not by the
// profile's per-CTA rates; no loopback.
TEST(Cli, PlanOverAMeasuredLinkPricesItsCalls) {
  const std::vector<std::string> base = {"plan", "--op", "gemm-allreduce", "--m", "8192",    "--n",        "8192",
                                         "--k",  "8192", "--world",        "2",   "--modes", "sequential", "--json"};
  std::vector<std::string> argv = base;
  argv.insert(argv.end(), {"--link-profile", "h200x2"});
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["hardware"].dump().find("over h200x2"), std::string::npos) << j["hardware"].dump();
  const auto plain = nlohmann::json::parse(invoke(base).out);
  const double linked = j["sequential_us"].get<double>(), unlinked = plain["sequential_us"].get<double>();
  EXPECT_GT(std::abs(linked - unlinked), 1.0) << linked << " " << unlinked;
}

// validate --link-profile: a file of real ranks (world_backend threads) is priced over the link, its measured calls
// at the table's time (NCCL's AllReduce of 64 MiB on 16 CTAs at world 2: 240.6 GB/s in h200x2); a loopback file is
// left as it was (its context names no link: unpaced).
TEST(Cli, ValidateOverAMeasuredLink) {
  const double us = 123.0;
  const auto file = [&](const std::string& backend) {
    nlohmann::json doc = {{"context", {{"gpu", "NVIDIA H200"}, {"gpu_count", "2"}, {"world_backend", backend}}},
                          {"benchmarks",
                           {{{"name", "coll/nccl/allreduce/67108864/world:2/ctas:16/manual_time"},
                             {"run_type", "iteration"},
                             {"real_time", us},
                             {"time_unit", "us"}}}}};
    const std::string path = testing::TempDir() + "ovl_cli_link_" + backend + ".json";
    std::ofstream(path) << doc.dump();
    return path;
  };
  const auto model_us = [&](const std::string& path, bool link) {
    std::vector<std::string> argv = {"validate", "--measured", path, "--gpu", "h200", "--json"};
    if (link) argv.insert(argv.end(), {"--link-profile", "h200x2"});
    const CliRun r = invoke(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out)["rows"][0]["model_us"].get<double>();
  };
  const std::string real = file("threads"), loopback = file("loopback");
  EXPECT_NEAR(model_us(real, true), 64 * 1024.0 * 1024.0 / 240.6e3, 1e-6);
  EXPECT_GT(std::abs(model_us(real, false) - model_us(real, true)), 1.0);
  EXPECT_DOUBLE_EQ(model_us(loopback, true), model_us(loopback, false));
  std::remove(real.c_str());
  std::remove(loopback.c_str());
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

TEST(Cli, SimulateRunsThePlannersOutputOnItsProfileOnly) {
  std::vector<std::string> argv = kDefault;
  argv.back() = "a100";
  argv.push_back("--json");
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json planned = nlohmann::json::parse(r.out);
  const std::string path = testing::TempDir() + "ovl_cli_plan_a100.json";
  std::ofstream(path) << r.out;
  // The planner ranked by the simulator, so simulating its best plan on its profile gives its predicted time.
  const CliRun same = invoke({"simulate", "--plan", path, "--gpu", "a100", "--json"});
  ASSERT_EQ(same.status, 0) << same.err;
  EXPECT_NEAR(nlohmann::json::parse(same.out)["total_us"].get<double>(), planned["predicted_us"].get<double>(), 1e-6);
  // The default profile (H200) is not the one it was planned on: refused, naming both.
  const CliRun silent = invoke({"simulate", "--plan", path});
  EXPECT_EQ(silent.status, 2);
  EXPECT_NE(silent.err.find("A100 SXM"), std::string::npos) << silent.err;
  EXPECT_NE(silent.err.find("H200 SXM"), std::string::npos) << silent.err;
  // Another profile asked for explicitly runs, with a note.
  const CliRun other = invoke({"simulate", "--plan", path, "--gpu", "h100"});
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_NE(other.err.find("planned on \"A100 SXM\""), std::string::npos) << other.err;
  std::remove(path.c_str());
}

TEST(Cli, PlanOnAnAmpereProfileKeepsToWhatAmpereRuns) {
  std::vector<std::string> argv = kDefault;
  argv.back() = "a100";
  argv.push_back("--json");
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  // ovl's GEMM and the TMA collective need Hopper: only cuBLAS-based modes on NCCL remain.
  const nlohmann::json planned = nlohmann::json::parse(r.out);  // alive through the loop (not a temporary's member)
  for (const auto& alt : planned["alternatives"]) {
    const std::string mode = alt["mode"].get<std::string>();
    EXPECT_TRUE(mode == "sequential" || mode == "decomposed") << alt.dump();
  }
  argv.pop_back();
  argv.insert(argv.end(), {"--dtype", "e4m3"});
  const CliRun fp8 = invoke(argv);
  EXPECT_NE(fp8.status, 0);
  EXPECT_NE(fp8.err.find("compute capability 8.0"), std::string::npos) << fp8.err;
}

TEST(Cli, PlanRefusesAModeNamedTwice) {
  std::vector<std::string> argv = kDefault;
  argv.insert(argv.end(), {"--modes", "tma,tma"});
  const CliRun r = invoke(argv);  // the planner's own check (duplicates crowded the simulated set)
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("tma given twice"), std::string::npos) << r.err;
}

TEST(Cli, PlanSaysWhenTheModesAskedForLoseToNotOverlapping) {
  // One node per GPU: decomposed alone is predicted slower than the baseline, which the modes leave out.
  std::vector<std::string> argv = {
      "plan",  "--op", "gemm-reducescatter", "--m", "8192",    "--n",       "8192", "--k", "2048", "--world", "8",
      "--gpu", "h200", "--gpus-per-node",    "1",   "--modes", "decomposed"};
  const CliRun r = invoke(argv);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("slower than not overlapping"), std::string::npos) << r.out;
}

TEST(Cli, CalibrateNeedsABaseForAnUnknownGpuAndOneGpuAtATime) {
  const nlohmann::json bench = {
      {"benchmarks",
       {{{"name", "gemm/ovl/2048x8192x4096/nt/sms:132/manual_time"}, {"real_time", 120.0}, {"time_unit", "us"}}}}};
  const auto write = [&](const std::string& gpu) {
    nlohmann::json doc = bench;
    doc["context"] = {{"gpu", gpu}};
    const std::string path = testing::TempDir() + "ovl_cli_" + std::to_string(std::hash<std::string>{}(gpu)) + ".json";
    std::ofstream(path) << doc.dump();
    return path;
  };
  const std::string b200 = write("NVIDIA B200"), h100 = write("NVIDIA H100 80GB HBM3"), h200 = write("NVIDIA H200");
  const std::string out = testing::TempDir() + "ovl_cli_profile.json";
  // No built-in profile for the GPU the file names: refused, never fitted on another GPU's base.
  const CliRun unknown = invoke({"calibrate", b200, "-o", out});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("NVIDIA B200"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("give the profile to start the fit from"), std::string::npos) << unknown.err;
  EXPECT_EQ(invoke({"calibrate", b200, "-o=" + out, "--gpu", "h200"}).status, 0);
  // Two GPUs' files: refused by calibrate and validate, naming both files.
  for (const std::vector<std::string>& argv : {std::vector<std::string>{"calibrate", h100, h200, "-o", out},
                                               std::vector<std::string>{"validate", "--measured", h100, h200}}) {
    const CliRun mixed = invoke(argv);
    EXPECT_EQ(mixed.status, 2) << argv[0];
    EXPECT_NE(mixed.err.find(h100), std::string::npos) << mixed.err;
    EXPECT_NE(mixed.err.find(h200), std::string::npos) << mixed.err;
  }
  for (const std::string& p : {b200, h100, h200, out}) std::remove(p.c_str());
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
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--world", "2", "--gpu", "b200x"},
       "b200x"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--world", "2", "--profile",
        "/nonexistent.json"},
       "/nonexistent.json"},
      {{"plan", "--op", "gemm-allreduce", "--m", "abc", "--n", "8", "--k", "8"}, "abc"},
      {{"plan", "--bogus"}, "--bogus"},
      {{"plan", "--op", "gemm-allreduce", "--n", "8", "--k", "8"}, "--m"},
      {{"plan", "--m", "8", "--n", "8", "--k", "8", "--world", "2"}, "missing required option --op"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8"}, "missing required option --world"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--world", "2", "--dtype", "fp32"},
       "dtype fp32"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--world", "2", "--link-profile", "/tmp",
        "--loopback", "rank0"},
       "is a directory"},
      {{"simulate", "--plan", "/nonexistent.json"}, "/nonexistent.json"},
      {{"plan", "--op", "gemm-allreduce", "--m", "8", "--n", "8", "--k", "8", "--world", "2", "--loopback", "rank0",
        "--link-profile", "nvlink9"},
       "nvlink9"},
      {{"validate", "--measured", "x.json", "--link-profile", "nvlink9"}, "nvlink9"},
      {{"validate", "--measured", "x.json", "-p"}, "unknown option '-p'"},
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
