// Mode decomposed (TransformerEngine's split pipeline, PyTorch Async-TP): the GEMM in row chunks with cuBLAS on
// the caller's stream; chunk i's collective runs on the context's high-priority communication stream as soon as
// chunk i's GEMM is done (event chained), overlapping chunk i+1's GEMM. AG+GEMM runs the other way round: gather
// chunk i on the communication stream, then its GEMM rows on the caller's stream.
#include <fmt/format.h>

#include "context_impl.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

void Context::Impl::run_decomposed(const detail::Call& c) {
  const int ctas = c.plan.comm_ctas;
  const detail::PlanState& ps = *c.ps;
  cudaEvent_t start = event();
  OVL_CUDA_CHECK(cudaEventRecord(start, c.stream));
  OVL_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, start, 0));
  const bool gemm = part != testing::Part::kComm, coll = part != testing::Part::kGemm, chain = gemm && coll;
  for (int u = 0; u < ps.units; ++u) {
    const int64_t r0 = ps.row_begin[size_t(u)], r1 = ps.row_end[size_t(u)];
    if (c.op == Op::kAllGatherGemm) {
      if (coll) {
        const int sc = stamp_span("comm", fmt::format("{} chunk {}", record.comm_name, u), "comm", comm_stream);
        collective_unit(c, u, ctas, comm_stream);
        end_span(sc, comm_stream);
      }
      if (chain) {
        cudaEvent_t ready = event();
        OVL_CUDA_CHECK(cudaEventRecord(ready, comm_stream));
        OVL_CUDA_CHECK(cudaStreamWaitEvent(c.stream, ready, 0));
      }
      if (gemm) {
        const int sg = stamp_span("gemm", fmt::format("chunk {}", u), "gemm", c.stream);
        cublas_gemm(c, c.gathered, c.c.ptr, r0, r1, c.stream);
        end_span(sg, c.stream);
      }
    } else {
      if (gemm) {
        const int sg = stamp_span("gemm", fmt::format("chunk {}", u), "gemm", c.stream);
        cublas_gemm(c, c.a.ptr, c.partial, r0, r1, c.stream);
        end_span(sg, c.stream);
      }
      if (chain) {
        cudaEvent_t ready = event();
        OVL_CUDA_CHECK(cudaEventRecord(ready, c.stream));
        OVL_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, ready, 0));
      }
      if (coll) {
        const int sc = stamp_span("comm", fmt::format("{} chunk {}", record.comm_name, u), "comm", comm_stream);
        collective_unit(c, u, ctas, comm_stream);
        end_span(sc, comm_stream);
      }
    }
  }
  cudaEvent_t done = event();
  OVL_CUDA_CHECK(cudaEventRecord(done, comm_stream));
  OVL_CUDA_CHECK(cudaStreamWaitEvent(c.stream, done, 0));
}

}  // namespace ovl
