// The execution modes and the communication algorithms, each with one table of what it can do. Plan::validate, the
// planner, the model, the simulator and the executors (Context::can_run, the grids they launch) read these tables
// instead of deciding per mode: a new mode is a new row and its executor; tests/sim/test_modes.cpp walks the tables
// against every reader.
#pragma once

#include <iterator>
#include <string>
#include <string_view>

#include "ovl/model/problem.hpp"
#include "ovl/names.hpp"

namespace ovl {

enum class Mode {
  kSequential,    // cuBLAS GEMM, then the collective (the baseline)
  kDecomposed,    // GEMM in row chunks, each chunk's collective on a second stream (TransformerEngine, Async-TP)
  kTileSignal,    // FlashOverlap: our GEMM signals tile groups; NCCL sends each finished group; SMs shared
  kGreenContext,  // GCOverlap: tile-signal with GEMM and communication on disjoint green-context partitions
  kTma,           // Oh Overlap: a persistent TMA collective on few SMs polls the group counters
};
inline constexpr Named<Mode> kModeNames[] = {{Mode::kSequential, "sequential"},
                                             {Mode::kDecomposed, "decomposed"},
                                             {Mode::kTileSignal, "tile-signal"},
                                             {Mode::kGreenContext, "green-context"},
                                             {Mode::kTma, "tma"}};
// CommAlgo and its names: ovl/types.hpp. kCopyEngine runs in mode tile-signal only (docs/overlap.md, "Copy engine");
// kNcclSymmetric in the NCCL modes (docs/overlap.md, "NCCL's symmetric kernels"); kSimt in none.

template <typename E>
constexpr unsigned bit_of(E value) {
  return 1u << static_cast<unsigned>(value);
}

// What one collective call of a mode covers.
enum class ModeUnits {
  kWhole,       // one call on every row, after the cuBLAS GEMM (AG+GEMM: before it)
  kChunks,      // Plan::chunks row chunks, each a cuBLAS GEMM and its call
  kTileGroups,  // our persistent GEMM signals Plan::tile_groups, each group one call (or one gated range)
};
// Whether a mode runs its GEMM and its communication on disjoint green-context partitions (Plan::partitioned).
enum class Partitioning { kNever, kAlways, kOptional };

struct ModeTraits {
  Mode mode;
  ModeUnits units;
  Partitioning partitioning;
  unsigned algos;              // bit_of(CommAlgo): the algorithms Plan::validate takes in this mode
  std::string_view algo_hint;  // ends Plan::validate's refusal of another algorithm (unless that one has a mode_hint)
  // The collective is one persistent kernel launched beside the whole GEMM (tma): its CTAs hold their SMs from the
  // start, so the GEMM's grid leaves them on shared SMs.
  bool persistent_comm;
  unsigned planned_ops;  // bit_of(Op): the ops plan() proposes the mode for under PlannerOptions::runnable_only (the
                         // executors run every mode for every op)
  bool tile_major;       // the executor runs a tile-major output (tma's collective reads row bands)

  constexpr bool signals() const { return units == ModeUnits::kTileGroups; }  // our GEMM signals tile groups
  constexpr bool takes(CommAlgo algo) const { return (algos & bit_of(algo)) != 0; }
  constexpr bool planned(Op op) const { return (planned_ops & bit_of(op)) != 0; }
};

inline constexpr unsigned kAllOps =
    bit_of(Op::kGemmAllReduce) | bit_of(Op::kGemmReduceScatter) | bit_of(Op::kAllGatherGemm);
inline constexpr unsigned kGemmFirstOps = bit_of(Op::kGemmAllReduce) | bit_of(Op::kGemmReduceScatter);
inline constexpr unsigned kNcclAlgos =
    bit_of(CommAlgo::kNcclRing) | bit_of(CommAlgo::kNcclNvls) | bit_of(CommAlgo::kNcclSymmetric);
inline constexpr unsigned kTmaAlgos = bit_of(CommAlgo::kTmaPush) | bit_of(CommAlgo::kTmaPull);

// In kModeNames' order. The signaling modes run AllGather+GEMM but are not planned for it: tile-signal and
// green-context were measured in loopback only, slower than decomposed, and predicted up to 32% too fast with a group
// per row band; tma's is simulated too fast with many groups in paced loopback, where it is the fastest AG+GEMM case
// on 5 of 11 shapes (docs/performance.md).
inline constexpr ModeTraits kModeTraits[] = {
    {Mode::kSequential, ModeUnits::kWhole, Partitioning::kNever, kNcclAlgos | kTmaAlgos, "", false, kAllOps, true},
    {Mode::kDecomposed, ModeUnits::kChunks, Partitioning::kNever, kNcclAlgos, "(NCCL modes; use mode tma)", false,
     kAllOps, true},
    {Mode::kTileSignal, ModeUnits::kTileGroups, Partitioning::kNever, kNcclAlgos | bit_of(CommAlgo::kCopyEngine),
     "(NCCL modes; use mode tma)", false, kGemmFirstOps, true},
    {Mode::kGreenContext, ModeUnits::kTileGroups, Partitioning::kAlways, kNcclAlgos, "(NCCL modes; use mode tma)",
     false, kGemmFirstOps, true},
    {Mode::kTma, ModeUnits::kTileGroups, Partitioning::kOptional, kTmaAlgos, "(use tma-push or tma-pull)", true,
     kGemmFirstOps, false},
};

constexpr const ModeTraits& mode_traits(Mode mode) { return kModeTraits[static_cast<int>(mode)]; }
constexpr bool mode_signals(Mode mode) { return mode_traits(mode).signals(); }

struct AlgoTraits {
  CommAlgo algo;
  bool nccl;          // NCCL moves the data
  bool one_node;      // reaches its peers over NVLink only: a world within one node
  bool contiguous;    // moves contiguous rows: a tile group of a row-major output must be whole (swizzle) bands
  bool copy_engines;  // moves the data with the copy engines, on no CTA: nothing of it polls beside the GEMM
  std::string_view mode_hint;  // ends Plan::validate's refusal of a mode that does not take it ("" = the mode's)
};
// In kCommAlgoNames' order.
inline constexpr AlgoTraits kAlgoTraits[] = {
    {CommAlgo::kNcclRing, true, false, true, false, ""},
    {CommAlgo::kNcclNvls, true, false, true, false, ""},
    {CommAlgo::kTmaPush, false, true, false, false, ""},
    {CommAlgo::kTmaPull, false, true, false, false, ""},
    {CommAlgo::kCopyEngine, false, true, true, true, "(the copy engine runs in mode tile-signal)"},
    {CommAlgo::kNcclSymmetric, true, true, true, false, ""},
    {CommAlgo::kSimt, false, true, false, false, "(simt is the loopback's stand-in for NCCL, not a plan's algorithm)"},
};

constexpr const AlgoTraits& algo_traits(CommAlgo algo) { return kAlgoTraits[static_cast<int>(algo)]; }
constexpr bool is_nccl(CommAlgo algo) { return algo_traits(algo).nccl; }  // kNcclRing, kNcclNvls, kNcclSymmetric
constexpr bool is_tma_mover(CommAlgo algo) { return (kTmaAlgos & bit_of(algo)) != 0; }  // kTmaPush, kTmaPull

// The rows are in their enums' order (each row's index is its value).
static_assert([] {
  for (int i = 0; i < int(std::size(kModeTraits)); ++i)
    if (int(kModeTraits[i].mode) != i || kModeNames[i].value != kModeTraits[i].mode) return false;
  for (int i = 0; i < int(std::size(kAlgoTraits)); ++i)
    if (int(kAlgoTraits[i].algo) != i || kCommAlgoNames[i].value != kAlgoTraits[i].algo) return false;
  return std::size(kModeTraits) == std::size(kModeNames) && std::size(kAlgoTraits) == std::size(kCommAlgoNames);
}());

}  // namespace ovl
