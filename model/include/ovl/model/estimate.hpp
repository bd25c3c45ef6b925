// Closed-form estimates: GEMM time on n SMs, collective time, and each overlap mode's time, in microseconds.
// Cheap enough (well under a microsecond per call) for the planner to evaluate every SM split of every mode.
#pragma once

#include <cstdint>

#include "ovl/types.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"

namespace ovl {

enum class GemmImpl { kOvl, kCublas };

Collective collective_of(Op op);            // the collective an op needs
std::string_view to_string(GemmImpl impl);  // "ovl", "cublas"
// The GEMM of the modes that do not signal (sequential, decomposed), as the executor runs it: cuBLAS, or for FP8
// inputs our kernel on the SMs the plan gives (cuBLASLt's FP8 matmul refused every algorithm on an H100:
// docs/overlap.md, FP8).
GemmImpl unsignaled_gemm_impl(DType dtype);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;
};

struct GemmEstimate {
  double us = 0;
  int64_t tiles = 0;
  int64_t waves = 0;          // ceil(tiles / sms)
  double tail_fraction = 0;   // occupancy of the last wave, (0, 1]
  bool memory_bound = false;  // the HBM floor, not the matrix rate, set the time
  double hbm_bytes = 0;       // modeled HBM traffic: operand panels re-read past the L2, plus C written
  double l2_miss_factor = 1;  // our GEMM's matrix time over its time with every operand load an L2 hit (cuBLAS: 1)
  double wave_us = 0;         // time of one wave of tiles (the body divided by the waves it takes)
  double waves_used = 0;      // the waves the body's compute is counted in: `waves` (ours, whole tiles), fewer
                              // with a tail plan; cuBLAS tiles / sms, at least one wave, or on at most sms / 2
                              // tiles its split-K pieces' rounds (docs/model.md)
  double busy_sms = 0;        // the mean SMs running matrix work, which set the clock (matrix_clock_factor)
};

// Where a GEMM runs, which sets its power state: in a sustained stream of back-to-back GEMMs (bench_gemm, what the
// GEMM parameters are fitted on) or inside an overlap operator, between memory-bound collectives, where its compute
// time is ModelParams::operator_gemm_factor times the sustained one (docs/model.md, "power state").
enum class GemmRegime { kSustained, kOperator };
// The factor on a GEMM's compute time (matrix work and epilogues) in `regime`: 1, or hw.fit.operator_gemm_factor.
double gemm_regime_factor(const Hardware& hw, GemmRegime regime);
// The matrix rate for inputs of `dtype` over DeviceSpec::matrix_tflops_per_sm (a bf16 rate): 1 for bf16 and fp16, 0.5
// for fp32 (TF32), 2 for FP8 (e4m3, e5m2).
double matrix_rate_scale(DType dtype);

// How our GEMM runs its last tiles when the last round of whole tiles would leave SMs idle: nothing (all zero),
// stream-K (ovl::kernels::GemmArguments::stream_k_tiles / stream_k_splits: the last `tiles` cut into `splits` k
// ranges each), or half tiles (GemmArguments::half_tiles: the last `half_tiles` as two 128 x 128 halves each, twice
// the units for about half the time, no partial sums). At most one of the two is set.
struct TailPlan {
  int tiles = 0;       // the last `tiles` positions of the tile order
  int splits = 0;      // equal k ranges per tile
  int half_tiles = 0;  // instead of stream-K (tiles = 0): the last `half_tiles` positions in halves
};
// Stream-K for the last tiles: the split plan to run on `sms` SMs, or tiles = 0 when none saves at least
// kStreamKMinGain. The cost model counts k-block times (one tile-k-block on one SM): whole tiles in rounds of `sms`,
// then rounds of pieces (a piece's k-blocks plus writing its 128 KB fp32 partial, 2.4), then the last piece's reading
// of the tile's s partials (3 each). On the H200 the plans it picks gained about half of what it predicts
// (2.5-7.2% measured; docs/performance.md).
inline constexpr double kStreamKMinGain = 0.03;
TailPlan choose_stream_k(int64_t tiles, int64_t k_blocks, int sms);

// A round of half tiles over a round of whole tiles, as measured on the H200 (0.78-0.94, mean 0.87,
// on the 8 swept rows of at most 9 rounds; a half does half the MMAs and 2/3 of the loads, but the sparse last round
// of whole tiles already runs at a higher clock). Halves change no bits and write no partials, so they need less
// predicted gain than a stream-K plan: kHalfTileMinGain.
inline constexpr double kHalfTileTime = 0.85;
inline constexpr double kHalfTileMinGain = 0.01;
// The tail plan our GEMM runs on `sms` SMs: half tiles for the last tiles % sms tiles when they fill at most half the
// grid and save at least kHalfTileMinGain over whole tiles and more than choose_stream_k's plan; else that plan.
TailPlan choose_tail_plan(int64_t tiles, int64_t k_blocks, int sms);

// Tile rows per swizzle band (ovl::kernels::GemmArguments::swizzle) for our GEMM with `k_blocks` k-blocks of 64:
// 16 from K = 2048 (32 k-blocks) on, else 8. Measured on the H200 (docs/performance.md): bands of 16 read
// less from DRAM, and at the power limit that comes back as clock: +1.7-3.5% on 8192x8192x2048, about +0.5% on
// K = 4096 and 8192; at K = 1024 they lost up to 2% (16384x8192x1024 at 124 SMs).
inline constexpr int64_t kTallSwizzleMinKBlocks = 32;
int choose_swizzle(int64_t k_blocks);

// Whether our GEMM (`tiles` tiles of `k_blocks` k-blocks of 64 on `sms` SMs) should run the split epilogue
// (ovl::kernels::GemmEpilogue::kTmaStoreSplit: a half-tile staging buffer and 4 ring stages; the same bits): when a
// CTA's whole share is short, ceil(tiles / sms) x k_blocks <= kSplitEpilogueMaxCtaKBlocks. Measured on the H200
// (docs/performance.md): 8192x4096x1024 (128-176 k-blocks per CTA) gained about 1% at 100-132 SMs (25 of
// 28 row measurements over four runs up, three down by 0.1-1.0%); 16384x8192x1024 (512-576) was level on the mean
// and lost up to 2% on some rows, 2048x8192x4096 (256-320) and 8192x8192x2048 (512-576) were level, 8192^3 lost up
// to 3%. The threshold sits between 176 and 256 and rests on that one shape. A measured timeline puts the gain in
// the steady tile period (0.7-1.9% shorter), at a higher clock; why 16384x8192x1024 does not gain as well is not
// understood. Those runs compared it with kTmaStore. Against the deferred epilogue (kTmaStoreDeferred, which tune_gemm
// runs otherwise) it loses with MN-major B (b_mn_major: B is K x N): 8192x4096x1024 nn at 116/124/128 SMs ran
// 0.5-2.4% faster deferred in two runs (6 of 6 row measurements; nt: split 0.5% ahead). So the rule takes it for
// K-major B only.
inline constexpr int64_t kSplitEpilogueMaxCtaKBlocks = 192;
bool choose_split_epilogue(int64_t tiles, int64_t k_blocks, int sms, bool b_mn_major);

// `sms` SMs running the GEMM alone (no other kernel), tile shape `tile` (our kernel; cuBLAS picks its own), in the
// sustained regime unless told otherwise. Our GEMM visits tiles in swizzled blocks here; the overload takes the
// plan's order (it changes L2 reuse).
GemmEstimate estimate_gemm(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile, const Hardware& hw);
// `stream_k` (our kernel, split plans): the last stream_k.tiles tiles run in stream_k.splits k-pieces after the
// whole rounds (rounds of pieces, each a piece's k-blocks plus its partial's write, then the last piece's read of
// the tile's partials), or the last stream_k.half_tiles in halves (rounds of halves, kHalfTileTime each), and the
// clock follows the SMs busy over the whole kernel as for whole tiles.
GemmEstimate estimate_gemm(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile, TileOrder order,
                           const Hardware& hw, GemmRegime regime = GemmRegime::kSustained, TailPlan stream_k = {});

// The matrix time of a tile when `busy_sms` SMs run matrix work, relative to its time with all sm_count SMs busy:
// (clamp(busy_sms, clock_knee_sms, sm_count) / sm_count)^clock_exponent, in (0, 1]. The H200 under a power limit
// clocks higher when fewer SMs draw power (docs/model.md, "clock"); 1 for a profile with clock_exponent 0.
double matrix_clock_factor(const Hardware& hw, double busy_sms);

struct CommEstimate {
  double us = 0;
  double algbw_GBps = 0;  // bytes / time (nccl-tests "algbw"; bytes = the full buffer)
  double busbw_GBps = 0;  // algbw x 2(n-1)/n (AllReduce) or x (n-1)/n (ReduceScatter, AllGather)
};

// A collective over `bytes` (the full buffer, nccl-tests convention) among `world` ranks, driven by `ctas`
// CTAs, alone on the GPU. world == 1 costs a launch and a local copy.
CommEstimate estimate_collective(Collective c, int64_t bytes, int world, CommAlgo algo, int ctas, const Hardware& hw,
                                 int nodes = 1);
double bus_factor(Collective c, int world);  // busbw / algbw

// cuBLAS's slowdown, as a fraction of its time, while a kernel on another stream holds `lost` of the `gemm_sms` SMs
// its grid was sized for (decomposed on plain streams: the collective's CTAs take SMs as cuBLAS's CTAs end): alone its
// `tiles` run balanced over gemm_sms SMs, max(1, tiles / gemm_sms) waves (estimate_gemm's cuBLAS); with SMs held they
// run in whole waves on the SMs left, ceil(tiles / (gemm_sms - lost)). 2048x8192 in 128x256 tiles (512) on 132 SMs:
// 3.88 waves, with 8 held 5, 0.29. The model and the simulator both apply it (x shared_sm_penalty) while the
// collective runs; 0 when lost is 0.
double cublas_lost_sms_slowdown(int64_t tiles, int gemm_sms, int lost);
// A collective of `ctas` CTAs on a second plain stream, launched as a cuBLAS chunk of `tiles` tiles on `gemm_sms` SMs
// starts (decomposed, GEMM first: chunk i's call against chunk i + 1): the tiles that chunk completes before the call
// gets SMs. cuBLAS's Hopper kernels are persistent: each CTA holds its SM until it runs out of tiles, so the call
// gets SMs where the grid leaves enough (0: at once), else where the chunk's last round leaves enough (its whole
// rounds' tiles), else at the chunk's end (all its tiles). The model and the simulator both apply it.
int64_t cublas_tiles_before_comm(int64_t tiles, int gemm_sms, int ctas, int sm_count);
// Bytes the CTAs of a TMA or SIMT collective read and write per byte a rank sends over its link (push-reduce reads
// its partial and read-modify-writes the owner's chunk; pull reads W chunks per chunk written). The simulator
// scales its per-CTA caps by it so that both price a CTA's work alike. 1 for NCCL algorithms. loopback_rank0: the
// loopback emulation of rank 0's share (Emulation::loopback_rank0).
double cta_bytes_per_link_byte(Collective c, CommAlgo algo, int world, bool loopback_rank0);
// Bytes (read + written, all in HBM) that the loopback emulation of rank 0's share of an NCCL-algorithm call moves
// per buffer byte: it is one SIMT kernel with no ring (loopback_kernel in kernels/src/loopback.cu). RS reduces
// rank 0's piece, W reads and a write of 1/W of the buffer (1 + 1/W); AR also copies the W-1 other owners' reduced
// pieces in (+ 2 (W-1)/W); AG copies every owner's piece, its own included (2). The model prices such a call as
// these bytes at min(ctas x the SIMT per-CTA rate, HBM) after a plain kernel launch (loopback_hardware, kRank0), and
// the simulator as one step of these bytes. Per buffer byte of the whole collective: a ReduceScatter in several calls
// (chunks, tile groups) works only in the calls that hold rank 0's rows (call_adjustments below, which both predictors
// apply, with each call's pieces at ModelParams::loopback_piece_us).
double loopback_rank0_nccl_bytes(Collective c, int world);
// The dependent link latencies of one call of `algo` among `world` ranks of one node, as the model counts them
// (NCCL ring AR 2(W-1), RS / AG W-1; tma-push 2 / 1; tma-pull 4 / 2): a paced loopback waits that many
// LinkProfile::latency_us at the start of every call or tile group, and the model and the simulator price them.
double link_steps(Collective c, CommAlgo algo, int world);
// Whether a real world's measured link prices a call of `algo` over `call_bytes` buffer bytes (with_link: the link's
// LinkProfile::measured_table holds such calls). Such a call takes the table's time for its size and CTAs, which holds
// its launch and its steps' latencies: no launch or step latency is added to it (coll_cost, the simulator's steps and
// call overheads).
bool measured_link_call(const Hardware& hw, CommAlgo algo, double call_bytes);
// What the loopback emulation of rank 0's share (Emulation::loopback_rank0) does in each call of a plan (decomposed:
// its row chunks; the signaling modes: its tile groups, whole tile rows as the executor's range table counts them;
// sequential: one call):
// - factor: on the bytes a call over those rows moves per rank. ReduceScatter reduces only the rows rank 0 owns,
//   [0, M / W): W x (its rows inside rank 0's) / (its rows), so 0 for a call without any (it still pays its launch)
//   and W for one inside them; they average to 1 over the rows. 1 for every call of AllReduce and AllGather.
// - pieces: the pieces with work in rank 0's play (AllReduce: the owners with rows in the call, W unless it has
//   fewer rows; ReduceScatter 1 in a call holding rank 0's rows, else 0; AllGather the owners whose rows the call
//   spans).
struct LoopbackCall {
  double factor = 1;
  int pieces = 0;
};
std::vector<LoopbackCall> loopback_rank0_calls(const Problem& problem, const Plan& plan);
// The bytes of one stage of the TMA movers' ring, kernels::kDefaultTmaRing (OVL_TMA_RING may change the ring at run
// time; the predictors price the default): the loopback mover's unit.
inline constexpr int64_t kTmaMoverStageBytes = 48 * 1024;
// How unevenly the loopback's TMA mover of `algo` (tma-push or tma-pull) on `ctas` CTAs deals the link bytes of one
// call over rows [row_begin, row_end) of `problem` (a tile group, a chunk, or every row) among its CTAs when it plays
// rank 0's share: ctas x the busiest CTA's link bytes / all the CTAs' (1: even, and for a call without link bytes or
// a world of one). A paced loopback paces each CTA's own link bytes (kernels/src/loopback_tma.cu: after each
// unit the issuing thread waits until the group's start + its link bytes so far / LinkProfile::paced_cta_GBps), so
// the busiest CTA sets the call's link time: the model and the simulator divide the paced rate by this. The mover's
// rule: each owner's piece (rank 0's sum; AllReduce: then the peers' sums, copied in; AllGather: every owner's rows)
// is cut into chunks of kTmaMoverStageBytes (tma-pull's sums: of stage / W, rounded down to 16 bytes), a chunk into
// units (push sums: W, one per source, source 0 rank 0's own; pull sums and copies: 1), and the call's U units are
// dealt in contiguous runs, CTA c taking [U c / ctas, U (c + 1) / ctas). A unit's link bytes: a push sum's of a
// peer's source, a pull sum's W - 1 slots, a copy of a peer's piece. 48 KiB units make the runs uneven: GEMM+AR's
// 128-row group of 8192 columns in a world of 8 is 90 units (6 chunks of rank 0's sum x 8 sources, then 6 chunks of
// each of the 7 peers' sums), and on 16 CTAs, runs of 5 or 6 units, the busiest paces sources 1-6 of one chunk: 288
// KiB of the group's 3.5 MiB of link bytes, 9/7 of an even share. Throws ovl::Error for an algorithm that is not a
// TMA mover, or ctas < 1.
double tma_mover_link_load(const Problem& problem, int64_t row_begin, int64_t row_end, CommAlgo algo, int ctas);
// Per call of the plan, what the model and the simulator both apply. Where `hw` plays rank 0's share on one node
// (loopback_rank0_calls): the factor on the collective's bytes for an NCCL-algorithm call (the SIMT loopback kernel)
// and a TMA mover's alike (both play rank 0's pieces only: dev::plan_piece), and the fixed time the SIMT kernel adds
// (pieces x ModelParams::loopback_piece_us); paced (a link profile), link_load W / (W - 1) on an NCCL-algorithm unit
// that a real world moves owner by owner (nccl_per_owner: the stand-in paces it as those calls load the link), and
// on a TMA mover's call its tma_mover_link_load on the plan's comm_ctas (mode tma off a partition: at most
// sm_count - 1, as the executor launches it). In a real world: factor W / (W - 1) on an NCCL unit moved owner by
// owner (each link carries the unit's bytes). Elsewhere factor 1, no extra time and link_load 1 (unpaced, no timer
// holds a CTA to its share, and the even share stays: docs/model.md, "The TMA movers' units"). call_bytes, by which
// a paced profile's measured tables go (LinkProfile::measured_table): an NCCL unit's nccl_unit_call_bytes; a TMA
// mover's in a paced loopback, the buffer's comm_bytes (one streaming call); 0 elsewhere.
struct CallAdjust {
  double factor = 1;
  double extra_us = 0;
  double link_load = 1;
  double call_bytes = 0;
};
std::vector<CallAdjust> call_adjustments(const Problem& problem, const Plan& plan, const Hardware& hw);
// Bytes (read + written) one CTA of `algo` moves per second, GB/s: tma_push_per_cta_GBps, tma_pull_per_cta_GBps,
// or nccl_per_cta_GBps (an NCCL channel, counted in link bytes). The model and the simulator both price a TMA
// collective's CTA work at this rate (a world of one, a local copy, runs at per_cta_copy_GBps instead).
double per_cta_GBps(CommAlgo algo, const Hardware& hw);
// The rate comm_algo ce's copies move link bytes: ModelParams::copy_engine_GBps (0: the link's,
// Hardware::effective_link_GBps()), at most the link's.
double copy_engine_GBps(const Hardware& hw);

// A local copy of `bytes` bytes (read once, written once) by `ctas` CTAs (bench_collectives' copy/ cases).
CommEstimate estimate_copy(int64_t bytes, int ctas, const Hardware& hw);

struct ModeEstimate {
  double total_us = 0;         // predicted time of the whole operator
  double gemm_alone_us = 0;    // the GEMM as the plan runs it, with nothing else on the GPU
  double comm_alone_us = 0;    // the whole collective alone
  double gemm_us = 0;          // the GEMM's time inside the overlap (after contention)
  double exposed_comm_us = 0;  // communication not hidden behind the GEMM
  double comm_us = 0;          // communication's busy time inside the overlap (per-group costs, contention included)
};

// The plan's mode decides the formula (sequential: sum; decomposed: chunk pipeline; tile-signal/green-context/
// tma: the pipeline recurrence over tile groups, with SM sharing or partitioning and HBM contention).
ModeEstimate estimate(const Problem& problem, const Plan& plan, const Hardware& hw);

}  // namespace ovl
