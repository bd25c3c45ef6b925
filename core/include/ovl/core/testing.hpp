// Hooks for tests, benchmarks and references, kept out of Context's API: fault injection, one part of a call run
// alone, and a loopback Context's emulated peers. Not for production code paths; they may change with any release.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "ovl/core/context.hpp"

namespace ovl::testing {

// Make the GEMM side fail so that the communication side must time out (synchronize() then throws ovl::Error).
enum class Fault {
  kNone,
  kSkipGemm,        // the signaled GEMM is not launched: no counter ever moves
  kCounterTooHigh,  // the last group's expected count is one more than its tile count (AG+GEMM: its gather is
                    // never released)
  kPoisonGather,    // AG+GEMM: the gathered A is filled with NaN before each call (a read before the gather shows)
};
// The fault the context's later calls inject (kNone: none, the default).
void set_fault(Context& ctx, Fault fault);

// One part of a call alone, run the way `plan` runs it (same streams, partition, grid and CTAs). kGemm: only the
// GEMM (GEMM+AR/RS: into rank 0's partial product; AG+GEMM: on whatever the gathered A holds). kComm: only the
// collective(s), ungated (no counter waits), on whatever the partial product holds.
enum class Part { kAll, kGemm, kComm };
void run_part(Context& ctx, Part part, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
              const Plan& plan, cudaStream_t stream);

// Loopback only: the other ranks' inputs for `problem`, on the device (made on first use). GEMM+AR/RS: ranks
// 1..W-1's partial products (M x N); AG+GEMM: their A rows (M/W x K). For references.
std::vector<const void*> loopback_peer_inputs(Context& ctx, const Problem& problem);
// Loopback only: ranks 1..W-1's output buffers for `problem` (RS: M/W x N, AR: M x N, AG: their gathered A, M x K).
// Complete after a call only with LoopbackShare::kWholeWorld; with kRank0 they exist only for GEMM+AR (the
// precomputed reduced pieces rank 0 copies from: do not write them) and the list is empty otherwise.
std::vector<void*> loopback_peer_outputs(Context& ctx, const Problem& problem);

}  // namespace ovl::testing
