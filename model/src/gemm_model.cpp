// GEMM time on n SMs: waves of tiles at the per-SM matrix rate, an HBM floor with L2 reuse, launch and epilogue.
#include <algorithm>
#include <cmath>

#include "model_detail.hpp"
#include "ovl/error.hpp"

namespace ovl::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

// Stream-K's costs in k-block times (one tile-k-block on one SM; ~0.85 us on the H200): a piece writes its 128 KB
// fp32 partial (~2 us), the last piece reads each of the tile's partials back (~2.5 us each).
constexpr double kPieceWriteKBlocks = 2.4;
constexpr double kPieceReadKBlocks = 3.0;
// The most k ranges a tile is split into (our stream-K plans; cuBLAS's split-K on fewer tiles than SMs).
constexpr int64_t kMaxSplits = 16;

// A split stream-K plan's time and SM-time, in tile times (a tile: k_blocks k-blocks on one SM), without the clock:
// whole rounds of the first tiles, rounds of pieces (a piece's k-blocks and its partial's write), then the last
// piece's read of its tile's partials. choose_stream_k compares plans by `rounds`; gemm_timing also uses `work`.
struct StreamKRounds {
  double rounds = 0, work = 0;
};
StreamKRounds stream_k_rounds(int64_t tiles, int64_t k_blocks, int sms, TailPlan sk) {
  if (sk.half_tiles > 0) {  // whole rounds, then rounds of halves
    const int64_t whole = tiles - sk.half_tiles, halves = 2 * int64_t(sk.half_tiles);
    return {double(ceil_div(whole, sms)) + double(ceil_div(halves, sms)) * kHalfTileTime,
            double(whole) + double(halves) * kHalfTileTime};
  }
  const int64_t whole = tiles - sk.tiles, pieces = int64_t(sk.tiles) * sk.splits;
  const double kb = double(k_blocks);
  const double piece = (double(ceil_div(k_blocks, sk.splits)) + kPieceWriteKBlocks) / kb;
  const double read = kPieceReadKBlocks / kb;
  return {double(ceil_div(whole, sms)) + double(ceil_div(pieces, sms)) * piece + sk.splits * read,
          double(whole) + double(pieces) * (piece + read)};
}

namespace {

// Operand bytes (A rows + B columns) the tiles of a block of `b` tiles read, for a visiting order. Continuous in
// b (average band counts, not rounded) so that per-tile traffic only falls as blocks grow.
// Row-band: b consecutive tiles of row-major tile order span b / tiles_n bands (at least one) and min(b, tiles_n)
// columns. Swizzle (and cuBLAS, and explicit orders, assumed blocked): a block as square in bytes as the grid allows.
double block_panel_bytes(double b, int64_t tiles_m, int64_t tiles_n, const TileShape& t, TileOrder order,
                         double k_bytes) {
  double bm = 0, bn = 0;
  if (order == TileOrder::kRowBand) {
    bn = std::min(b, double(tiles_n));
    bm = std::max(1.0, b / double(tiles_n));
  } else {
    bm = std::clamp(std::sqrt(b * t.n / t.m), 1.0, double(tiles_m));
    bn = std::clamp(b / bm, 1.0, double(tiles_n));
    bm = std::clamp(b / bn, 1.0, double(tiles_m));
  }
  return (bm * t.m + bn * t.n) * k_bytes;
}

// HBM bytes of a GEMM whose `concurrent` tiles run at once: the tiles are walked in blocks whose operand panels
// stay in the L2 share; each block reads its panels once. A block holds at least the tiles in flight (a wave),
// and at most the whole grid (then A and B are each read once). The operands' reads and C's write apart.
struct HbmBytes {
  double operands = 0, c = 0;
};
HbmBytes gemm_hbm_bytes(const GemmShape& s, int64_t tiles_m, int64_t tiles_n, const TileShape& t, TileOrder order,
                        int64_t concurrent, const Hardware& hw) {
  const double e = dtype_bytes(s.dtype);
  const double k_bytes = double(s.k) * e;
  const double tiles = double(tiles_m * tiles_n);
  const double l2 = hw.spec.l2_bytes * kL2OperandShare;
  // Largest block that fits the L2 share (bisection: panel bytes grow with the block), unless the tiles in
  // flight alone overflow it.
  double lo = 1;
  const double in_flight = std::min(double(concurrent), tiles);
  if (block_panel_bytes(in_flight, tiles_m, tiles_n, t, order, k_bytes) < l2) {
    double hi = tiles;
    if (block_panel_bytes(hi, tiles_m, tiles_n, t, order, k_bytes) <= l2) {
      lo = hi;
    } else {
      lo = in_flight;
      for (int it = 0; it < 20 && hi - lo > 1; ++it) {
        const double mid = std::floor((lo + hi) / 2);
        if (block_panel_bytes(mid, tiles_m, tiles_n, t, order, k_bytes) <= l2)
          lo = mid;
        else
          hi = mid;
      }
    }
  }
  const double block = std::clamp(std::max(lo, double(concurrent)), 1.0, tiles);
  const double operands = tiles / block * block_panel_bytes(block, tiles_m, tiles_n, t, order, k_bytes);
  const double a_plus_b = double(s.m) * double(s.k) * e + double(s.k) * double(s.n) * e;
  // C: the inputs' type, or bf16 / fp16 for FP8 inputs (Problem::out_dtype; 2 bytes either way).
  const double c = double(s.m) * double(s.n) * (is_fp8(s.dtype) ? 2.0 : e);
  return {std::max(operands, a_plus_b), c};
}

}  // namespace


GemmTiming gemm_timing(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile_in, TileOrder order,
                       const Hardware& hw, GemmRegime regime, bool partition_penalty, TailPlan stream_k) {
  OVL_CHECK(shape.m > 0 && shape.n > 0 && shape.k > 0, "GEMM shape {}x{}x{} must be positive", shape.m, shape.n,
            shape.k);
  OVL_CHECK(sms >= 1 && sms <= hw.spec.sm_count, "GEMM sms = {} must be in [1, {}] (sm_count)", sms, hw.spec.sm_count);
  const TileShape tile = impl == GemmImpl::kCublas ? kCublasTile : tile_in;
  OVL_CHECK(tile.m > 0 && tile.n > 0, "GEMM tile {}x{} must be positive", tile.m, tile.n);
  const TileOrder walk = impl == GemmImpl::kCublas ? TileOrder::kSwizzle : order;

  GemmTiming g;
  g.sms = sms;
  const int64_t tiles_m = ceil_div(shape.m, tile.m);
  const int64_t tiles_n = ceil_div(shape.n, tile.n);
  g.tiles = tiles_m * tiles_n;
  g.waves = ceil_div(g.tiles, sms);
  // Every tile costs a full tile (wgmma pads the edges). Matrix rate in FLOP per microsecond, at the full-device
  // clock; matrix_clock_factor scales it for the SMs actually busy.
  const double tile_flops = 2.0 * tile.m * tile.n * double(shape.k);
  const HbmBytes hbm = gemm_hbm_bytes(shape, tiles_m, tiles_n, tile, walk, std::min<int64_t>(sms, g.tiles), hw);
  g.hbm_bytes = hbm.operands + hbm.c;
  const double rate = hw.spec.matrix_tflops_per_sm * 1e6 * matrix_rate_scale(shape.dtype);
  // An FP8 k-block holds twice tile.k elements in the same bytes (ovl::kernels::gemm_tile_shape).
  const int64_t k_blocks = ceil_div(shape.k, is_fp8(shape.dtype) ? 2 * int64_t(tile.k) : int64_t(tile.k));
  if (impl == GemmImpl::kOvl) {
    // Our persistent kernel: tile i runs in wave i / sms; the last wave costs a full wave however full it is, and
    // the epilogue (store + signal) is not overlapped with the next tile's main loop. The clock follows the mean
    // number of busy SMs over the kernel, tiles / waves (the power controller averages over milliseconds).
    g.busy_sms = double(g.tiles) / double(g.waves);
    g.waves_used = double(g.waves);
    if (stream_k.tiles > 0 || stream_k.half_tiles > 0) {
      // Split stream-K: whole rounds of the first tiles, then rounds of pieces of the last stream_k.tiles, then the
      // last piece's read of its tile's partials; half tiles: whole rounds, then rounds of halves; in tile times (a
      // tile is k_blocks k-blocks).
      OVL_CHECK(stream_k.half_tiles > 0
                    ? stream_k.tiles == 0 && stream_k.half_tiles <= g.tiles
                    : stream_k.tiles <= g.tiles && stream_k.splits >= 2,
                "tail plan of {} stream-K tiles in {} splits, {} half tiles does not fit {} tiles", stream_k.tiles,
                stream_k.splits, stream_k.half_tiles, g.tiles);
      const StreamKRounds r = stream_k_rounds(g.tiles, k_blocks, sms, stream_k);
      g.waves_used = r.rounds;
      g.busy_sms = std::min(double(sms), r.work / r.rounds);
    }
    g.clock_factor = matrix_clock_factor(hw, g.busy_sms);
    // The main loop waits on the operand loads that miss the L2 (gemm_l2_miss_cost): every tile loads its A and B
    // panels through the L2, the HBM reads above are the misses among them.
    const double loads = double(g.tiles) * double(tile.m + tile.n) * double(shape.k) * dtype_bytes(shape.dtype);
    g.l2_miss_factor = 1.0 + hw.fit.gemm_l2_miss_cost * std::clamp(hbm.operands / loads, 0.0, 1.0);
    g.tile_us =
        tile_flops * g.clock_factor * g.l2_miss_factor / (rate * hw.fit.gemm_efficiency) + hw.fit.tile_epilogue_us;
  } else {
    // cuBLAS balances its tail (its heuristics and stream-K), so from one wave of tiles on it scales with
    // tiles / sms and keeps every SM of the partition busy. With at most sms / 2 tiles it splits K (split-K) into s
    // pieces a tile, tiles x s <= sms, priced as our stream-K's pieces (each writes its partial, the last reads
    // them): the s with the shortest time at the clock of its busy SMs, or one wave of whole tiles where none is
    // shorter. On a partition it may lose a further fixed fraction of its matrix rate (cublas_partition_penalty,
    // ramping in over the first granule of SMs removed; 0 on the H200 as measured).
    const double removed = double(hw.spec.sm_count - sms);
    const double penalty =
        partition_penalty ? hw.fit.cublas_partition_penalty * std::min(1.0, removed / hw.spec.sm_granularity) : 0.0;
    g.waves_used = std::max(1.0, double(g.tiles) / sms);
    g.busy_sms = double(std::min<int64_t>(sms, g.tiles));
    g.clock_factor = matrix_clock_factor(hw, g.busy_sms);
    for (int64_t s = 2; s <= std::min({int64_t(sms) / g.tiles, k_blocks, kMaxSplits}); ++s) {
      const double rounds = stream_k_rounds(g.tiles, k_blocks, sms, TailPlan{int(g.tiles), int(s)}).rounds;
      const double clock = matrix_clock_factor(hw, double(g.tiles * s));
      if (rounds * clock < g.waves_used * g.clock_factor) {
        g.waves_used = rounds;
        g.busy_sms = double(g.tiles * s);
        g.clock_factor = clock;
      }
    }
    g.tile_us = tile_flops * g.clock_factor * (1.0 + penalty) / (rate * hw.fit.cublas_efficiency) +
                hw.fit.cublas_tile_epilogue_us;
  }
  // The power state: inside an operator the SMs clock higher (or lower) than in a sustained stream of GEMMs, which
  // scales the matrix work and the epilogue alike; the HBM floor and the launch do not depend on the SM clock.
  g.tile_us *= gemm_regime_factor(hw, regime);
  g.compute_us = g.waves_used * g.tile_us;
  // An SM loads at most what one copy CTA moves: few SMs cannot pull the whole HBM bandwidth.
  const double bw = std::min(hw.spec.hbm_GBps, sms * hw.fit.per_cta_copy_GBps) * kBytesPerUsPerGBps;
  g.memory_us = g.hbm_bytes / bw;
  g.body_us = std::max(g.compute_us, g.memory_us);
  g.launch_us = hw.fit.launch_us;
  return g;
}

}  // namespace ovl::detail

namespace ovl {

double matrix_rate_scale(DType dtype) { return dtype == DType::kFP32 ? 0.5 : is_fp8(dtype) ? 2.0 : 1.0; }

double gemm_regime_factor(const Hardware& hw, GemmRegime regime) {
  return regime == GemmRegime::kOperator ? hw.fit.operator_gemm_factor : 1.0;
}

TailPlan choose_stream_k(int64_t tiles, int64_t k_blocks, int sms) {
  TailPlan choice;
  if (tiles <= 0 || k_blocks < 2 || sms <= 0 || tiles % sms == 0 || tiles > (int64_t(1) << 30)) return choice;
  // Whole tiles take ceil(tiles / sms) rounds (fewer tiles than SMs: one).
  double best = double((tiles + sms - 1) / sms) * (1.0 - kStreamKMinGain);
  // The last tiles % sms tiles, plus q whole rounds, cut into s pieces each; the rest stay whole tiles, in full
  // rounds, and the pieces follow round-robin.
  for (int q = 0; q <= 2; ++q) {
    const int64_t n = tiles % sms + int64_t(q) * sms;
    if (n > tiles) break;
    for (int s = 2; s <= std::min<int64_t>(k_blocks, detail::kMaxSplits); ++s) {
      const TailPlan candidate{int(n), s};
      const double rounds = detail::stream_k_rounds(tiles, k_blocks, sms, candidate).rounds;
      if (rounds < best) {
        best = rounds;
        choice = candidate;
      }
    }
  }
  return choice;
}

TailPlan choose_tail_plan(int64_t tiles, int64_t k_blocks, int sms) {
  const TailPlan stream_k = choose_stream_k(tiles, k_blocks, sms);
  if (tiles <= 0 || sms <= 0 || tiles > (int64_t(1) << 30)) return stream_k;
  const int64_t last = tiles % sms;
  if (last == 0 || 2 * last > sms) return stream_k;
  const TailPlan halves{0, 0, int(last)};
  const double rounds = detail::stream_k_rounds(tiles, k_blocks, sms, halves).rounds;
  const double whole = double((tiles + sms - 1) / sms);
  if (rounds > whole * (1.0 - kHalfTileMinGain)) return stream_k;
  if (stream_k.tiles > 0 && detail::stream_k_rounds(tiles, k_blocks, sms, stream_k).rounds <= rounds) return stream_k;
  return halves;
}

int choose_swizzle(int64_t k_blocks) {
  OVL_CHECK(k_blocks >= 1, "choose_swizzle: k_blocks = {} must be positive", k_blocks);
  return k_blocks >= kTallSwizzleMinKBlocks ? 16 : 8;
}

bool choose_split_epilogue(int64_t tiles, int64_t k_blocks, int sms, bool b_mn_major) {
  OVL_CHECK(tiles >= 1, "choose_split_epilogue: tiles = {} must be positive", tiles);
  OVL_CHECK(k_blocks >= 1, "choose_split_epilogue: k_blocks = {} must be positive", k_blocks);
  OVL_CHECK(sms >= 1, "choose_split_epilogue: sms = {} must be positive", sms);
  if (b_mn_major) return false;
  // rounds x k_blocks <= max, without forming the product (no overflow for any positive inputs).
  const int64_t rounds = (tiles - 1) / sms + 1;
  return k_blocks <= kSplitEpilogueMaxCtaKBlocks && rounds <= kSplitEpilogueMaxCtaKBlocks / k_blocks;
}

double matrix_clock_factor(const Hardware& hw, double busy_sms) {
  if (hw.fit.clock_exponent == 0.0) return 1.0;
  const double busy = std::clamp(busy_sms, hw.fit.clock_knee_sms, double(hw.spec.sm_count));
  return std::pow(busy / double(hw.spec.sm_count), hw.fit.clock_exponent);
}

}  // namespace ovl
