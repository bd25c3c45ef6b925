// Vocabulary every layer shares (the model, the kernels and the runtime), defined once.
#pragma once

#include <cstdint>
#include <string_view>

#include "ovl/names.hpp"

namespace ovl {

// The collective a GEMM operator needs: GEMM+AllReduce, GEMM+ReduceScatter, AllGather+GEMM.
enum class Collective { kAllReduce, kReduceScatter, kAllGather };
// Benchmark names use these.
inline constexpr Named<Collective> kCollectiveNames[] = {
    {Collective::kAllReduce, "allreduce"}, {Collective::kReduceScatter, "reducescatter"}, {Collective::kAllGather, "allgather"}};
constexpr std::string_view to_string(Collective c) { return name_in(kCollectiveNames, c); }

// What the loopback collective plays (see docs/overlap.md, "Loopback emulation").
enum class LoopbackShare {
  // Rank 0's own share, as one real GPU of a W-rank world does it (pull style): RS: reduce the rows rank 0 owns
  // (W reads, 1 write); AR (two-shot): reduce rank 0's piece of each group, then copy the W-1 other owners' reduced
  // pieces in (they are precomputed per shape, see ContextOptions::loopback_share); AG: copy the W-1 peers' rows
  // in (plus rank 0's own rows, a local copy). Rank 0's output (the caller's C) is complete and correct.
  kRank0,
  // Every rank's part (W times rank 0's traffic on one HBM); every rank's output is complete (verification).
  kWholeWorld,
};
inline constexpr Named<LoopbackShare> kLoopbackShareNames[] = {{LoopbackShare::kRank0, "rank0"},
                                                               {LoopbackShare::kWholeWorld, "whole-world"}};

// How a collective moves its data: a plan's comm algorithm (model/modes.hpp's kAlgoTraits says which modes take
// which), the implementation a Collectives call runs (core/collectives.hpp) and the mover a kernel runs
// (kernels/collectives.hpp, kernels/loopback.hpp).
//   kNcclRing ("nccl")           NCCL, with its own choice of algorithm and CTAs (a bound on them by CtaPolicy).
//   kNcclNvls ("nccl-nvls")      NCCL's NVLink SHARP algorithm (priced; never run: NVLink multicast stays off).
//   kTmaPush ("tma-push")        reduce by cp.reduce.async.bulk .add into the owner's buffer; gather by TMA stores to
//                                every peer.
//   kTmaPull ("tma-pull")        the owner TMA-loads every rank's piece and adds in fp32 in rank order (deterministic);
//                                gather by TMA loads from every owner.
//   kCopyEngine ("ce")           the GEMM's group counters gate stream memory operations, which copy each group's rows
//                                with the copy engines (docs/overlap.md, "Copy engine").
//   kNcclSymmetric               NCCL's symmetric kernels (NCCL 2.27+) on buffers registered as symmetric windows, and
//     ("nccl-symmetric")         under CtaPolicy::kZero NCCL's copy-engine AllGather (2.28+).
//   kSimt ("simt")               the pull protocol with plain 16-byte loads and stores by a whole block: the loopback's
//                                stand-in for NCCL and a comparison in bench_collectives; no mode takes it in a plan.
enum class CommAlgo : std::uint8_t { kNcclRing, kNcclNvls, kTmaPush, kTmaPull, kCopyEngine, kNcclSymmetric, kSimt };
inline constexpr Named<CommAlgo> kCommAlgoNames[] = {
    {CommAlgo::kNcclRing, "nccl"},         {CommAlgo::kNcclNvls, "nccl-nvls"},
    {CommAlgo::kTmaPush, "tma-push"},      {CommAlgo::kTmaPull, "tma-pull"},
    {CommAlgo::kCopyEngine, "ce"},         {CommAlgo::kNcclSymmetric, "nccl-symmetric"},
    {CommAlgo::kSimt, "simt"}};
constexpr std::string_view to_string(CommAlgo algo) { return name_in(kCommAlgoNames, algo); }

// Element types. The GEMM takes bf16 and fp16 (A, B and D alike) or FP8 inputs (e4m3 A, e4m3 or e5m2 B) with a bf16 or
// fp16 output; the collectives move bf16, fp16 or fp32. One byte wide, as it travels in device argument structs.
enum class DType : std::uint8_t { kBF16, kFP16, kFP32, kE4M3, kE5M2 };
inline constexpr Named<DType> kDTypeNames[] = {{DType::kBF16, "bf16"},
                                               {DType::kFP16, "fp16"},
                                               {DType::kFP32, "fp32"},
                                               {DType::kE4M3, "e4m3"},
                                               {DType::kE5M2, "e5m2"}};
constexpr std::string_view to_string(DType dtype) { return name_in(kDTypeNames, dtype); }
constexpr bool is_fp8(DType dtype) { return dtype == DType::kE4M3 || dtype == DType::kE5M2; }
// Bytes per element: 4 (fp32), 2 (bf16, fp16) or 1 (FP8).
constexpr int dtype_bytes(DType dtype) { return dtype == DType::kFP32 ? 4 : is_fp8(dtype) ? 1 : 2; }

// How B is stored: kKxN ("nn": K x N row-major) or kNxK ("nt": N x K row-major, a linear layer's weight).
enum class BLayout { kKxN, kNxK };
inline constexpr Named<BLayout> kBLayoutNames[] = {{BLayout::kKxN, "nn"}, {BLayout::kNxK, "nt"}};

// The order the GEMM visits its tiles: kRowBand, row-major tile order (a group of whole tile rows is a contiguous band
// of row-major output); kSwizzle, bands of swizzle tile rows visited column by column inside a band (L2 reuse of B);
// kExplicit, a given permutation of the tile ids.
enum class TileOrder { kRowBand, kSwizzle, kExplicit };
inline constexpr Named<TileOrder> kTileOrderNames[] = {
    {TileOrder::kRowBand, "row-band"}, {TileOrder::kSwizzle, "swizzle"}, {TileOrder::kExplicit, "explicit"}};

// The GEMM's output: kRowMajor, or kTileMajor (tile t's elements contiguous, row-major inside the tile).
enum class OutputLayout { kRowMajor, kTileMajor };
inline constexpr Named<OutputLayout> kOutputLayoutNames[] = {{OutputLayout::kRowMajor, "row-major"},
                                                             {OutputLayout::kTileMajor, "tile-major"}};

}  // namespace ovl
