// Mode sequential (the baseline): the cuBLAS GEMM on the whole device, then the collective on the same stream
// (NCCL in a real world; in loopback the loopback collective with comm_ctas CTAs (default_plan(kSequential, p, hw,
// c): c CTAs, or NCCL's CTA count for c = 0 (nccl_default_ctas: the link profile's in a paced loopback, whose
// default_plan takes NCCL's count whatever c is)), the context's share, and the mover of plan.comm_algo: SIMT for the
// NCCL algorithms, the TMA movers for tma-pull / tma-push, so a baseline can use the same mover as the tma mode).
// AG+GEMM: gather, then GEMM. A real world's tma-push runs in TmaExecutor::run_real_sequential (its symmetric buffers);
// in a real world of 1 a TMA algorithm runs the loopback kernel's mover (a copy), not NCCL.
#include "executors.hpp"

namespace ovl::detail {

void SequentialExecutor::run(const Call& c) {
  Resources& r = res_;
  const int ctas = c.plan.comm_ctas;
  const bool tma = is_tma_mover(c.plan.comm_algo);  // the mover the plan names, whatever the world
  const std::string comm = r.record.comm_name;
  if (c.op == Op::kAllGatherGemm) {
    if (c.runs_comm()) {
      const int s0 = r.stamp_span("comm", comm, "comm", c.stream);
      r.collective_unit(c, 0, ctas, c.stream, tma);
      r.end_span(s0, c.stream);
    }
    if (c.runs_gemm()) {
      const int s1 = r.stamp_span("gemm", "gemm", "gemm", c.stream);
      r.cublas_gemm(c, c.gathered, c.c.ptr, 0, c.problem.m, c.stream);
      r.end_span(s1, c.stream);
    }
    return;
  }
  if (c.runs_gemm()) {
    const int s0 = r.stamp_span("gemm", "gemm", "gemm", c.stream);
    r.cublas_gemm(c, c.a.ptr, c.partial, 0, c.problem.m, c.stream);
    r.end_span(s0, c.stream);
  }
  if (c.runs_comm()) {
    const int s1 = r.stamp_span("comm", comm, "comm", c.stream);
    r.collective_unit(c, 0, ctas, c.stream, tma);
    r.end_span(s1, c.stream);
  }
}

}  // namespace ovl::detail
