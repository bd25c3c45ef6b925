// Pieces every mode runner uses: the cuBLAS GEMM on a row range, one unit's collective (NCCL or loopback), the
// signaled GEMM launch and the tracing stamps.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>

#include "context_impl.hpp"
#include "ovl/core/gemm.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/kernels/wait.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "cuBLAS error";
  }
}

#define OVL_CUBLAS_CHECK(call)                                                                                     \
  do {                                                                                                             \
    const cublasStatus_t ovl_cublas_status_ = (call);                                                              \
    if (ovl_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                               \
      throw ::ovl::Error("cublas", #call, "executor_common.cpp", __LINE__,                                         \
                         fmt::format("{} ({})", cublas_status_name(ovl_cublas_status_), int(ovl_cublas_status_))); \
  } while (0)

// FP8 (an AllGather's A) is only moved, never summed: as bytes.
ncclDataType_t nccl_type(DType d) { return is_fp8(d) ? ncclUint8 : d == DType::kBF16 ? ncclBfloat16 : ncclFloat16; }

template <typename T>
T* offset(T* base, int64_t elements, int64_t element_bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<std::conditional_t<std::is_const_v<T>, const char, char>*>(base) +
                              elements * element_bytes);
}

// Our GEMM's arguments for `rows` rows of A at `a` times the call's B into `d`, on `sms` SMs; FP8: B's and C's types
// and the scales (of the whole A: AG+GEMM's gathered A included).
kernels::GemmArguments gemm_arguments(const detail::Call& call, const void* a, void* d, int64_t rows, int sms) {
  const Problem& p = call.problem;
  kernels::GemmArguments g;
  g.m = int(rows);
  g.n = int(p.n);
  g.k = int(p.k);
  g.dtype = p.dtype;
  if (is_fp8(p.dtype)) {
    g.b_dtype = call.b.dtype;
    g.out_dtype = p.output_dtype();
    g.a_scale = call.a.scale;
    g.b_scale = call.b.scale;
  }
  g.b_layout = p.b_layout;
  g.a = a;
  g.b = call.b.ptr;
  g.d = d;
  g.sm_count = sms;
  return g;
}

// The shape's GEMM workspace, grown to what `g` needs.
void* gemm_workspace(const detail::Call& call, const kernels::GemmArguments& g) {
  detail::DeviceBuffer& ws = call.shape->gemm_workspace;
  const size_t bytes = kernels::gemm_workspace_bytes(g);
  if (ws.bytes() < bytes) ws = detail::DeviceBuffer(bytes);
  return ws.get();
}

}  // namespace

// Row-major D[rows r0..r1) = A[r0..r1) B through cuBLAS' column-major view: D^T (N x rows) = op(B') A'^T, where
// A' (row-major M x K) is a K x M column-major matrix and B' is N x K (kNxK, transposed) or K x N... read as N x K.
// FP8 inputs: our GEMM on every SM instead (tune_gemm's plan, as bench_gemm's `ovl`), scaled by call.a / call.b's
// scales, since cuBLASLt's FP8 matmul answered CUBLAS_STATUS_NOT_SUPPORTED for every algorithm its heuristic offered
// on an H100 (bench_gemm, docs/performance.md).
void Context::Impl::cublas_gemm(const detail::Call& call, const void* a, void* d, int64_t r0, int64_t r1,
                                cudaStream_t stream) {
  const Problem& p = call.problem;
  const int64_t rows = r1 - r0;
  if (rows <= 0) return;
  const int64_t eb = dtype_bytes(p.dtype);
  const void* a_rows = offset(a, r0 * p.k, eb);
  void* d_rows = offset(d, r0 * p.n, int64_t(dtype_bytes(p.output_dtype())));
  if (unsignaled_gemm_impl(p.dtype) == GemmImpl::kOvl) {
    kernels::GemmArguments g = gemm_arguments(call, a_rows, d_rows, rows, sms);
    tune_gemm(g);
    kernels::gemm_run(g, gemm_workspace(call, g), stream);
    return;
  }
  const cudaDataType_t t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.f, beta = 0.f;
  OVL_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  if (p.b_layout == BLayout::kNxK) {
    OVL_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(p.n), int(rows), int(p.k), &alpha, call.b.ptr,
                                  t, int(p.k), a_rows, t, int(p.k), &beta, d_rows, t, int(p.n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  } else {
    OVL_CUBLAS_CHECK(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, int(p.n), int(rows), int(p.k), &alpha, call.b.ptr,
                                  t, int(p.n), a_rows, t, int(p.k), &beta, d_rows, t, int(p.n), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  }
}

kernels::LoopbackArguments Context::Impl::loopback_args(const detail::Call& call, int ctas) const {
  kernels::LoopbackArguments a;
  const Problem& p = call.problem;
  a.op = collective_of(p.op);
  a.dtype = p.comm_dtype();
  a.world = loopback ? world : 1;
  a.play = share;
  a.mover = call.plan.comm_algo == CommAlgo::kTmaPull   ? kernels::CollectiveAlgo::kTmaPull
            : call.plan.comm_algo == CommAlgo::kTmaPush ? kernels::CollectiveAlgo::kTmaPush
                                                        : kernels::CollectiveAlgo::kSimt;
  if (p.op == Op::kAllGatherGemm) {
    a.src[0] = call.rows;
    a.dst[0] = call.gathered;
  } else {
    a.src[0] = call.partial;
    a.dst[0] = call.out;
  }
  for (int r = 1; r < a.world; ++r) {
    a.src[r] = call.shape->peer_src[size_t(r - 1)].get();
    a.dst[r] = call.shape->peer_dst.empty() ? nullptr : call.shape->peer_dst[size_t(r - 1)].get();
  }
  a.ranges = call.ps->ranges.as<kernels::LoopbackRange>();
  a.ctas = std::max(1, ctas);
  if (loopback && link && a.play == LoopbackShare::kRank0 && a.world > 1) {
    // The paced loopback: each CTA's share of the link at most, and at most its transport's per-CTA rate (the SIMT
    // mover stands in for NCCL: NCCL's channel rate); the call's link steps' latency per group.
    const Collective coll = collective_of(p.op);
    a.pace_ns_per_byte = 1.0 / link->paced_cta_GBps(call.plan.comm_algo, a.ctas);  // GB/s = bytes per ns
    a.pace_latency_ns =
        std::uint32_t(std::lround(link_steps(coll, call.plan.comm_algo, a.world) * link->latency_us * 1e3));
  }
  a.threads = 512;
  a.timeout_ns = timeout_ns;
  a.error = error_ptr();
  return a;
}

// The peers' reduced pieces for kRank0 GEMM+AR: rank 0's partial product of this call (cuBLAS), then the
// whole-world AllReduce (SIMT mover, every SM, ungated) into the peers' outputs. Rank 0's own output slot of that
// launch points at peer 1's buffer: the same thread stores the same value to both, so there is no race and no
// extra buffer. Enqueued on the call's stream before the mode runs: on every public call (its inputs may have
// changed in place), once for all candidate runs of measured tuning, and with loopback_fixed_inputs once per shape
// and A / B pointers.
void Context::Impl::prepare_loopback_peers(const detail::Call& call) {
  detail::ShapeState& st = *call.shape;
  if (!loopback || share != LoopbackShare::kRank0 || call.op != Op::kGemmAllReduce) return;
  const bool same_pointers = st.reduced_call != 0 && st.reduced_a == call.a.ptr && st.reduced_b == call.b.ptr;
  if (same_pointers && (fixed_inputs || st.reduced_call == call_epoch)) return;
  OVL_CHECK(st.peer_dst.size() == size_t(world - 1), "loopback: the peers' output buffers of {} are missing",
            call.problem.name());
  cublas_gemm(call, call.a.ptr, st.partial.get(), 0, call.problem.m, call.stream);
  kernels::LoopbackArguments a = loopback_args(call, sms);
  a.play = LoopbackShare::kWholeWorld;
  a.mover = kernels::CollectiveAlgo::kSimt;
  a.dst[0] = st.peer_dst[0].get();
  a.pace_ns_per_byte = 0;  // setup of the emulation, not a collective of rank 0's: never paced
  a.pace_latency_ns = 0;
  a.first_group = 0;
  a.num_groups = call.ps->units;
  kernels::launch_loopback_collective(a, call.stream);
  st.reduced_call = call_epoch;
  st.reduced_a = call.a.ptr;
  st.reduced_b = call.b.ptr;
}

void Context::Impl::collective_unit(const detail::Call& call, int unit, int ctas, cudaStream_t stream,
                                    bool force_kernel) {
  const Problem& p = call.problem;
  if (loopback || force_kernel) {
    kernels::LoopbackArguments a = loopback_args(call, ctas);
    a.first_group = unit;
    a.num_groups = 1;
    kernels::launch_loopback_collective(a, stream);
    return;
  }
  // A real world: NCCL on the unit's rows (contiguous in row-major order), on the plan's comm_ctas CTAs when the
  // World has a communicator bounded to that many (a plan without comm_ctas: NCCL's own choice); nccl-symmetric on
  // its own communicator, bounded to comm_ctas, between its windows (Call::partial ..., Plan::validate: whole-buffer
  // units but for AllReduce), then the unit's result copied into C.
  const bool symmetric = call.plan.comm_algo == CommAlgo::kNcclSymmetric;
  ncclComm_t c = symmetric ? nccl_symmetric(call.plan) : nccl(call.plan.comm_ctas);
  const ncclDataType_t t = nccl_type(p.comm_dtype());
  const int64_t eb = dtype_bytes(p.comm_dtype());
  const int64_t r0 = call.ps->row_begin[size_t(unit)], r1 = call.ps->row_end[size_t(unit)];
  const int64_t mb = p.m / world;
  const bool whole = r0 == 0 && r1 == p.m;
  void* partial = call.partial;
  switch (p.op) {
    case Op::kGemmAllReduce:
      OVL_NCCL_CHECK(ncclAllReduce(offset(partial, r0 * p.n, eb), offset(call.out, r0 * p.n, eb),
                                   size_t((r1 - r0) * p.n), t, ncclSum, c, stream));
      if (call.out != call.c.ptr) {
        OVL_CUDA_CHECK(cudaMemcpyAsync(offset(call.c.ptr, r0 * p.n, eb), offset(call.out, r0 * p.n, eb),
                                       size_t((r1 - r0) * p.n * eb), cudaMemcpyDeviceToDevice, stream));
      }
      break;
    case Op::kGemmReduceScatter: {
      if (whole) {
        OVL_NCCL_CHECK(ncclReduceScatter(partial, call.out, size_t(mb * p.n), t, ncclSum, c, stream));
        if (call.out != call.c.ptr) {
          OVL_CUDA_CHECK(
              cudaMemcpyAsync(call.c.ptr, call.out, size_t(mb * p.n * eb), cudaMemcpyDeviceToDevice, stream));
        }
        break;
      }
      // The unit's rows, owner by owner: a reduce to each owner of its part (NCCL's ReduceScatter needs every
      // owner's part to be the same size).
      detail::NcclGroup group;
      for (int r = 0; r < world; ++r) {
        const OwnerRows o = owner_rows(p, r0, r1, r);
        if (o.rows() == 0) continue;
        void* recv = r == rank ? offset(call.out, o.block_row * p.n, eb) : offset(partial, o.begin * p.n, eb);
        OVL_NCCL_CHECK(
            ncclReduce(offset(partial, o.begin * p.n, eb), recv, size_t(o.rows() * p.n), t, ncclSum, r, c, stream));
      }
      group.end();
      break;
    }
    case Op::kAllGatherGemm: {
      void* gathered = call.gathered;
      if (whole) {
        OVL_NCCL_CHECK(ncclAllGather(call.rows, gathered, size_t(mb * p.k), t, c, stream));
        break;
      }
      detail::NcclGroup group;
      for (int r = 0; r < world; ++r) {
        const OwnerRows o = owner_rows(p, r0, r1, r);
        if (o.rows() == 0) continue;
        OVL_NCCL_CHECK(ncclBroadcast(offset(call.rows, o.block_row * p.k, eb), offset(gathered, o.begin * p.k, eb),
                                     size_t(o.rows() * p.k), t, r, c, stream));
      }
      group.end();
      break;
    }
  }
}

void Context::Impl::signaled_gemm(const detail::Call& call, int grid, cudaStream_t stream, void* d,
                                  bool wait_for_gather, const void* gathered) {
  const Problem& p = call.problem;
  detail::ShapeState& st = *call.shape;
  kernels::GemmArguments g = gemm_arguments(call, call.a.ptr, nullptr, p.m, grid);
  // Row bands, or swizzle bands of kSwizzleRows tile rows (can_run: groups of whole bands either way).
  g.tile_order = call.plan.tile_order == TileOrder::kSwizzle ? TileOrder::kSwizzle : TileOrder::kRowBand;
  if (g.tile_order == TileOrder::kSwizzle) g.swizzle = kSwizzleRows;
  g.tile_groups = call.plan.tile_groups;
  // Whole tiles only (no stream_k_tiles): the model's and the simulator's timelines of the signaled modes count the
  // GEMM in whole waves, and a stream-K tail would move when its groups signal (bench_gemm measures it on its own).
  if (p.op == Op::kAllGatherGemm) {
    // The gathered A in, C out (row-major: can_run refuses tile-major); the counters are the gather's releases,
    // which the GEMM waits on; it signals nothing.
    g.a = gathered != nullptr ? gathered : call.gathered;
    g.d = call.c.ptr;
    if (wait_for_gather) {
      g.wait_counters = counter_ptr();
      g.wait_timeout_ns = timeout_ns;
      g.wait_error = error_ptr();
    } else {
      g.tile_groups.clear();  // neither waits nor signals: the groups mean nothing to this launch
    }
  } else {
    g.group_counters = counter_ptr();
    if (call.plan.output == OutputLayout::kTileMajor) {
      g.output_layout = call.plan.output;
      const size_t bytes = kernels::gemm_output_bytes(g);
      if (st.tile_major.bytes() < bytes) st.tile_major = detail::DeviceBuffer(bytes);
      g.d = st.tile_major.get();
    } else {
      g.d = d != nullptr ? d : call.partial;
    }
  }
  const int tiles = kernels::gemm_tile_count(g);
  // The epilogue bench_gemm's tuned `ovl` runs for this shape and grid (tune_gemm's rule, which the model's GEMM
  // parameters were fitted on). Both it can pick signal a tile after its stores, the deferred one a k-block later.
  g.epilogue = tuned_gemm_epilogue(g);
  if (record.valid) {
    if (st.tile_stamps.bytes() < size_t(tiles) * 8) st.tile_stamps = detail::DeviceBuffer(size_t(tiles) * 8);
    g.tile_timestamps = st.tile_stamps.as<unsigned long long>();
    record.tile_stamps = true;
    record.tile_stamp_ptr = g.tile_timestamps;
    record.gemm_start_slot = alloc_slots(1);
    kernels::launch_stamp(slot_ptr(record.gemm_start_slot), stream);
    int64_t t = 0;
    for (int n : call.plan.tile_groups) {
      record.group_tiles.emplace_back(t, t + n);
      t += n;
    }
  }
  void* workspace = gemm_workspace(call, g);
  if (fault == testing::Fault::kSkipGemm) return;  // test-only: nothing will ever signal
  kernels::gemm_run(g, workspace, stream);
}

Context::Impl::SignaledLaunch Context::Impl::signaled_launch(const detail::Call& c) {
  const Plan& plan = c.plan;
  if (!plan.partitioned)
    return {c.stream, comm_stream, signaled_gemm_grid(plan, c.problem, plan_hw), signaled_comm_ctas(plan, plan_hw)};
  SmPartition& pt = partition(plan.comm_sms);
  return {pt.gemm_stream(), pt.comm_stream(), signaled_gemm_grid(plan, c.problem, plan_hw, pt.gemm_sms()),
          signaled_comm_ctas(plan, plan_hw, pt.comm_sms())};
}

void Context::Impl::start_signaled(const detail::Call& c, int groups, cudaStream_t gemm_st, cudaStream_t comm_st) {
  kernels::launch_reset_counters(counter_ptr(), groups, c.stream);
  cudaEvent_t start = event();
  OVL_CUDA_CHECK(cudaEventRecord(start, c.stream));
  if (gemm_st != c.stream) OVL_CUDA_CHECK(cudaStreamWaitEvent(gemm_st, start, 0));
  OVL_CUDA_CHECK(cudaStreamWaitEvent(comm_st, start, 0));
}

int Context::Impl::new_span(const std::string& lane, const std::string& name, const std::string& category) {
  if (!record.valid) return -1;
  const int first = alloc_slots(2);
  record.spans.push_back(detail::TraceRecord::Span{lane, name, category, first, first + 1});
  return int(record.spans.size()) - 1;
}

int Context::Impl::stamp_span(const std::string& lane, const std::string& name, const std::string& category,
                              cudaStream_t stream) {
  const int span = new_span(lane, name, category);
  if (span >= 0) kernels::launch_stamp(start_ptr(span), stream);
  return span;
}

unsigned long long* Context::Impl::start_ptr(int span) {
  return span < 0 ? nullptr : slot_ptr(record.spans[size_t(span)].start_slot);
}

void Context::Impl::end_span(int span, cudaStream_t stream) {
  if (span >= 0) kernels::launch_stamp(slot_ptr(record.spans[size_t(span)].end_slot), stream);
}

}  // namespace ovl
