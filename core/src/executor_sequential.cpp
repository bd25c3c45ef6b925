// Mode sequential (the baseline): the cuBLAS GEMM on the whole device, then the collective on the same stream
// (NCCL in a real world; in loopback the loopback collective with comm_ctas CTAs (default_plan(kSequential, p, hw,
// c): c CTAs, or NCCL's CTA count for c = 0 (nccl_default_ctas: the link profile's in a paced loopback, whose
// default_plan takes NCCL's count whatever c is)), the context's share, and the mover of plan.comm_algo: SIMT for the
// NCCL algorithms, the TMA movers for tma-pull / tma-push, so a baseline can use the same mover as the tma mode).
// AG+GEMM: gather, then GEMM.
#include "context_impl.hpp"

namespace ovl {

void Context::Impl::run_sequential(const detail::Call& c) {
  const int ctas = c.plan.comm_ctas;
  const std::string comm = record.comm_name;
  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm;
  if (c.op == Op::kAllGatherGemm) {
    if (coll) {
      const int s0 = stamp_span("comm", comm, "comm", c.stream);
      collective_unit(c, 0, ctas, c.stream);
      end_span(s0, c.stream);
    }
    if (gemm) {
      const int s1 = stamp_span("gemm", "gemm", "gemm", c.stream);
      cublas_gemm(c, c.gathered, c.c.ptr, 0, c.problem.m, c.stream);
      end_span(s1, c.stream);
    }
    return;
  }
  if (gemm) {
    const int s0 = stamp_span("gemm", "gemm", "gemm", c.stream);
    cublas_gemm(c, c.a.ptr, c.partial, 0, c.problem.m, c.stream);
    end_span(s0, c.stream);
  }
  if (coll) {
    const int s1 = stamp_span("comm", comm, "comm", c.stream);
    collective_unit(c, 0, ctas, c.stream);
    end_span(s1, c.stream);
  }
}

}  // namespace ovl
