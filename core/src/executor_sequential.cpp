// Mode sequential (the baseline): the cuBLAS GEMM on the whole device, then the collective on the same stream
// (NCCL in a real world; in loopback the loopback collective with comm_ctas CTAs (default_plan(kSequential, p, hw,
// c): c CTAs, or NCCL's CTA count for c = 0 (nccl_default_ctas: the link profile's in a paced loopback, whose
// default_plan takes NCCL's count whatever c is)), the context's share, and the mover of plan.comm_algo: SIMT for the
// NCCL algorithms, the TMA movers for tma-pull / tma-push, so a baseline can use the same mover as the tma mode).
// AG+GEMM: gather, then GEMM. A real world's tma-push runs in TmaExecutor::run_real_sequential (its symmetric buffers);
// in a real world of 1 a TMA algorithm runs the loopback kernel's mover (a copy), not NCCL.
#include "executors.hpp"

namespace ovl::detail {

void run_sequential(Resources& r, const Call& c, const std::function<void(cudaStream_t)>& collective) {
  const auto gemm = [&](const void* a, void* out) {
    const int span = r.stamp_span("gemm", "gemm", "gemm", c.stream);
    r.cublas_gemm(c, a, out, 0, c.problem.m, c.stream);
    r.end_span(span, c.stream);
  };
  if (c.op == Op::kAllGatherGemm) {
    if (c.runs_comm()) collective(c.stream);
    if (c.runs_gemm()) gemm(c.gathered, c.c.ptr);
    return;
  }
  if (c.runs_gemm()) gemm(c.a.ptr, c.partial);
  if (c.runs_comm()) collective(c.stream);
}

void SequentialExecutor::run(const Call& c) {
  Resources& r = res_;
  const bool tma = is_tma_mover(c.plan.comm_algo);  // the mover the plan names, whatever the world
  run_sequential(r, c, [&](cudaStream_t stream) {
    const int span = r.stamp_span("comm", r.record.comm_name, "comm", stream);
    r.collective_unit(c, 0, c.plan.comm_ctas, stream, tma);
    r.end_span(span, stream);
  });
}

}  // namespace ovl::detail
