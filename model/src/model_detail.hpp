// Private: the pieces the estimates, the mode recurrences and calibration share. Units: microseconds, bytes,
// GB/s (1 GB/s = 1e3 bytes per microsecond).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ovl/model/estimate.hpp"

namespace ovl::detail {

inline constexpr double kBytesPerUsPerGBps = 1e3;
// Fraction of the L2 the operand panels of the tiles in flight may use (the rest holds C tiles and others).
inline constexpr double kL2OperandShare = 0.5;
// cuBLAS picks its own tile; the model counts its work in 128x256 tiles.
inline constexpr TileShape kCublasTile{128, 256, 64};

// One GEMM's timing on `sms` SMs, alone on the GPU.
struct GemmTiming {
  int sms = 0;
  int64_t tiles = 0;
  int64_t waves = 0;        // ceil(tiles / sms)
  double waves_used = 0;    // waves the time is counted in: `waves` (ours; with stream-K whole rounds + rounds
                            // of pieces + the partials' read), max(1, tiles / sms) (cuBLAS; on at most sms / 2
                            // tiles its split-K pieces' rounds)
  double busy_sms = 0;      // mean SMs running matrix work: tiles / waves (ours), min(sms, tiles x splits) (cuBLAS)
  double clock_factor = 1;  // matrix_clock_factor(hw, busy_sms): <= 1, the matrix time relative to all SMs busy
  double l2_miss_factor = 1;  // ours: 1 + gemm_l2_miss_cost x the operand loads' L2 miss fraction; cuBLAS: 1
  double tile_us = 0;         // one tile: matrix time (x clock factor, x L2 miss factor, x the cuBLAS partition
                              // penalty) + epilogue
  double compute_us = 0;    // waves_used x tile_us
  double hbm_bytes = 0;
  double memory_us = 0;  // hbm_bytes at min(HBM, sms x per-CTA copy)
  double body_us = 0;    // max(compute, memory)
  double launch_us = 0;
  double total_us() const { return launch_us + body_us; }
  double wave_us() const { return body_us / waves_used; }
  // When tile `i` (0-based, visiting order) finishes / could start, counted from the kernel's start (after launch).
  // Whole tiles only (the overlap modes run no stream-K).
  double tile_end_us(int64_t i) const { return double(i / sms + 1) * wave_us(); }
  double tile_start_us(int64_t i) const { return double(i / sms) * wave_us(); }
};

// `regime`: kOperator multiplies the compute time (tile_us) by hw.fit.operator_gemm_factor (the GEMM inside an overlap
// operator); the launch and the HBM floor are the same in both regimes.
// `partition_penalty`: apply cublas_partition_penalty when cuBLAS runs on fewer than sm_count SMs (a green-context
// partition); off when a cuBLAS kernel merely loses SMs to a concurrent kernel.
// `stream_k`: our kernel's split plan (estimate_gemm); ignored for cuBLAS.
GemmTiming gemm_timing(const GemmShape& shape, GemmImpl impl, int sms, const TileShape& tile, TileOrder order,
                       const Hardware& hw, GemmRegime regime, bool partition_penalty = true,
                       TailPlan stream_k = {});

// Per-buffer-byte coefficients of one collective among the ranks of one node (bytes = the full buffer S).
struct CollCoeffs {
  double link_bytes = 0;  // bytes each GPU sends per direction over the link, per buffer byte
  double cta_bytes = 0;   // bytes the TMA/SIMT CTAs read + write (as per_cta_GBps counts), per buffer byte
  double hbm_bytes = 0;   // local HBM traffic (read + write) per buffer byte
  double steps = 0;       // dependent link latencies on the critical path
};
// loopback_rank0: the bytes the loopback emulation of rank 0's share moves (Emulation::loopback_rank0), which for
// tma-push differ from a real rank's (the emulation zeroes rank 0's pieces and adds all W sources into them, and
// copies the other owners' pieces in, as rank 0's pull would).
// paced (with loopback_rank0: Emulation::paced): an NCCL-algorithm call's SIMT play counts the ring's link
// bytes and steps (its peers' bytes cross the paced link) beside the bytes it moves in HBM (cta_bytes).
CollCoeffs coll_coeffs(Collective c, CommAlgo algo, int world, bool loopback_rank0, bool paced = false);
// The algorithm a call on `ctas` CTAs is priced as: nccl-symmetric on no CTA (CtaPolicy::kZero, collective_ctas) is
// NCCL's copy-engine AllGather, priced as ce's copies; any other, itself.
inline CommAlgo priced_algo(CommAlgo algo, int ctas) {
  return algo == CommAlgo::kNcclSymmetric && ctas == 0 ? CommAlgo::kCopyEngine : algo;
}
// coll_coeffs of priced_algo(algo, ctas); the copy-engine AllGather between NCCL's ready and completion flags: 2 steps.
inline CollCoeffs priced_coeffs(Collective c, CommAlgo algo, int ctas, int world, bool loopback_rank0, bool paced) {
  const CommAlgo priced = priced_algo(algo, ctas);
  CollCoeffs k = coll_coeffs(c, priced, world, loopback_rank0, paced);
  if (priced != algo) k.steps = 2;
  return k;
}

// Per buffer byte, in microseconds: the slowest of the rates a call's CTAs move at together (HBM, the link, NCCL's,
// the CTAs' own) and a paced loopback's link bytes, which each CTA paces itself, at a call's CallAdjust::link_load
// (its busiest CTA's share over an even one).
struct PerByte {
  double shared = 0, link = 0;
  double at(double link_load = 1) const { return std::max(shared, link * link_load); }
};

// A collective split as time = fixed_us + bytes x per byte (linear in bytes, so monotone).
struct CollCost {
  double launch_us = 0;   // the kernel / NCCL call launch
  double latency_us = 0;  // link latencies (steps x latency, plus network steps)
  PerByte per_byte;
  double time_us(double bytes, double link_load = 1) const {
    return launch_us + latency_us + bytes * per_byte.at(link_load);
  }
};
// `hbm_GBps`: the HBM bandwidth the collective may use (the whole device alone, less under a running GEMM).
// One call as a paced link prices it (LinkProfile::paced_cta_GBps): its buffer bytes, for rates that depend on a
// call's size (a transport the profile measured: LinkProfile::measured_table; 0: a call no table holds), and the CTAs
// the kernel is launched with, whose count sets each CTA's paced share (beside the GEMM fewer of them may run).
struct PacedCall {
  double bytes = 0;
  int launched_ctas = 0;
};
// `ctas`: the CTAs that run. The cost stays linear in the bytes it is given.
CollCost coll_cost(Collective c, CommAlgo algo, int world, int nodes, int ctas, const PacedCall& call,
                   const Hardware& hw, double hbm_GBps);

}  // namespace ovl::detail
