// The loopback collective's range table against the buffers it indexes, on the CPU: for random problems (M off the
// 128-row tile, odd worlds, all three operators) and every kind of plan the executor runs (sequential, decomposed
// chunks, tile groups of whole row bands and swizzle bands, the planner's candidates), every (unit, owner) piece of
// either played share reads and writes inside its buffers (the sizes the Context allocates, checked here
// against the sizes the operators define), each destination element is written exactly once per call, and the units
// cover the rows in order. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../core/src/loopback_ranges.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl::detail {
namespace {

// [begin, end) in elements of one buffer.
using Span = std::pair<int64_t, int64_t>;

// One buffer's writes: the spans must not overlap and must cover [0, size) exactly.
void expect_exact_cover(std::vector<Span> spans, int64_t size, const std::string& what) {
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const Span& s : spans) {
    ASSERT_EQ(s.first, at) << what << ": a gap or an overlap at element " << at;
    at = s.second;
  }
  EXPECT_EQ(at, size) << what << ": the writes end at " << at << " of " << size << " elements";
}

// Every piece of the played share (LoopbackArguments' definition) inside its buffers; each rank's destination
// written exactly once (whole world: every rank's; rank 0: rank 0's).
void check_table(const Problem& p, const Plan& plan, int w, bool whole_world) {
  const std::string what = p.name() + " plan " + plan.summary() + (whole_world ? " whole-world" : " rank0");
  SCOPED_TRACE(what);
  // The units themselves (in order, covering [0, M)) are checked by Plan.UnitsAndOwnersCoverEveryRowOnce.
  const std::vector<UnitRows> units = unit_rows(p, plan);
  const std::vector<kernels::LoopbackRange> table = loopback_range_table(p, units, w);
  const size_t count = units.size();
  ASSERT_EQ(table.size(), count * size_t(w));

  // The buffers' sizes, as the operators define them (src: rank r's input to the collective, dst: its output).
  const int64_t mb = p.m / w;
  const LoopbackBufferElements allocated = loopback_buffer_elements(p, w);
  const int64_t src_size = p.op == Op::kAllGatherGemm ? mb * p.k : p.m * p.n;
  const int64_t dst_size = p.op == Op::kGemmReduceScatter ? mb * p.n
                           : p.op == Op::kGemmAllReduce   ? p.m * p.n
                                                          : p.m * p.k;
  ASSERT_EQ(allocated.src, src_size);
  ASSERT_EQ(allocated.dst, dst_size);

  std::vector<std::vector<Span>> writes(static_cast<size_t>(w));
  const int64_t vector = 16 / dtype_bytes(p.comm_dtype());  // elements of what moves (FP8 A: 16)
  auto read = [&](int64_t offset, int64_t n, int64_t size, const std::string& buffer, size_t u, int r) {
    EXPECT_TRUE(offset >= 0 && n >= 0 && offset + n <= size)
        << buffer << " [" << offset << ", " << offset + n << ") of " << size << " elements, unit " << u << " owner "
        << r;
  };
  auto write = [&](int d, int64_t offset, int64_t n, size_t u, int r) {
    read(offset, n, dst_size, "dst_" + std::to_string(d), u, r);
    writes[size_t(d)].emplace_back(offset, offset + n);
  };
  for (size_t u = 0; u < count; ++u) {
    for (int r = 0; r < w; ++r) {
      const kernels::LoopbackRange& e = table[u * size_t(w) + size_t(r)];
      ASSERT_GE(e.count, 0);
      EXPECT_TRUE(e.src_offset % vector == 0 && e.dst_offset % vector == 0 && e.count % vector == 0)
          << "not 16-byte vectors";
      if (e.count == 0) continue;
      switch (p.op) {
        case Op::kGemmReduceScatter:  // sum of every src_p, into owner r's output
          if (!whole_world && r != 0) break;
          for (int q = 0; q < w; ++q) read(e.src_offset, e.count, src_size, "src_" + std::to_string(q), u, r);
          write(whole_world ? r : 0, e.dst_offset, e.count, u, r);
          break;
        case Op::kGemmAllReduce:
          if (whole_world || r == 0) {  // sum of every src_p, into every output (whole world) or rank 0's
            for (int q = 0; q < w; ++q) read(e.src_offset, e.count, src_size, "src_" + std::to_string(q), u, r);
            for (int d = 0; d < (whole_world ? w : 1); ++d) write(d, e.dst_offset, e.count, u, r);
          } else {  // rank 0 copies peer r's reduced piece from dst_r
            read(e.src_offset, e.count, dst_size, "dst_" + std::to_string(r), u, r);
            write(0, e.dst_offset, e.count, u, r);
          }
          break;
        case Op::kAllGatherGemm:  // owner r's rows, into every gathered A (whole world) or rank 0's
          read(e.src_offset, e.count, src_size, "src_" + std::to_string(r), u, r);
          for (int d = 0; d < (whole_world ? w : 1); ++d) write(d, e.dst_offset, e.count, u, r);
          break;
      }
    }
  }
  for (int d = 0; d < (whole_world ? w : 1); ++d)
    expect_exact_cover(writes[size_t(d)], dst_size, "dst_" + std::to_string(d));
}

// Signal modes: the tile groups, in tiles and tile rows, and the tile-major staging the reorder reads.
void check_groups(const Problem& p, const Plan& plan) {
  SCOPED_TRACE(p.name() + " plan " + plan.summary());
  const std::vector<UnitRows> units = unit_rows(p, plan);
  ASSERT_EQ(units.size(), plan.tile_groups.size());
  for (const UnitRows& u : units) {
    EXPECT_LE(u.tile_row_end, plan.tiles_m(p));
    EXPECT_EQ(u.end, std::min<int64_t>(u.tile_row_end * plan.tile.m, p.m));
  }
  // The reorder reads tile (row / tile.m) * tiles_n + col / tile.n of the tile-major staging for every row < M and
  // column < N, at most tile_count x tile.m x tile.n elements; the staging holds gemm_output_bytes of the GEMM.
  kernels::GemmArguments g;
  g.m = int(p.m);
  g.n = int(p.n);
  g.k = int(p.k);
  g.output_layout = OutputLayout::kTileMajor;
  const int64_t reorder_reads = plan.tile_count(p) * plan.tile.m * plan.tile.n * 2;
  EXPECT_GE(int64_t(kernels::gemm_output_bytes(g)), reorder_reads);
}

// The plans the executor runs for p: sequential, decomposed with every chunk count dividing M up to 16, and in
// tiles of the GEMM's shape groups of 1..16 whole row bands and of whole swizzle bands.
std::vector<Plan> plans_for(const Problem& p, const Hardware& hw) {
  std::vector<Plan> out;
  out.push_back(default_plan(Mode::kSequential, p, hw, 16));
  for (int chunks = 1; chunks <= 16; ++chunks) {
    if (p.m % chunks != 0) continue;
    Plan d = default_plan(Mode::kDecomposed, p, hw, 16);
    d.chunks = chunks;
    out.push_back(d);
  }
  const kernels::GemmTileShape t = kernels::gemm_tile_shape();
  Plan s = default_plan(Mode::kTileSignal, p, hw, 16);
  s.tile.m = t.m;
  s.tile.n = t.n;
  const int64_t tm = s.tiles_m(p), tn = s.tiles_n(p);
  for (int groups = 1; groups <= std::min<int64_t>(tm, 16); ++groups) {
    s.tile_order = TileOrder::kRowBand;
    s.tile_groups = band_groups(tm, tn, groups);
    out.push_back(s);
    if (groups <= swizzle_bands(tm)) {
      s.tile_order = TileOrder::kSwizzle;
      s.tile_groups = swizzle_band_groups(tm, tn, groups);
      out.push_back(s);
    }
  }
  return out;
}

Problem problem(Op op, int64_t m, int64_t n, int64_t k, int world, DType dtype = DType::kFP16) {
  Problem p = make_problem(op, m, n, k, world);
  p.dtype = dtype;
  p.gpus_per_node = std::max(8, world);
  p.validate();
  return p;
}

void check_problem(const Problem& p, const Hardware& hw) {
  for (const Plan& plan : plans_for(p, hw)) {
    for (bool whole : {false, true}) check_table(p, plan, p.world, whole);
    if (mode_signals(plan.mode)) check_groups(p, plan);
    if (testing::Test::HasFailure()) return;  // the first failing plan is enough to read
  }
}

// The problem of the soak's illegal access: GEMM+RS 2040 x 1024 x 8192 fp16 in a loopback world of 5 (408 rows per
// rank, M off the 128-row tile), with every plan above and the planner's candidates for the whole-world loopback.
// The model deals the loopback mover's units (ovl::tma_mover_link_load) in stages of kTmaMoverStageBytes: the
// movers' default ring.
TEST(LoopbackRanges, TheModelsMoverStageIsTheRingsStage) {
  EXPECT_EQ(kTmaMoverStageBytes, int64_t(kernels::kDefaultTmaRing.stage_bytes));
}

TEST(LoopbackRanges, ReduceScatter2040RowsWorld5) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = problem(Op::kGemmReduceScatter, 2040, 1024, 8192, 5);
  check_problem(p, hw);
  const sim::PlanResult r = sim::plan(p, loopback_hardware(hw, 5, LoopbackShare::kWholeWorld));
  ASSERT_FALSE(r.alternatives.empty());
  for (const sim::PlanAlternative& alt : r.alternatives) {
    if (alt.plan.mode == Mode::kDecomposed && p.m % alt.plan.chunks != 0) continue;  // can_run refuses these
    for (bool whole : {false, true}) check_table(p, alt.plan, 5, whole);
  }
  check_table(p, r.sequential, 5, true);
}

// Random problems as the soak draws them: every operator, worlds 1..8, N a multiple of 8 (often off the 256-column
// tile). fp16: M a multiple of 8 per rank (often off the tile), K a multiple of 8. FP8 (e4m3; the ranges count
// elements of what moves: an AllGather's FP8 A in bytes, the output's bf16 partial sums): K a multiple of 16 and any
// row count per rank (FP8 rows are whole 16-byte vectors).
void check_random_problems(DType dtype, int count, uint64_t seed) {
  const Hardware hw = builtin_hardware("h200");
  const bool fp8 = is_fp8(dtype);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count && !testing::Test::HasFailure(); ++i) {
    const Op op = Op(rng() % 3);
    const int w = int(1 + rng() % 8);
    const int64_t unit = (op == Op::kGemmAllReduce ? 1 : w) * (fp8 ? 1 : 8);
    const int64_t m = unit * int64_t(1 + rng() % uint64_t(4096 / unit));
    const int64_t n = 8 * int64_t(1 + rng() % 512);
    const int64_t k = fp8 ? 16 * int64_t(1 + rng() % 64) : 8 * int64_t(1 + rng() % 128);
    check_problem(problem(op, m, n, k, w, dtype), hw);
  }
}

TEST(LoopbackRanges, RandomProblemsEveryPlanStayInsideTheirBuffers) { check_random_problems(DType::kFP16, 300, 2040); }
TEST(LoopbackRanges, Fp8ProblemsEveryPlanStayInsideTheirBuffers) { check_random_problems(DType::kE4M3, 200, 8); }

}  // namespace
}  // namespace ovl::detail
