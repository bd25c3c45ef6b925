// `ovl validate` as a library call: error statistics and rankings from measurements whose errors are known by
// construction. The measured times are the simulator's own predictions scaled by chosen factors f, so each
// case's absolute percentage error is |pred - meas| / meas = |1 - f| / f, written out below.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ovl/error.hpp"
#include "ovl/tools/bench_names.hpp"
#include "ovl/sim/simulate.hpp"
#include "ovl/tools/validate.hpp"

namespace {

using ovl::sim::error_stats;

TEST(Validate, ErrorStatsByHand) {
  // APEs 1..10: mean 5.5; P90 by nearest rank = the ceil(0.9 * 10) = 9th smallest = 9; max 10.
  const auto s = error_stats({3, 1, 2, 10, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(s.cases, 10);
  EXPECT_DOUBLE_EQ(s.mape, 5.5);
  EXPECT_DOUBLE_EQ(s.p90_ape, 9);
  EXPECT_DOUBLE_EQ(s.max_ape, 10);
  // One value: it is the mean, the P90 and the max.
  const auto one = error_stats({4.0});
  EXPECT_DOUBLE_EQ(one.p90_ape, 4.0);
  EXPECT_EQ(error_stats({}).cases, 0);
}

double simulated_us(const std::string& name, const ovl::Hardware& hw) {
  const auto b = ovl::parse_bench_name(name);
  EXPECT_TRUE(b.has_value()) << name;
  return ovl::sim::simulate(b->problem(), b->plan(hw), hw).total_us;
}

nlohmann::json bench(const std::string& name, double us) {
  return {{"name", name}, {"run_type", "iteration"}, {"real_time", us}, {"time_unit", "us"}, {"iterations", 10}};
}

TEST(Validate, KnownErrorsAndRanking) {
  const ovl::Hardware hw = ovl::builtin_hardware("h200");
  // One problem measured under three choices. Factors f (measured = f x simulated):
  //   sequential     f = 1.25  -> APE |1 - 1.25| / 1.25 = 20%
  //   tma 16 SMs     f = 0.80  -> APE 0.20 / 0.80       = 25%
  //   tile-signal 16 f = 1.00  -> APE 0%
  // Simulator MAPE = (20 + 25 + 0) / 3 = 15%; P90 (nearest rank, ceil(2.7) = 3rd) = 25%; max = 25%.
  const std::string prefix = "overlap/";
  const std::string shape = "/gemm-reducescatter/8192x8192x4096/world:8/comm_sms:";
  const std::vector<std::pair<std::string, double>> cases = {
      {prefix + "sequential" + shape + "0", 1.25}, {prefix + "tma" + shape + "16", 0.80},
      {prefix + "tile-signal" + shape + "16", 1.00}};
  nlohmann::json file = {{"context", {{"gpu", "NVIDIA H200"}, {"gpu_count", "8"}}}, {"benchmarks", nlohmann::json::array()}};
  std::vector<double> sim, measured;
  for (const auto& [name, f] : cases) {
    sim.push_back(simulated_us(name, hw));
    measured.push_back(f * sim.back());
    file["benchmarks"].push_back(bench(name, measured.back()));
  }
  const ovl::sim::ValidationResult r = ovl::sim::validate({file}, std::nullopt);  // profile from the context's GPU
  EXPECT_EQ(r.hardware, hw.name);
  ASSERT_EQ(r.cases.size(), 3u);
  EXPECT_FALSE(r.cases[0].loopback);  // 8 GPUs in the context: real ranks
  EXPECT_EQ(r.simulator.cases, 3);
  EXPECT_NEAR(r.simulator.mape, 15.0, 1e-6);
  EXPECT_NEAR(r.simulator.p90_ape, 25.0, 1e-6);
  EXPECT_NEAR(r.simulator.max_ape, 25.0, 1e-6);

  // Ranking: the simulator's pick is the case with the smallest simulated time; the measured best the smallest
  // measured time; regret = (measured of the pick - measured best) / measured best.
  size_t pick = 0, best = 0;
  for (size_t i = 1; i < 3; ++i) {
    if (sim[i] < sim[pick]) pick = i;
    if (measured[i] < measured[best]) best = i;
  }
  EXPECT_EQ(r.ranking_simulator.problems, 1);
  EXPECT_DOUBLE_EQ(r.ranking_simulator.top1, pick == best ? 1.0 : 0.0);
  EXPECT_NEAR(r.ranking_simulator.regret_mean, (measured[pick] - measured[best]) / measured[best], 1e-12);
  EXPECT_NEAR(r.ranking_simulator.regret_max, r.ranking_simulator.regret_mean, 1e-12);

  const nlohmann::json j = r;
  for (const char* key : {"cases", "mape", "p90_ape", "max_ape", "top1", "regret_mean", "regret_max"})
    EXPECT_TRUE(j.contains(key)) << key;
}

TEST(Validate, LoopbackWhenTheContextHasFewerGpusThanRanks) {
  nlohmann::json file = {{"context", {{"gpu", "NVIDIA H200"}, {"gpu_count", "1"}}},
                         {"benchmarks", {bench("coll/tma-pull/reducescatter/67108864/world:8/ctas:16", 500.0)}}};
  const auto r = ovl::sim::validate({file}, std::nullopt);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_TRUE(r.cases[0].loopback);
  EXPECT_TRUE(r.cases[0].model_us.has_value());
}

// "world_backend" in the context decides over the GPU count: a loopback run on a machine of 2 GPUs is still
// loopback, a threads run is real; a loopback and a real case of the same name stay two cases, ranked apart.
TEST(Validate, WorldBackendDecidesLoopback) {
  const std::string coll = "coll/tma-pull/reducescatter/67108864/world:2/ctas:16";
  const std::string seq = "overlap/sequential/gemm-reducescatter/8192x8192x4096/world:2/comm_sms:132";
  const std::string ts = "overlap/tile-signal/gemm-reducescatter/8192x8192x4096/world:2/comm_sms:16";
  auto file = [&](const char* backend) {
    return nlohmann::json{{"context", {{"gpu", "NVIDIA H200"}, {"gpu_count", "2"}, {"world_backend", backend}}},
                          {"benchmarks", {bench(coll, 500.0), bench(seq, 3000.0), bench(ts, 2500.0)}}};
  };
  const auto loop = ovl::sim::validate({file("loopback")}, std::nullopt);
  ASSERT_EQ(loop.cases.size(), 3u);
  for (const auto& c : loop.cases) EXPECT_TRUE(c.loopback) << c.name;
  const auto real = ovl::sim::validate({file("threads")}, std::nullopt);
  ASSERT_EQ(real.cases.size(), 3u);
  for (const auto& c : real.cases) EXPECT_FALSE(c.loopback) << c.name;
  const auto both = ovl::sim::validate({file("loopback"), file("threads")}, std::nullopt);
  ASSERT_EQ(both.cases.size(), 6u);
  EXPECT_EQ(both.ranking_simulator.problems, 2);
  nlohmann::json bad = file("cluster");
  try {
    ovl::sim::validate({bad}, std::nullopt);
    ADD_FAILURE() << "no error for world_backend = cluster";
  } catch (const ovl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cluster"), std::string::npos) << e.what();
  }
}

TEST(Validate, RejectsFilesWithoutAGpuOrCases) {
  EXPECT_THROW(ovl::sim::validate({}, std::nullopt), ovl::Error);
  nlohmann::json no_gpu = {{"benchmarks", {bench("gemm/cublas/8192x8192x8192/nt/sms:132", 1500.0)}}};
  EXPECT_THROW(ovl::sim::validate({no_gpu}, std::nullopt), ovl::Error);
  nlohmann::json unknown = {{"context", {{"gpu", "NVIDIA H200"}}}, {"benchmarks", {bench("BM_Other/1", 3.0)}}};
  EXPECT_THROW(ovl::sim::validate({unknown}, std::nullopt), ovl::Error);
}

// A case the model cannot run on the profile (more SMs than the device has, a comm SM count beyond it) is left out
// of the statistics with a note that names the value and the bound, never predicted.
TEST(Validate, NotesNameWhatTheModelRefused) {
  nlohmann::json file = {
      {"context", {{"gpu", "NVIDIA H200"}}},
      {"benchmarks",
       {bench("gemm/ovl/8192x8192x8192/nt/sms:5000", 1500.0), bench("gemm/ovl/8192x8192x8192/nt/sms:132", 1500.0),
        bench("overlap/tile-signal/gemm-allreduce/8192x8192x2048/world:2/comm_sms:5000", 1500.0)}}};
  const ovl::sim::ValidationResult r = ovl::sim::validate({file}, std::nullopt);
  EXPECT_EQ(r.model.cases, 1);  // the 132-SM GEMM only
  const auto noted = [&](const std::string& text) {
    for (const std::string& n : r.notes)
      if (n.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(
      noted("sms:5000: the model cannot predict it on H200 SXM: sms = 5000 is more than the profile's 132 SMs"));
  EXPECT_TRUE(noted("comm_sms = 5000 must be in [0, 132]"));
}

}  // namespace
