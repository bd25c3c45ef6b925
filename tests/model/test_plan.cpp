// Plan: defaults, validation (each bad field named), groups, JSON round trip.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"

namespace ovl {
namespace {

using test::expect_error_naming;

Problem ar8192() {
  Problem p;
  p.m = p.n = p.k = 8192;
  p.world = 8;
  return p;
}

TEST(Plan, Names) {
  for (Mode m : all_modes()) EXPECT_EQ(parse_mode(to_string(m)), m);
  for (CommAlgo a : {CommAlgo::kNcclRing, CommAlgo::kNcclNvls, CommAlgo::kTmaPush, CommAlgo::kTmaPull,
                     CommAlgo::kCopyEngine, CommAlgo::kNcclSymmetric}) {
    EXPECT_EQ(parse_comm_algo(to_string(a)), a);
  }
  EXPECT_EQ(to_string(CommAlgo::kCopyEngine), "ce");
  EXPECT_EQ(to_string(CommAlgo::kNcclSymmetric), "nccl-symmetric");
  for (CtaPolicy c : {CtaPolicy::kDefault, CtaPolicy::kEfficiency, CtaPolicy::kZero})
    EXPECT_EQ(parse_cta_policy(to_string(c)), c);
  expect_error_naming([] { parse_cta_policy("fewest"); }, "fewest");
  for (TileOrder o : {TileOrder::kRowBand, TileOrder::kSwizzle, TileOrder::kExplicit})
    EXPECT_EQ(parse_tile_order(to_string(o)), o);
  for (OutputLayout l : {OutputLayout::kRowMajor, OutputLayout::kTileMajor})
    EXPECT_EQ(parse_output_layout(to_string(l)), l);
  expect_error_naming([] { parse_mode("flash"); }, "flash");
  expect_error_naming([] { parse_comm_algo("mpi"); }, "mpi");
}

// comm_algo ce: mode tile-signal only, row-major output, groups of whole row bands; the GEMM keeps every SM; the
// summary names it.
TEST(Plan, CopyEngineGoesWithTileSignalOnly) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    Problem p = ar8192();
    p.op = op;
    Plan ce = default_plan(Mode::kTileSignal, p, hw, 8);
    ce.comm_algo = CommAlgo::kCopyEngine;
    EXPECT_NO_THROW(ce.validate(p, hw)) << to_string(op);
    EXPECT_NE(ce.summary().find("algo=ce"), std::string::npos) << ce.summary();
    EXPECT_EQ(signaled_gemm_grid(ce, p, hw), hw.spec.sm_count) << "nothing polls: the GEMM keeps every SM";
    EXPECT_FALSE(ce_sums_per_group(ce, hw.spec.sm_count)) << "the sum waits for the GEMM's SMs";
    Plan beside = ce;
    beside.gemm_sms = hw.spec.sm_count - ce.comm_ctas;
    EXPECT_TRUE(ce_sums_per_group(beside, hw.spec.sm_count)) << "the grid leaves the sum its CTAs";
    EXPECT_EQ(signaled_gemm_grid(beside, p, hw), hw.spec.sm_count - ce.comm_ctas);
    // In a loopback world the copies are same-device copies on SMs: AllGather+GEMM's grid leaves them comm_ctas, as
    // the executor sizes it (executor_ce.cpp reads the same function).
    const Hardware lb = loopback_hardware(hw, p.world, LoopbackShare::kRank0);
    EXPECT_EQ(signaled_gemm_grid(ce, p, lb),
              op == Op::kAllGatherGemm ? lb.spec.sm_count - ce.comm_ctas : lb.spec.sm_count)
        << to_string(op) << " in a loopback world";
    Plan tile_major = ce;
    tile_major.output = OutputLayout::kTileMajor;
    expect_error_naming([&] { tile_major.validate(p, hw); }, "tile-major");
    Plan partial_band = ce;
    partial_band.tile_groups = even_groups(ce.tile_count(p), int(ce.tile_count(p)));
    expect_error_naming([&] { partial_band.validate(p, hw); }, "copy engine");
    for (Mode mode : {Mode::kSequential, Mode::kDecomposed, Mode::kGreenContext, Mode::kTma}) {
      Plan other = default_plan(mode, p, hw, 8);
      other.comm_algo = CommAlgo::kCopyEngine;
      expect_error_naming([&] { other.validate(p, hw); }, "ce does not go with mode");
    }
  }
}

// comm_algo nccl-symmetric: the NCCL modes (not tma) on one node of distinct GPUs (no loopback world), at most 64
// CTAs; GEMM+RS and AG+GEMM only in whole-buffer units (one chunk, one group); cta_policy only with it.
TEST(Plan, NcclSymmetricGoesWithWholeBufferCollectives) {
  const Hardware hw = builtin_hardware("h200");
  auto sym = [&](Mode mode, const Problem& p) {
    Plan plan = default_plan(mode, p, hw, 16);
    plan.comm_algo = CommAlgo::kNcclSymmetric;
    plan.cta_policy = CtaPolicy::kEfficiency;
    return plan;
  };
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    Problem p = ar8192();
    p.op = op;
    const Plan seq = sym(Mode::kSequential, p);
    EXPECT_NO_THROW(seq.validate(p, hw)) << to_string(op);
    EXPECT_NE(seq.summary().find("algo=nccl-symmetric ctas=16 cta_policy=efficiency"), std::string::npos)
        << seq.summary();
    for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext}) {
      Plan plan = sym(mode, p);
      if (op == Op::kGemmAllReduce) {
        EXPECT_NO_THROW(plan.validate(p, hw)) << to_string(mode);
        continue;
      }
      // Each chunk or group would be one ncclReduce / ncclBroadcast per owner: refused, naming the mode.
      expect_error_naming([&] { plan.validate(p, hw); }, std::string(to_string(mode)));
      expect_error_naming([&] { plan.validate(p, hw); }, op == Op::kGemmReduceScatter ? "ncclReduce" : "ncclBroadcast");
      // One unit is the whole buffer: one ReduceScatter / AllGather.
      if (mode == Mode::kDecomposed) {
        plan.chunks = 1;
      } else {
        plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), 1);
      }
      EXPECT_NO_THROW(plan.validate(p, hw)) << to_string(mode) << " " << to_string(op);
    }
    Plan tma = sym(Mode::kTma, p);
    expect_error_naming([&] { tma.validate(p, hw); }, "tma");
  }
  const Problem p = ar8192();
  Plan many = sym(Mode::kSequential, p);
  many.comm_ctas = 65;
  expect_error_naming([&] { many.validate(p, hw); }, "at most 64");
  // Distinct GPUs of one node: a loopback world of 8 and two nodes are refused; a loopback world of 1 is NCCL's.
  expect_error_naming([&] { sym(Mode::kSequential, p).validate(p, loopback_hardware(hw, 8)); }, "loopback world");
  Problem one = p;
  one.world = 1;
  EXPECT_NO_THROW(sym(Mode::kSequential, one).validate(one, loopback_hardware(hw, 1)));
  Problem nodes = p;
  nodes.world = 16;
  expect_error_naming([&] { sym(Mode::kSequential, nodes).validate(nodes, hw); }, "one node");
  // A CTA policy belongs to nccl-symmetric.
  Plan ring = default_plan(Mode::kSequential, p, hw, 16);
  ring.cta_policy = CtaPolicy::kZero;
  expect_error_naming([&] { ring.validate(p, hw); }, "cta_policy");
  // Under CTA policy zero NCCL gathers on the copy engines (no CTA); the reductions keep their CTAs.
  Plan zero = sym(Mode::kSequential, p);
  zero.cta_policy = CtaPolicy::kZero;
  EXPECT_EQ(collective_ctas(zero, Collective::kAllGather), 0);
  EXPECT_EQ(collective_ctas(zero, Collective::kAllReduce), 16);
  EXPECT_EQ(collective_ctas(sym(Mode::kSequential, p), Collective::kAllGather), 16);
  EXPECT_EQ(collective_ctas(ring, Collective::kAllGather), 16);
}

TEST(Plan, Groups) {
  // 10 tiles in 3 groups: 4, 3, 3.
  EXPECT_EQ(even_groups(10, 3), (std::vector<int>{4, 3, 3}));
  // 2048 tiles (64 bands of 32) in 8 groups: 256 each = 8 whole bands.
  EXPECT_EQ(even_groups(2048, 8), std::vector<int>(8, 256));
  EXPECT_EQ(band_groups(64, 32, 8), std::vector<int>(8, 256));
  // 5 bands of 3 tiles in 2 groups: 3 bands (9 tiles) and 2 bands (6 tiles).
  EXPECT_EQ(band_groups(5, 3, 2), (std::vector<int>{9, 6}));
  EXPECT_THROW(even_groups(4, 5), Error);
  EXPECT_THROW(band_groups(4, 2, 5), Error);
  // Group sizes are ints: a larger group is refused, never truncated.
  EXPECT_THROW(even_groups(int64_t{1} << 32, 1), Error);
  EXPECT_EQ(even_groups(int64_t{1} << 32, 4), std::vector<int>(4, 1 << 30));
  EXPECT_THROW(band_groups(int64_t{1} << 20, int64_t{1} << 12, 1), Error);
}

TEST(Plan, SwizzleBandGroups) {
  // 20 tile rows = swizzle bands of 8, 8 and 4 rows; 3 tiles per row.
  EXPECT_EQ(swizzle_band_groups(20, 3, 1), (std::vector<int>{60}));
  EXPECT_EQ(swizzle_band_groups(20, 3, 2), (std::vector<int>{48, 12}));
  EXPECT_EQ(swizzle_band_groups(20, 3, 3), (std::vector<int>{24, 24, 12}));
  expect_error_naming([] { swizzle_band_groups(20, 3, 4); }, "groups = 4");
  expect_error_naming([] { swizzle_band_groups(0, 3, 1); }, "tiles_m = 0");
}

TEST(Plan, DefaultsValidate) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = ar8192();
  for (Mode mode : all_modes()) {
    for (int comm : {0, 8, 12, 16, 32}) {
      const Plan plan = default_plan(mode, p, hw, comm);
      EXPECT_NO_THROW(plan.validate(p, hw)) << plan.summary();
    }
  }
  // 8192 x 8192 in 128 x 256 tiles: 64 bands of 32 tiles; one group per band.
  const Plan ts = default_plan(Mode::kTileSignal, p, hw, 24);
  EXPECT_EQ(ts.tile_groups, std::vector<int>(64, 32));
  EXPECT_EQ(ts.gemm_sms, 132);
  EXPECT_EQ(ts.comm_ctas, 24);
  // Green context: 12 communication SMs round up to 16; the GEMM gets 132 - 16 = 116 (14 groups of 8 + the
  // remainder 4).
  const Plan gc = default_plan(Mode::kGreenContext, p, hw, 12);
  EXPECT_TRUE(gc.partitioned);
  EXPECT_EQ(gc.comm_sms, 16);
  EXPECT_EQ(gc.gemm_sms, 116);
  const Plan tma = default_plan(Mode::kTma, p, hw, 8);
  EXPECT_EQ(tma.comm_algo, CommAlgo::kTmaPush);
  EXPECT_EQ(tma.summary(),
            "tma gemm_sms=124 comm_sms=8 partitioned tile=128x256x64 order=row-band output=row-major "
            "groups=64 algo=tma-push ctas=8");
  EXPECT_EQ(fmt::format("{}", tma), tma.summary());
  EXPECT_EQ(default_plan(Mode::kDecomposed, p, hw, 16).chunks, 4);
}

TEST(Plan, AZeroTileIsAnErrorNotADivisionByZero) {
  const Problem p = ar8192();
  Plan plan = default_plan(Mode::kTileSignal, p, builtin_hardware("h200"), 16);
  plan.tile.n = 0;
  expect_error_naming([&] { (void)plan.tile_count(p); }, "\"tile.n\" = 0");
  plan.tile.n = 256;
  plan.tile.m = 0;
  expect_error_naming([&] { (void)plan.tiles_m(p); }, "\"tile.m\" = 0");
  expect_error_naming(
      [] {
        (void)estimate_gemm({4096, 4096, 4096}, GemmImpl::kOvl, 132, TileShape{128, 256, 0}, builtin_hardware("h200"));
      },
      "tile 128x256x0");
}

TEST(Plan, BelowHopperOnlyTheCublasModesOnNcclRun) {
  const Hardware a100 = builtin_hardware("a100");
  ASSERT_EQ(a100.spec.compute_capability, 80);
  Problem p = ar8192();
  for (Mode mode : all_modes()) {
    const Plan plan = default_plan(mode, p, a100, 16);
    if (mode_signals(mode)) {
      expect_error_naming([&] { plan.validate(p, a100); },
                          fmt::format("\"mode\" = {} runs ovl's Hopper GEMM", to_string(mode)));
    } else {
      EXPECT_NO_THROW(plan.validate(p, a100)) << plan.summary();
    }
  }
  Plan tma_after = default_plan(Mode::kSequential, p, a100, 16);
  tma_after.comm_algo = CommAlgo::kTmaPush;
  expect_error_naming([&] { tma_after.validate(p, a100); }, "\"comm_algo\" = tma-push runs on ovl's Hopper TMA");
  p.dtype = DType::kE4M3;
  expect_error_naming([&] { default_plan(Mode::kSequential, p, a100, 0).validate(p, a100); },
                      "A100 SXM is compute capability 8.0");
  EXPECT_NO_THROW(
      default_plan(Mode::kSequential, p, builtin_hardware("h100"), 0).validate(p, builtin_hardware("h100")));
  // sm_90a code does not run on a later architecture either.
  Hardware b200 = builtin_hardware("h200");
  b200.spec.compute_capability = 100;
  expect_error_naming([&] { default_plan(Mode::kTma, p, b200, 16).validate(p, b200); }, "compute capability 10.0");
}

TEST(Plan, EachBadFieldIsNamed) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = ar8192();
  struct Case {
    Mode mode;
    const char* needle;
    void (*mutate)(Plan&);
  };
  const Case cases[] = {
      {Mode::kTileSignal, "gemm_sms", [](Plan& q) { q.gemm_sms = 0; }},
      {Mode::kTileSignal, "gemm_sms", [](Plan& q) { q.gemm_sms = 140; }},
      {Mode::kTileSignal, "comm_ctas", [](Plan& q) { q.comm_ctas = 0; }},
      {Mode::kGreenContext, "comm_sms",
       [](Plan& q) {
         q.comm_sms = 12;
         q.comm_ctas = 12;
         q.gemm_sms = 120;
       }},
      {Mode::kGreenContext, "gemm_sms", [](Plan& q) { q.gemm_sms = 110; }},
      {Mode::kGreenContext, "exceed",
       [](Plan& q) {
         q.gemm_sms = 124;
         q.comm_sms = 16;
         q.comm_ctas = 16;
       }},
      {Mode::kGreenContext, "comm_ctas", [](Plan& q) { q.comm_ctas = 20; }},
      {Mode::kGreenContext, "partitioned", [](Plan& q) { q.partitioned = false; }},
      {Mode::kTileSignal, "partitioned", [](Plan& q) { q.partitioned = true; }},
      {Mode::kTileSignal, "tile_groups", [](Plan& q) { q.tile_groups.pop_back(); }},
      {Mode::kTileSignal, "tile_groups", [](Plan& q) { q.tile_groups = {}; }},
      {Mode::kTileSignal, "tile_groups", [](Plan& q) { q.tile_groups = even_groups(2048, 3); }},  // not whole bands
      {Mode::kTileSignal, "tile_order", [](Plan& q) { q.tile_order = TileOrder::kSwizzle; }},
      {Mode::kTma, "comm_algo", [](Plan& q) { q.comm_algo = CommAlgo::kNcclRing; }},
      {Mode::kTileSignal, "comm_algo", [](Plan& q) { q.comm_algo = CommAlgo::kTmaPull; }},
      {Mode::kDecomposed, "chunks", [](Plan& q) { q.chunks = 3; }},
      {Mode::kTileSignal, "explicit_order",
       [](Plan& q) {
         q.tile_order = TileOrder::kExplicit;
         q.explicit_order = {0, 1};
       }},
      {Mode::kTileSignal, "tile.m", [](Plan& q) { q.tile.m = 100; }},
      {Mode::kTileSignal, "tile.n", [](Plan& q) { q.tile.n = 300; }},
  };
  for (const auto& c : cases) {
    Plan plan = default_plan(c.mode, p, hw, 16);
    c.mutate(plan);
    expect_error_naming([&] { plan.validate(p, hw); }, c.needle);
  }
  // What a row-major NCCL plan forbids, TMA (which addresses tiles) and tile-major outputs allow.
  Plan tma = default_plan(Mode::kTma, p, hw, 16);
  tma.tile_order = TileOrder::kSwizzle;
  tma.tile_groups = even_groups(2048, 3);
  EXPECT_NO_THROW(tma.validate(p, hw));
  Plan tile_major = default_plan(Mode::kTileSignal, p, hw, 16);
  tile_major.output = OutputLayout::kTileMajor;
  tile_major.tile_order = TileOrder::kSwizzle;
  EXPECT_NO_THROW(tile_major.validate(p, hw));
  // Swizzle order with a row-major NCCL output: groups of whole swizzle bands (8 tile rows) are contiguous rows;
  // a group ending inside a swizzle band is named.
  Plan swz = default_plan(Mode::kTileSignal, p, hw, 16);
  swz.tile_order = TileOrder::kSwizzle;
  swz.tile_groups = swizzle_band_groups(swz.tiles_m(p), swz.tiles_n(p), 8);  // 8 swizzle bands, one per group
  EXPECT_NO_THROW(swz.validate(p, hw));
  swz.tile_groups = band_groups(swz.tiles_m(p), swz.tiles_n(p), 16);  // groups of 4 bands
  expect_error_naming([&] { swz.validate(p, hw); }, "inside a swizzle band");
  // An explicit order that keeps whole bands together is contiguous.
  Plan expl = default_plan(Mode::kTileSignal, p, hw, 16);
  expl.tile_order = TileOrder::kExplicit;
  expl.explicit_order.resize(2048);
  for (int i = 0; i < 2048; ++i) expl.explicit_order[size_t(i)] = (i / 32 * 37 % 64) * 32 + (31 - i % 32);
  EXPECT_NO_THROW(expl.validate(p, hw));
  std::swap(expl.explicit_order[0], expl.explicit_order[40]);
  expect_error_naming([&] { expl.validate(p, hw); }, "explicit_order");
}

TEST(Plan, JsonRoundTripAndMissingFields) {
  const Hardware hw = builtin_hardware("h200");
  Plan plan = default_plan(Mode::kTma, ar8192(), hw, 16);
  plan.comm_algo = CommAlgo::kTmaPull;
  plan.output = OutputLayout::kTileMajor;
  const nlohmann::json j = plan;
  const Plan back = j.get<Plan>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.summary(), plan.summary());
  for (const auto& [key, value] : j.items()) {
    nlohmann::json missing = j;
    missing.erase(key);
    expect_error_naming([&] { (void)missing.get<Plan>(); }, "\"" + key + "\"");
    nlohmann::json bad = j;
    bad[key] = key == "partitioned" ? nlohmann::json(3) : nlohmann::json(nullptr);
    expect_error_naming([&] { (void)bad.get<Plan>(); }, "\"" + key + "\"");
  }
  nlohmann::json neg = j;
  neg["comm_ctas"] = -1;
  expect_error_naming([&] { (void)neg.get<Plan>(); }, "\"comm_ctas\" = -1");
  nlohmann::json abc = j;
  abc["gemm_sms"] = "abc";
  expect_error_naming([&] { (void)abc.get<Plan>(); }, "\"gemm_sms\" = \"abc\"");
  nlohmann::json group = j;
  group["tile_groups"][2] = "x";
  expect_error_naming([&] { (void)group.get<Plan>(); }, "tile_groups[2]");

  // cta_policy: written and read only when not "default" (files without it read as default).
  EXPECT_FALSE(j.contains("cta_policy"));
  Plan sym = default_plan(Mode::kSequential, ar8192(), hw, 16);
  sym.comm_algo = CommAlgo::kNcclSymmetric;
  sym.cta_policy = CtaPolicy::kZero;
  const nlohmann::json js = sym;
  EXPECT_EQ(js.at("cta_policy"), "zero");
  EXPECT_EQ(js.get<Plan>().cta_policy, CtaPolicy::kZero);
  nlohmann::json bad_policy = js;
  bad_policy["cta_policy"] = "fewest";
  expect_error_naming([&] { (void)bad_policy.get<Plan>(); }, "fewest");
  bad_policy["cta_policy"] = 2;
  expect_error_naming([&] { (void)bad_policy.get<Plan>(); }, "\"cta_policy\"");

  const std::string path = ::testing::TempDir() + "ovl_plan_test.json";
  std::ofstream(path) << j.dump(2);
  EXPECT_EQ(nlohmann::json(load_plan(path)), j);
  std::ofstream(path) << "{\"mode\": \"tma\"}";
  expect_error_naming([&] { load_plan(path); }, path);
  std::remove(path.c_str());
}

// unit_rows and owner_rows on random problems (world 1..8, M off the tile and off the world, every mode's unit kind):
// the units cover M in order; each unit's owner parts cover it exactly once (AllReduce: W runs in order; RS / AG: the
// unit's rows cut at the owners' blocks, each part inside its owner's block at block_row).
TEST(Plan, UnitsAndOwnersCoverEveryRowOnce) {
  std::mt19937 rng(17);
  const Hardware hw = builtin_hardware("h200");
  for (int trial = 0; trial < 300; ++trial) {
    const int w = 1 + int(rng() % 8);
    const Op op = std::vector<Op>{Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}[rng() % 3];
    const int64_t m = int64_t(w) * (8 + int64_t(rng() % 600));
    const Problem p = make_problem(op, m, 8 * (1 + int64_t(rng() % 300)), 64 * (1 + int64_t(rng() % 40)), w);
    const Mode mode = std::vector<Mode>{Mode::kSequential, Mode::kDecomposed, Mode::kTileSignal}[rng() % 3];
    Plan plan = default_plan(mode, p, hw, 16);
    if (mode == Mode::kDecomposed) plan.chunks = 1 + int(rng() % 8);
    if (mode == Mode::kTileSignal) plan.tile_groups = even_groups(plan.tile_count(p), 1 + int(rng() % std::min<int64_t>(6, plan.tile_count(p))));
    const std::vector<UnitRows> units = unit_rows(p, plan);
    ASSERT_FALSE(units.empty());
    int64_t next = 0, tiles = 0;
    for (const UnitRows& u : units) {
      ASSERT_EQ(u.begin, next) << p.name() << " " << plan.summary();
      ASSERT_LE(u.begin, u.end);
      next = u.end;
      tiles += u.tiles;
      int64_t covered = u.begin, sum = 0;
      for (int r = 0; r < w; ++r) {
        const OwnerRows o = owner_rows(p, u.begin, u.end, r);
        if (o.rows() == 0) continue;
        sum += o.rows();
        if (op == Op::kGemmAllReduce) {
          EXPECT_EQ(o.begin, covered) << p.name();
          EXPECT_EQ(o.block_row, o.begin);
          covered = o.end;
        } else {
          const int64_t block = m / w;
          EXPECT_GE(o.begin, block * r);
          EXPECT_LE(o.end, block * (r + 1));
          EXPECT_EQ(o.block_row, o.begin - block * r);
        }
      }
      EXPECT_EQ(sum, u.end - u.begin) << p.name() << " " << plan.summary();
    }
    EXPECT_EQ(next, m) << p.name() << " " << plan.summary();
    if (mode == Mode::kTileSignal) EXPECT_EQ(tiles, plan.tile_count(p));
  }
  expect_error_naming([] { owner_rows(make_problem(Op::kGemmAllReduce, 64, 64, 64, 2), 0, 64, 2); }, "owner = 2");
}

}  // namespace
}  // namespace ovl
