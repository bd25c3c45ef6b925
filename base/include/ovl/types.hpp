// Vocabulary every layer shares (the model, the kernels and the runtime), defined once.
#pragma once

#include <string_view>

namespace ovl {

// The collective a GEMM operator needs: GEMM+AllReduce, GEMM+ReduceScatter, AllGather+GEMM.
enum class Collective { kAllReduce, kReduceScatter, kAllGather };
// "allreduce", "reducescatter", "allgather" (benchmark names use them).
constexpr std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllGather:
      return "allgather";
  }
  return "?";
}

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

// How B is stored: kKxN ("nn": K x N row-major) or kNxK ("nt": N x K row-major, a linear layer's weight).
enum class BLayout { kKxN, kNxK };

// The order the GEMM visits its tiles: kRowBand, row-major tile order (a group of whole tile rows is a contiguous band
// of row-major output); kSwizzle, bands of swizzle tile rows visited column by column inside a band (L2 reuse of B);
// kExplicit, a given permutation of the tile ids.
enum class TileOrder { kRowBand, kSwizzle, kExplicit };

// The GEMM's output: kRowMajor, or kTileMajor (tile t's elements contiguous, row-major inside the tile).
enum class OutputLayout { kRowMajor, kTileMajor };

}  // namespace ovl
