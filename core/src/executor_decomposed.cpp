// Mode decomposed (TransformerEngine's split pipeline, PyTorch Async-TP): the GEMM in row chunks with cuBLAS on
// the caller's stream; chunk i's collective runs on the context's high-priority communication stream as soon as
// chunk i's GEMM is done (event chained), overlapping chunk i+1's GEMM. AG+GEMM runs the other way round: gather
// chunk i on the communication stream, then its GEMM rows on the caller's stream.
#include <fmt/format.h>

#include "executors.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl::detail {

void DecomposedExecutor::run(const Call& c) {
  Resources& r = res_;
  const int ctas = c.plan.comm_ctas;
  const PlanState& ps = *c.ps;
  cudaStream_t comm_st = r.comm_stream;
  cudaEvent_t start = r.event();
  OVL_CUDA_CHECK(cudaEventRecord(start, c.stream));
  OVL_CUDA_CHECK(cudaStreamWaitEvent(comm_st, start, 0));
  const bool gemm = c.runs_gemm(), coll = c.runs_comm(), chain = gemm && coll;
  const auto chunk_gemm = [&](const void* a, void* d, int u) {
    const int sg = r.stamp_span("gemm", fmt::format("chunk {}", u), "gemm", c.stream);
    r.cublas_gemm(c, a, d, ps.row_begin[size_t(u)], ps.row_end[size_t(u)], c.stream);
    r.end_span(sg, c.stream);
  };
  const auto chunk_comm = [&](int u) {
    const int sc = r.stamp_span("comm", fmt::format("{} chunk {}", r.record.comm_name, u), "comm", comm_st);
    r.collective_unit(c, u, ctas, comm_st);
    r.end_span(sc, comm_st);
  };
  // `waiter` waits for what `from` has enqueued so far.
  const auto follow = [&](cudaStream_t waiter, cudaStream_t from) {
    cudaEvent_t ready = r.event();
    OVL_CUDA_CHECK(cudaEventRecord(ready, from));
    OVL_CUDA_CHECK(cudaStreamWaitEvent(waiter, ready, 0));
  };
  for (int u = 0; u < ps.units; ++u) {
    if (c.op == Op::kAllGatherGemm) {
      if (coll) chunk_comm(u);
      if (chain) follow(c.stream, comm_st);
      if (gemm) chunk_gemm(c.gathered, c.c.ptr, u);
    } else {
      if (gemm) chunk_gemm(c.a.ptr, c.partial, u);
      if (chain) follow(comm_st, c.stream);
      if (coll) chunk_comm(u);
    }
  }
  follow(c.stream, comm_st);
}

}  // namespace ovl::detail
