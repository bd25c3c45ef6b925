// What the executors share (resources.hpp): made once per Context; the cuBLAS GEMM on a row range, one unit's
// collective (NCCL or loopback), the signaled GEMM launch and the tracing stamps.
#include "resources.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>

#include "ovl/core/gemm.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/kernels/reduce.hpp"
#include "ovl/kernels/wait.hpp"
#include "ovl/model/estimate.hpp"
#include "world_internal.hpp"

namespace ovl::detail {
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
      throw ::ovl::Error("cublas", #call, "resources.cpp", __LINE__,                                               \
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
kernels::GemmArguments gemm_arguments(const Call& call, const void* a, void* d, int64_t rows, int sms) {
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
void* gemm_workspace(const Call& call, const kernels::GemmArguments& g) {
  DeviceBuffer& ws = call.shape->gemm_workspace;
  const size_t bytes = kernels::gemm_workspace_bytes(g);
  if (ws.bytes() < bytes) ws = context_buffer(bytes);
  return ws.get();
}

}  // namespace

bool ContextIdentity::has_nccl_bound(int ctas) const {
  if (!world_ref.valid()) return false;
  const std::vector<int>& bounds = world_ref.nccl_cta_bounds();
  return std::find(bounds.begin(), bounds.end(), ctas) != bounds.end();
}

Resources::Resources(const ContextIdentity& identity) : id(identity) {
  // A World made without NCCL (WorldOptions::create_nccl = false) runs the tma mode only; nccl() says so.
  if (id.has_nccl_bound(0)) comm = id.world_ref.nccl_comm(0);
  try {
    if (cublasCreate(&cublas) != CUBLAS_STATUS_SUCCESS) OVL_FAIL("cublasCreate failed on device {}", id.device);
    int least = 0, greatest = 0;
    OVL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    OVL_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream, cudaStreamNonBlocking, greatest));
    counters = context_buffer(sizeof(unsigned) * kMaxGroups);
    fill_now(counters.get(), 0, counters.bytes(), comm_stream);
    error = context_buffer(sizeof(kernels::DeviceError));
    fill_now(error.get(), 0, error.bytes(), comm_stream);
    stamps = context_buffer(sizeof(unsigned long long) * kStampSlots);
    // Lazy module loading would load a mover's module at its first launch, waiting for the running GEMM: load now.
    kernels::preload_loopback_kernels();
    kernels::preload_wait_kernels();  // the counter wait, the stamps; AG+GEMM releases its groups with add_counters
    kernels::preload_sum_kernels();   // comm_algo ce's reduction
  } catch (...) {
    release();  // no destructor runs for a constructor that throws
    throw;
  }
}

Resources::~Resources() { release(); }

// Destructors log, never throw. The Context has synchronized the device and freed its shapes (and with them the
// nccl-symmetric windows) first.
void Resources::release() noexcept {
  nccl_symmetric_comms.clear();  // after the shapes' windows, before the communicator they were split off
  partitions.clear();
  for (cudaEvent_t e : events) (void)cudaEventDestroy(e);
  if (comm_stream != nullptr) (void)cudaStreamDestroy(comm_stream);
  if (cublas != nullptr) (void)cublasDestroy(cublas);
  if (own_comm && comm != nullptr) (void)ncclCommDestroy(comm);
}

void Resources::begin_call(Op op, bool trace) {
  next_event = 0;
  next_slot = 0;
  record = TraceRecord{};
  record.valid = trace;
  record.comm_name = op == Op::kGemmAllReduce       ? "all-reduce"
                     : op == Op::kGemmReduceScatter ? "reduce-scatter"
                                                    : "all-gather";
}

cudaEvent_t Resources::event() {
  if (next_event == int(events.size())) {
    cudaEvent_t e = nullptr;
    OVL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events.push_back(e);
  }
  return events[size_t(next_event++)];
}

void Resources::join_streams(cudaStream_t caller, cudaStream_t gemm_st, cudaStream_t comm_st) {
  for (cudaStream_t s : {comm_st, gemm_st}) {
    if (s == caller) continue;
    cudaEvent_t done = event();
    OVL_CUDA_CHECK(cudaEventRecord(done, s));
    OVL_CUDA_CHECK(cudaStreamWaitEvent(caller, done, 0));
  }
}

int Resources::alloc_slots(int count) {
  OVL_CHECK(next_slot + count <= kStampSlots, "tracing: {} stamp slots needed, {} available", next_slot + count,
            kStampSlots);
  const int first = next_slot;
  next_slot += count;
  return first;
}

ncclComm_t Resources::nccl(int ctas) {
  if (ctas > 0 && id.has_nccl_bound(ctas)) return id.world_ref.nccl_comm(ctas);
  if (comm == nullptr) {
    OVL_CHECK(!id.loopback, "NCCL is not used in a loopback world of {} ranks", id.world);
    OVL_CHECK(!id.world_ref.valid() || id.world == 1,
              "this Context's World of {} ranks has no NCCL communicator (made with WorldOptions::create_nccl = false "
              "or without the bound 0): only ovl's TMA collective runs on it (mode tma, sequential with tma-push)",
              id.world);
    OVL_CUDA_CHECK(cudaSetDevice(id.device));
    comm = one_rank_nccl_comm(0);
    own_comm = true;
  }
  return comm;
}

ncclComm_t Resources::nccl_symmetric(const Plan& plan) {
  const auto key = std::pair(plan.cta_policy, plan.comm_ctas);
  auto it = nccl_symmetric_comms.find(key);
  if (it == nccl_symmetric_comms.end()) {
    // Split off the World's first communicator, or this context's own (a world of 1 without a World).
    const World& w = id.world_ref;
    const bool world_comm = w.valid() && !w.nccl_cta_bounds().empty();
    const ncclComm_t parent = world_comm ? w.nccl_comm(w.nccl_cta_bounds().front()) : nccl(0);
    it = nccl_symmetric_comms.emplace(key, std::make_unique<NcclSymmetricComm>(parent, plan.cta_policy, plan.comm_ctas))
             .first;
  }
  return it->second->get();
}

SmPartition& Resources::partition(int comm_sms) {
  auto it = partitions.find(comm_sms);
  if (it == partitions.end()) it = partitions.emplace(comm_sms, SmPartition::split(id.device, comm_sms)).first;
  return *it->second;
}

void Resources::make_symmetric_counters() {
  if (sym_counters.empty()) sym_counters = SymmetricBuffer(id.world_ref, sizeof(unsigned) * kMaxGroups);
}

void Resources::bind_buffers(Call& c) {
  ShapeState& st = *c.shape;
  const Problem& p = c.problem;
  const bool ag = p.op == Op::kAllGatherGemm;
  if (c.plan.comm_algo != CommAlgo::kNcclSymmetric) {
    // The gathered A in A's type, the GEMM's output in C's.
    if (ag) {
      if (st.gathered_a.get() == nullptr) st.gathered_a = context_buffer(size_t(p.m * p.k * dtype_bytes(p.dtype)));
      c.gathered = st.gathered_a.get();
    } else {
      if (st.partial.get() == nullptr) st.partial = context_buffer(size_t(p.m * p.n * dtype_bytes(p.output_dtype())));
      c.partial = st.partial.get();
    }
    return;
  }
  const int64_t eb = dtype_bytes(ag ? p.dtype : p.comm_dtype());  // A's rows, or the partial products' type
  const int64_t out_rows = p.op == Op::kGemmReduceScatter ? p.m / id.world : p.m;
  const size_t src_bytes = size_t(ag ? p.m / id.world * p.k * eb : p.m * p.n * eb);
  const size_t dst_bytes = size_t(ag ? p.m * p.k * eb : out_rows * p.n * eb);
  // Every rank makes and registers them in the same order, at its first nccl-symmetric call of the shape (on the
  // communicator), as it makes the same calls.
  if (!st.nccl_src) st.nccl_src = std::make_unique<NcclSymmetricBuffer>(id.world_ref, src_bytes);
  if (!st.nccl_dst) st.nccl_dst = std::make_unique<NcclSymmetricBuffer>(id.world_ref, dst_bytes);
  const ncclComm_t symmetric = nccl_symmetric(c.plan);
  st.nccl_src->register_on(symmetric);
  st.nccl_dst->register_on(symmetric);
  if (ag) {
    c.rows = st.nccl_src->get();
    c.gathered = st.nccl_dst->get();
    // A into its window before any gather: every mode's communication stream follows the call's stream from here.
    if (c.runs_comm())
      OVL_CUDA_CHECK(cudaMemcpyAsync(st.nccl_src->get(), c.a.ptr, src_bytes, cudaMemcpyDeviceToDevice, c.stream));
  } else {
    c.partial = st.nccl_src->get();
    c.out = st.nccl_dst->get();
  }
}

// Row-major D[rows r0..r1) = A[r0..r1) B through cuBLAS' column-major view: D^T (N x rows) = op(B') A'^T, where
// A' (row-major M x K) is a K x M column-major matrix and B' is N x K (kNxK, transposed) or K x N... read as N x K.
// FP8 inputs: our GEMM instead (tune_gemm's plan, as bench_gemm's `ovl`), scaled by call.a / call.b's
// scales, since cuBLASLt's FP8 matmul answered CUBLAS_STATUS_NOT_SUPPORTED for every algorithm its heuristic offered
// on an H100 (bench_gemm, docs/performance.md).
void Resources::cublas_gemm(const Call& call, const void* a, void* d, int64_t r0, int64_t r1, cudaStream_t stream) {
  const Problem& p = call.problem;
  const int64_t rows = r1 - r0;
  if (rows <= 0) return;
  const int64_t eb = dtype_bytes(p.dtype);
  const void* a_rows = offset(a, r0 * p.k, eb);
  void* d_rows = offset(d, r0 * p.n, int64_t(dtype_bytes(p.output_dtype())));
  // A plan's gemm_sms below the device's (sequential, decomposed) leaves the rest to the collective: our GEMM's grid,
  // or cuBLAS's heuristics targeting that many SMs (cublasSetSmCountTarget; 0: the device's).
  const int sms = call.plan.gemm_sms > 0 && call.plan.gemm_sms < id.sms ? call.plan.gemm_sms : id.sms;
  if (unsignaled_gemm_impl(p.dtype) == GemmImpl::kOvl) {
    kernels::GemmArguments g = gemm_arguments(call, a_rows, d_rows, rows, sms);
    tune_gemm(g);
    kernels::gemm_run(g, gemm_workspace(call, g), stream);
    return;
  }
  const cudaDataType_t t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const float alpha = 1.f, beta = 0.f;
  OVL_CUBLAS_CHECK(cublasSetStream(cublas, stream));
  OVL_CUBLAS_CHECK(cublasSetSmCountTarget(cublas, sms < id.sms ? sms : 0));
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

void Resources::pace(kernels::LoopbackArguments& a, const Call& call, double call_bytes, double link_load) const {
  if (!(id.loopback && id.link && a.play == LoopbackShare::kRank0 && a.world > 1)) return;
  // The paced loopback: each CTA's share of the link at most, and at most its transport's per-CTA rate (the SIMT
  // mover stands in for NCCL: NCCL's rate for a call of these bytes); the call's link steps' latency per group.
  const Collective coll = collective_of(call.problem.op);
  const CommAlgo algo = call.plan.comm_algo;
  a.pace_ns_per_byte = link_load / id.link->paced_cta_GBps(algo, a.ctas, coll, call_bytes);  // GB/s = bytes per ns
  a.pace_latency_ns = id.link->latency_measured(algo, call_bytes)
                          ? 0
                          : std::uint32_t(std::lround(link_steps(coll, algo, a.world) * id.link->latency_us * 1e3));
}

kernels::LoopbackArguments Resources::loopback_args(const Call& call, int ctas) const {
  kernels::LoopbackArguments a;
  const Problem& p = call.problem;
  a.op = collective_of(p.op);
  a.dtype = p.comm_dtype();
  a.world = id.loopback ? id.world : 1;
  a.play = id.share;
  a.mover = is_tma_mover(call.plan.comm_algo) ? call.plan.comm_algo : CommAlgo::kSimt;
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
  a.threads = 512;
  pace(a, call, double(p.comm_bytes()), 1.0);
  a.timeout_ns = id.timeout_ns;
  a.error = error_ptr();
  return a;
}

void Resources::collective_unit(const Call& call, int unit, int ctas, cudaStream_t stream, bool force_kernel) {
  const Problem& p = call.problem;
  if (id.loopback || force_kernel) {
    kernels::LoopbackArguments a = loopback_args(call, ctas);
    a.first_group = unit;
    a.num_groups = 1;
    // The paced stand-in for NCCL paces a unit as the real world's call of the unit's bytes, and as its calls load the
    // link (nccl_unit_link_load: an ncclReduce / ncclBroadcast per owner carries all of the unit's bytes on each link).
    if (is_nccl(call.plan.comm_algo)) {
      const int64_t r0 = call.ps->row_begin[size_t(unit)], r1 = call.ps->row_end[size_t(unit)];
      pace(a, call, nccl_unit_call_bytes(p, r0, r1), nccl_unit_link_load(p, r0, r1));
    }
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
  const int64_t mb = p.m / id.world;
  const bool whole = !nccl_per_owner(p, r0, r1);  // else one ncclReduce / ncclBroadcast per owner
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
      NcclGroup group;
      for (int r = 0; r < id.world; ++r) {
        const OwnerRows o = owner_rows(p, r0, r1, r);
        if (o.rows() == 0) continue;
        void* recv = r == id.rank ? offset(call.out, o.block_row * p.n, eb) : offset(partial, o.begin * p.n, eb);
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
      NcclGroup group;
      for (int r = 0; r < id.world; ++r) {
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

void Resources::signaled_gemm(const Call& call, int grid, cudaStream_t stream, unsigned gathered_at,
                              DeviceBuffer* tile_major) {
  const Problem& p = call.problem;
  const bool ag = p.op == Op::kAllGatherGemm;
  // AG+GEMM: the gathered A in, C out (row-major: can_run refuses tile-major).
  kernels::GemmArguments g =
      gemm_arguments(call, ag ? call.gathered : call.a.ptr, ag ? call.c.ptr : call.partial, p.m, grid);
  // Row bands, or swizzle bands of kSwizzleRows tile rows (can_run: groups of whole bands either way).
  g.tile_order = call.plan.tile_order == TileOrder::kSwizzle ? TileOrder::kSwizzle : TileOrder::kRowBand;
  if (g.tile_order == TileOrder::kSwizzle) g.swizzle = kSwizzleRows;
  g.tile_groups = call.plan.tile_groups;
  // Whole tiles only (no stream_k_tiles): the model's and the simulator's timelines of the signaled modes count the
  // GEMM in whole waves, and a stream-K tail would move when its groups signal (bench_gemm measures it on its own).
  if (ag) {
    // The counters are the gather's releases, which the GEMM waits on; it signals nothing.
    if (gathered_at > 0) {
      g.wait_counters = counter_ptr();
      g.wait_value = gathered_at;
      g.wait_timeout_ns = id.timeout_ns;
      g.wait_error = error_ptr();
    } else {
      g.tile_groups.clear();  // neither waits nor signals: the groups mean nothing to this launch
    }
  } else {
    g.group_counters = counter_ptr();
    if (tile_major != nullptr) {
      g.output_layout = OutputLayout::kTileMajor;
      const size_t bytes = kernels::gemm_output_bytes(g);
      if (tile_major->bytes() < bytes) *tile_major = context_buffer(bytes);
      g.d = tile_major->get();
    }
  }
  const int tiles = kernels::gemm_tile_count(g);
  // The epilogue bench_gemm's tuned `ovl` runs for this shape and grid (tune_gemm's rule, which the model's GEMM
  // parameters were fitted on). Both it can pick signal a tile after its stores, the deferred one a k-block later.
  g.epilogue = tuned_gemm_epilogue(g);
  if (record.valid) {
    ShapeState& st = *call.shape;
    if (st.tile_stamps.bytes() < size_t(tiles) * 8) st.tile_stamps = context_buffer(size_t(tiles) * 8);
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
  if (call.fault == testing::Fault::kSkipGemm) return;  // test-only: nothing will ever signal
  kernels::gemm_run(g, workspace, stream);
}

Resources::SignaledLaunch Resources::signaled_launch(const Call& c) {
  const Plan& plan = c.plan;
  const Hardware& hw = id.plan_hw;
  if (!plan.partitioned)
    return {c.stream, comm_stream, signaled_gemm_grid(plan, c.problem, hw), signaled_comm_ctas(plan, hw)};
  SmPartition& pt = partition(plan.comm_sms);
  return {pt.gemm_stream(), pt.comm_stream(), signaled_gemm_grid(plan, c.problem, hw, pt.gemm_sms()),
          signaled_comm_ctas(plan, hw, pt.comm_sms())};
}

void Resources::start_signaled(const Call& c, int groups, cudaStream_t gemm_st, cudaStream_t comm_st) {
  kernels::launch_reset_counters(counter_ptr(), groups, c.stream);
  cudaEvent_t start = event();
  OVL_CUDA_CHECK(cudaEventRecord(start, c.stream));
  if (gemm_st != c.stream) OVL_CUDA_CHECK(cudaStreamWaitEvent(gemm_st, start, 0));
  OVL_CUDA_CHECK(cudaStreamWaitEvent(comm_st, start, 0));
}

int Resources::new_span(const std::string& lane, const std::string& name, const std::string& category) {
  if (!record.valid) return -1;
  const int first = alloc_slots(2);
  record.spans.push_back(TraceRecord::Span{lane, name, category, first, first + 1});
  return int(record.spans.size()) - 1;
}

int Resources::stamp_span(const std::string& lane, const std::string& name, const std::string& category,
                          cudaStream_t stream) {
  const int span = new_span(lane, name, category);
  if (span >= 0) kernels::launch_stamp(start_ptr(span), stream);
  return span;
}

unsigned long long* Resources::start_ptr(int span) {
  return span < 0 ? nullptr : slot_ptr(record.spans[size_t(span)].start_slot);
}

void Resources::end_span(int span, cudaStream_t stream) {
  if (span >= 0) kernels::launch_stamp(slot_ptr(record.spans[size_t(span)].end_slot), stream);
}

}  // namespace ovl::detail
