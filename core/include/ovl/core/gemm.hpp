// The signaled GEMM on its own, configured as the measurements say: what bench_gemm's `ovl` runs.
#pragma once

#include "ovl/kernels/gemm.hpp"
#include "ovl/model/problem.hpp"

namespace ovl {

// Fills in, for a standalone GEMM of args.m x args.n x args.k on args.sm_count SMs, the choices the H200 runs
// measured best (docs/kernels.md; the current numbers in docs/performance.md):
// - tile order: swizzle bands of ovl::choose_swizzle(k_blocks) tile rows;
// - the last round: ovl::choose_tail_plan's stream-K pieces or half tiles, or whole tiles;
// - the epilogue: kTmaStoreSplit when ovl::choose_split_epilogue says so (short CTA shares, K-major B), else
//   kTmaStoreDeferred.
// Everything else (pointers, dtype, layouts, tile groups, counters, timestamps) is left as given, so a caller sets
// those before or after. Throws ovl::Error naming a non-positive m, n, k or sm_count. Not for the overlap executors:
// they need whole tiles and their plan's tile order (groups of whole bands, signalled in whole waves); they take
// only the epilogue, from tuned_gemm_epilogue.
void tune_gemm(kernels::GemmArguments& args);

// The epilogue tune_gemm picks for args' shape, B layout and sm_count (the rule above).
kernels::GemmEpilogue tuned_gemm_epilogue(const kernels::GemmArguments& args);

}  // namespace ovl
