// kModeTraits and kAlgoTraits against their readers: for every (mode, op, algorithm), Plan::validate, mode_refusal
// (the mode's part of Context::can_run) and the planner's candidates agree with what the tables say. A mode or an
// algorithm whose row and readers disagree fails here.
#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <string>

#include "ovl/error.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl {
namespace {

// "" when Plan::validate accepts, else its message.
std::string validation(const Plan& plan, const Problem& problem, const Hardware& hw) {
  try {
    plan.validate(problem, hw);
    return "";
  } catch (const Error& e) {
    return e.message();
  }
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// A plan of `mode` with `algo` that every reader takes where the tables allow the pair: one tile group or chunk (so
// nccl-symmetric's whole-buffer rule holds), NCCL's symmetric kernels under CTA policy efficiency.
Plan plan_of(Mode mode, CommAlgo algo, const Problem& problem, const Hardware& hw) {
  Plan p = default_plan(mode, problem, hw, 16);
  p.comm_algo = algo;
  if (algo == CommAlgo::kNcclSymmetric) p.cta_policy = CtaPolicy::kEfficiency;
  if (mode_signals(mode)) p.tile_groups = {int(p.tile_count(problem))};
  p.chunks = 1;
  return p;
}

constexpr Op kOps[] = {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm};

TEST(Modes, ValidateTakesExactlyTheTablesAlgorithms) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : kOps) {
    const Problem problem = make_problem(op, 8192, 8192, 4096, 8);
    for (const ModeTraits& t : kModeTraits) {
      for (const AlgoTraits& a : kAlgoTraits) {
        SCOPED_TRACE(fmt::format("{} {} {}", to_string(op), to_string(t.mode), to_string(a.algo)));
        const std::string why = validation(plan_of(t.mode, a.algo, problem, hw), problem, hw);
        if (t.takes(a.algo)) {
          EXPECT_EQ(why, "");
        } else {
          EXPECT_TRUE(contains(why, "does not go with mode")) << why;
          EXPECT_TRUE(contains(why, std::string(a.mode_hint.empty() ? t.algo_hint : a.mode_hint))) << why;
        }
      }
    }
  }
}

TEST(Modes, OneNodeAlgorithmsAreRefusedAcrossNodes) {
  const Hardware hw = builtin_hardware("h200");
  const Problem problem = make_problem(Op::kGemmAllReduce, 16384, 8192, 4096, 16);  // 2 nodes of 8
  ASSERT_EQ(problem.nodes(), 2);
  for (const ModeTraits& t : kModeTraits) {
    for (const AlgoTraits& a : kAlgoTraits) {
      if (!t.takes(a.algo)) continue;
      SCOPED_TRACE(fmt::format("{} {}", to_string(t.mode), to_string(a.algo)));
      const std::string why = validation(plan_of(t.mode, a.algo, problem, hw), problem, hw);
      EXPECT_EQ(why.empty(), !a.one_node) << why;
      if (a.one_node) EXPECT_TRUE(contains(why, "works within one node")) << why;
    }
  }
}

TEST(Modes, ValidateFollowsPartitioningAndSignals) {
  const Hardware hw = builtin_hardware("h200");
  const Problem problem = make_problem(Op::kGemmAllReduce, 8192, 8192, 4096, 8);
  for (const ModeTraits& t : kModeTraits) {
    SCOPED_TRACE(to_string(t.mode));
    for (bool partitioned : {false, true}) {
      Plan p = plan_of(t.mode, CommAlgo(std::countr_zero(t.algos)), problem, hw);
      p.partitioned = partitioned;
      p.comm_sms = p.comm_ctas = 16;
      p.gemm_sms = partitioned ? hw.spec.sm_count - 16 : hw.spec.sm_count;
      const bool allowed =
          partitioned ? t.partitioning != Partitioning::kNever : t.partitioning != Partitioning::kAlways;
      const std::string why = validation(p, problem, hw);
      EXPECT_EQ(why.empty(), allowed) << "partitioned = " << partitioned << ": " << why;
      if (!allowed) EXPECT_TRUE(contains(why, "plan field \"partitioned\"")) << why;
    }
    Plan p = plan_of(t.mode, CommAlgo(std::countr_zero(t.algos)), problem, hw);
    p.tile_groups.clear();
    const std::string why = validation(p, problem, hw);
    EXPECT_EQ(why.empty(), !t.signals()) << why;
    EXPECT_EQ(default_plan(t.mode, problem, hw, 16).tile_groups.empty(), !t.signals());
    EXPECT_EQ(unit_rows(problem, default_plan(t.mode, problem, hw, 16)).size() > 1, t.units != ModeUnits::kWhole);
  }
}

// Every mode runs every op with its default plan; a tile-major output only where the table says so.
TEST(Modes, ModeRefusalFollowsTheOutput) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : kOps) {
    const Problem problem = make_problem(op, 8192, 8192, 4096, 8);
    for (const ModeTraits& t : kModeTraits) {
      SCOPED_TRACE(fmt::format("{} {}", to_string(op), to_string(t.mode)));
      Plan p = default_plan(t.mode, problem, hw, 16);
      ASSERT_EQ(validation(p, problem, hw), "");
      EXPECT_EQ(mode_refusal(problem, p), "");
      p.output = OutputLayout::kTileMajor;
      const bool tile_major = t.tile_major && !(op == Op::kAllGatherGemm && t.signals());
      if (validation(p, problem, hw).empty()) EXPECT_EQ(mode_refusal(problem, p).empty(), tile_major);
    }
  }
}

// Every candidate the planner offers is one its mode is planned for, takes the algorithm of, Plan::validate accepts
// and mode_refusal does not refuse; every mode planned for the op has candidates. AllGather+GEMM is the one op with
// modes left out, which the planner's refusal of an empty list names.
TEST(Modes, PlannerCandidatesFollowTheTable) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : kOps) {
    const Problem problem = make_problem(op, 8192, 8192, 4096, 8);
    std::set<Mode> seen;
    for (const Plan& p : sim::candidate_plans(problem, hw)) {
      SCOPED_TRACE(p.summary());
      const ModeTraits& t = mode_traits(p.mode);
      EXPECT_TRUE(t.planned(op));
      EXPECT_TRUE(t.takes(p.comm_algo));
      EXPECT_EQ(validation(p, problem, hw), "");
      EXPECT_EQ(mode_refusal(problem, p), "");
      seen.insert(p.mode);
    }
    for (const ModeTraits& t : kModeTraits) {
      EXPECT_EQ(seen.count(t.mode) == 1, t.planned(op)) << to_string(op) << " " << to_string(t.mode);
      EXPECT_TRUE(op == Op::kAllGatherGemm || t.planned(op)) << to_string(t.mode);
    }
  }
  // "AllGather+GEMM is planned in the sequential and decomposed modes only (the signaling modes run it when asked
  // for, ...)".
  std::set<Mode> planned, run_only;
  for (const ModeTraits& t : kModeTraits) (t.planned(Op::kAllGatherGemm) ? planned : run_only).insert(t.mode);
  EXPECT_EQ(planned, (std::set<Mode>{Mode::kSequential, Mode::kDecomposed}));
  EXPECT_EQ(run_only, (std::set<Mode>{Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}));
  sim::PlannerOptions o;
  o.modes = {Mode::kTileSignal, Mode::kGreenContext, Mode::kTma};
  try {
    sim::candidate_plans(make_problem(Op::kAllGatherGemm, 8192, 8192, 4096, 8), hw, o);
    ADD_FAILURE() << "no error for AllGather+GEMM in the signaling modes only";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "planned in the sequential and decomposed modes only")) << e.message();
  }
}

// The executors launch the grid and the CTAs these give (Context::Impl::signaled_launch): on partitions the split's
// SMs bound them.
TEST(Modes, SignaledGridFollowsTheTable) {
  const Hardware hw = builtin_hardware("h200");
  const int sms = hw.spec.sm_count;
  for (Op op : kOps) {
    const Problem problem = make_problem(op, 8192, 8192, 4096, 8);
    for (const ModeTraits& t : kModeTraits) {
      if (!t.signals()) continue;
      for (const AlgoTraits& a : kAlgoTraits) {
        if (!t.takes(a.algo)) continue;
        SCOPED_TRACE(fmt::format("{} {} {}", to_string(op), to_string(t.mode), to_string(a.algo)));
        Plan p = plan_of(t.mode, a.algo, problem, hw);
        p.gemm_sms = p.partitioned ? sms - 16 : sms;
        const int grid = signaled_gemm_grid(p, problem, hw), ctas = signaled_comm_ctas(p, hw);
        if (p.partitioned) {
          EXPECT_EQ(grid, sms - 16);
          EXPECT_EQ(signaled_gemm_grid(p, problem, hw, sms - 24), sms - 24);
          EXPECT_EQ(signaled_comm_ctas(p, hw, 8), 8);
        } else if (t.persistent_comm || (op == Op::kAllGatherGemm && !a.copy_engines)) {
          EXPECT_EQ(grid, sms - ctas);
        } else {
          EXPECT_EQ(grid, a.copy_engines ? sms : sms - 1);
        }
        EXPECT_EQ(ctas, 16);
      }
    }
  }
}

}  // namespace
}  // namespace ovl
