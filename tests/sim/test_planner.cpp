// plan(): determinism, best never worse than sequential, every alternative valid, bad inputs rejected, JSON and
// table shape for `ovl plan`.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl::sim {
namespace {

TEST(Planner, Deterministic) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const nlohmann::json a = plan(p, hw);
  const nlohmann::json b = plan(p, hw);
  EXPECT_EQ(a.dump(), b.dump());
}

TEST(Planner, BestBeatsOrEqualsSequentialAndAlternativesValidate) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    for (int world : {1, 2, 4, 8, 16, 64}) {
      for (const auto& [m, n, k] :
           {std::tuple<int64_t, int64_t, int64_t>{8192, 8192, 8192}, {4096, 14336, 4096}, {2048, 1024, 8192}}) {
        const Problem p = make_problem(op, m, n, k, world);
        SCOPED_TRACE(p.name());
        const PlanResult r = plan(p, hw);
        ASSERT_FALSE(r.alternatives.empty());
        EXPECT_LE(r.predicted_us, r.sequential_us * (1 + 1e-12));
        EXPECT_GE(r.speedup, 1.0 - 1e-12);
        EXPECT_NO_THROW(r.best.validate(p, hw));
        EXPECT_EQ(r.predicted_us, r.alternatives.front().predicted_us);
        for (size_t i = 0; i < r.alternatives.size(); ++i) {
          const PlanAlternative& a = r.alternatives[i];
          EXPECT_NO_THROW(a.plan.validate(p, hw)) << a.plan.summary();
          EXPECT_GT(a.predicted_us, 0);
          EXPECT_GT(a.model_us, 0);
          EXPECT_NEAR(a.speedup, r.sequential_us / a.predicted_us, 1e-9);
          if (i > 0) {
            EXPECT_LE(r.alternatives[i - 1].predicted_us, a.predicted_us);
          }
        }
        EXPECT_GE(r.candidates, static_cast<int>(r.alternatives.size()));
      }
    }
  }
}

// AG+GEMM: the planner offers sequential and decomposed only (runnable_only: tma does not run it, and the signaling
// modes were measured in loopback only, slower than decomposed and predicted too fast by up to 32%); with
// runnable_only off the signaling modes are simulated too.
TEST(Planner, AllGatherOffersOnlyTheUnsignaledModes) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kAllGatherGemm, 8192, 8192, 8192, 8);
  auto modes_of = [](const PlanResult& r) {
    std::set<Mode> m;
    for (const PlanAlternative& a : r.alternatives) m.insert(a.plan.mode);
    return m;
  };
  EXPECT_EQ(modes_of(plan(p, hw)), (std::set<Mode>{Mode::kSequential, Mode::kDecomposed}));
  PlannerOptions all;
  all.runnable_only = false;
  const std::set<Mode> simulated = modes_of(plan(p, hw, all));
  for (Mode m : {Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) EXPECT_EQ(simulated.count(m), 1u) << to_string(m);
  PlannerOptions signaled;
  signaled.modes = {Mode::kTileSignal, Mode::kGreenContext};
  test::expect_error_naming([&] { plan(p, hw, signaled); }, "AllGather+GEMM");
}

TEST(Planner, TileSignalAlsoLeavesTheCollectiveItsSms) {
  // GEMM+AR / GEMM+RS: every tile-signal comm_sms is offered twice, with the default grid (gemm_sms = sm_count: the
  // executor runs sm_count - 1 CTAs, and the collective gets one SM until the GEMM's last wave) and with
  // gemm_sms = sm_count - comm_ctas; AG+GEMM's executor already leaves the gather its CTAs, so it gets the default.
  const Hardware hw = builtin_hardware("h200");
  PlannerOptions o;
  o.modes = {Mode::kTileSignal};
  o.runnable_only = false;
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    SCOPED_TRACE(to_string(op));
    std::set<std::pair<int, int>> grids;  // (comm_ctas, gemm_sms)
    for (const Plan& c : candidate_plans(make_problem(op, 8192, 8192, 4096, 8), hw, o)) {
      ASSERT_EQ(c.mode, Mode::kTileSignal);
      grids.insert({c.comm_ctas, c.gemm_sms});
    }
    std::set<int> comms;
    for (const auto& [comm, gemm] : grids) comms.insert(comm);
    ASSERT_FALSE(comms.empty());
    for (int comm : comms) {
      EXPECT_EQ(grids.count({comm, hw.sm_count}), 1u) << comm;
      EXPECT_EQ(grids.count({comm, hw.sm_count - comm}), op == Op::kAllGatherGemm ? 0u : 1u) << comm;
    }
  }
}

TEST(Planner, ModesCanBeRestricted) {
  const Hardware hw = builtin_hardware("h100");
  const Problem p = make_problem(Op::kGemmReduceScatter, 8192, 8192, 4096, 8);
  PlannerOptions o;
  o.modes = {Mode::kGreenContext};
  const PlanResult r = plan(p, hw, o);
  for (const PlanAlternative& a : r.alternatives) {
    EXPECT_EQ(a.plan.mode, Mode::kGreenContext);
    EXPECT_TRUE(a.plan.partitioned);
    EXPECT_EQ(a.plan.comm_sms % hw.sm_granularity, 0);
    EXPECT_LE(a.plan.gemm_sms + a.plan.comm_sms, hw.sm_count);
  }
}

TEST(Planner, ModelOnlyRanking) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 4);
  PlannerOptions o;
  o.use_simulator = false;
  const PlanResult r = plan(p, hw, o);
  EXPECT_EQ(r.simulated, 0);
  for (const PlanAlternative& a : r.alternatives) EXPECT_EQ(a.predicted_us, a.model_us);
}

TEST(Planner, BadInputsRejected) {
  const Hardware hw = builtin_hardware("h200");
  EXPECT_THROW(plan(make_problem(Op::kGemmAllReduce, 0, 8192, 8192, 8), hw), Error);
  EXPECT_THROW(plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8190, 8), hw), Error);      // K not a multiple of 8
  EXPECT_THROW(plan(make_problem(Op::kGemmReduceScatter, 8192, 8192, 8192, 3), hw), Error);  // 3 does not divide M
  EXPECT_THROW(plan(make_problem(Op::kAllGatherGemm, 8192, 8192, 8192, 0), hw), Error);
  EXPECT_THROW(plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 12), hw), Error);  // 12 GPUs, 8 per node
  Hardware bad = hw;
  bad.sm_count = 0;
  EXPECT_THROW(plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), bad), Error);
  PlannerOptions o;
  o.simulate_top = 0;
  EXPECT_THROW(plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), hw, o), Error);
}

TEST(Planner, JsonAndTableForTheCli) {
  const Hardware hw = builtin_hardware("h200");
  const PlanResult r = plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), hw);
  const nlohmann::json j = r;
  for (const char* key : {"mode", "gemm_sms", "comm_sms", "tile_groups"}) EXPECT_TRUE(j["plan"].contains(key)) << key;
  EXPECT_TRUE(j["predicted_us"].is_number());
  EXPECT_TRUE(j["sequential_us"].is_number());
  ASSERT_TRUE(j["alternatives"].is_array());
  ASSERT_FALSE(j["alternatives"].empty());
  for (const auto& a : j["alternatives"]) {
    EXPECT_TRUE(a["mode"].is_string());
    EXPECT_TRUE(a["comm_sms"].is_number());
    EXPECT_TRUE(a["predicted_us"].is_number());
    EXPECT_EQ(a["plan"].get<Plan>().mode, parse_mode(a["mode"].get<std::string>()));  // round-trips
  }
  const std::string table = format_plan_result(r);
  EXPECT_NE(table.find("predicted_us"), std::string::npos);
  EXPECT_NE(table.find("sequential"), std::string::npos);
}

TEST(Planner, PredictiveGroupsCoverTheTilesInWholeUnits) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan base = default_plan(Mode::kTileSignal, p, hw, 32);
  for (int max_groups : {1, 4, 64}) {
    const std::vector<int> g = predictive_groups(p, base, hw, base.tiles_n(p), max_groups);
    EXPECT_EQ(std::accumulate(g.begin(), g.end(), int64_t{0}), base.tile_count(p));
    EXPECT_LE(static_cast<int>(g.size()), max_groups);
    for (int size : g) EXPECT_EQ(size % base.tiles_n(p), 0);
  }
}

TEST(Planner, FastEnoughForTheCommandLine) {
  // The bench (bench_planner) measures the 100 ms budget in a Release build; here a loose 2 s bound catches a
  // search that has blown up, whatever the build type.
  const Hardware hw = builtin_hardware("h200");
  const auto t0 = std::chrono::steady_clock::now();
  const PlanResult r = plan(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), hw);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 2000.0);
  RecordProperty("plan_ms", std::to_string(ms));
  EXPECT_GT(r.candidates, 50);
}

}  // namespace
}  // namespace ovl::sim
