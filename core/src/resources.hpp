// What the executors (executors.hpp) are given: the Context's identity, a validated call with the caches of its
// shape and plan, and the resources every executor shares (resources.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ovl/core/context.hpp"
#include "ovl/core/nccl_symmetric.hpp"
#include "ovl/core/sm_partition.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/kernels/loopback.hpp"

namespace ovl::detail {

// A buffer of the Context's (ovl::DeviceBuffer); its allocation failure says what frees memory.
inline DeviceBuffer context_buffer(size_t bytes) {
  return DeviceBuffer(bytes, "ovl::Context's buffers: Context::release_caches() frees those of earlier shapes");
}

// What a Context is, fixed when it is made: its device and world, and the profiles and the timeout its calls use.
struct ContextIdentity {
  int device = 0;
  int rank = 0;
  int world = 1;
  bool loopback = false;
  LoopbackShare share = LoopbackShare::kRank0;
  int sms = 0;
  std::string gpu_name;  // cudaDeviceProp::name, part of a plan cache key
  Hardware hw, plan_hw;
  // A paced loopback's link (ContextOptions::link_profile / OVL_LINK_PROFILE); plan_hw carries it too.
  std::optional<LinkProfile> link;
  uint64_t timeout_ns = 0;
  World world_ref;  // the real World of ContextOptions::world (its CTA-bounded communicators), else empty

  // A real world of more than one rank (not loopback, not a world of 1).
  bool real_world() const { return !loopback && world > 1; }
  // Whether the World has a communicator bounded to `ctas` CTAs (0: NCCL's own choice; WorldOptions::nccl_cta_bounds).
  bool has_nccl_bound(int ctas) const;
};

// The buffers of one Problem (shape) that several executors use, each made by the first call that needs it: rank 0's
// partial product or the gathered A, the GEMM's workspace, and in loopback the other ranks' inputs and outputs.
struct ShapeState {
  Problem problem;
  // Made by Resources::bind_buffers for the plans that read them (not for nccl-symmetric's windows below, nor for an
  // executor that binds its own: tma and ce in a real world).
  DeviceBuffer partial;     // M x N (GEMM+AR/RS)
  DeviceBuffer gathered_a;  // M x K (AG+GEMM)
  DeviceBuffer gemm_workspace;
  DeviceBuffer tile_stamps;                      // one u64 per tile (tracing)
  std::vector<DeviceBuffer> peer_src, peer_dst;  // loopback ranks 1..W-1 (peer_dst: kWholeWorld, or kRank0 AR)
  // kRank0 GEMM+AR: peer_dst holds the full AllReduce result (the peers' reduced pieces rank 0 copies), computed
  // from the inputs of the call that made it (A and B pointers below; prepare_loopback_peers says when it is redone).
  const void* reduced_a = nullptr;
  const void* reduced_b = nullptr;
  uint64_t reduced_call = 0;  // the public call (Impl::call_epoch, from 1) whose inputs made them; 0: not made
  // comm_algo nccl-symmetric (any mode that takes it): the buffers NCCL reads and writes, from ncclMemAlloc,
  // registered as symmetric windows of each communicator a call of the shape used (collectively, by its first such
  // call: Resources::bind_buffers). GEMM+AR / GEMM+RS: the GEMM's output (M x N) and the collective's (AR: M x N, RS:
  // M/W x N); AG+GEMM: this rank's A rows (M/W x K) and the gathered A (M x K).
  std::unique_ptr<NcclSymmetricBuffer> nccl_src, nccl_dst;
};

// What one Plan needs on the device for one Problem: the row range of each unit (tile group or chunk), the
// counters' expected values, and the loopback range table (unit u, owner r) -> elements.
struct PlanState {
  std::vector<int64_t> row_begin, row_end;          // per unit; AG: rows of the gathered A / of C
  std::vector<int> tile_rows_begin, tile_rows_end;  // per group (signal modes): tile rows
  std::vector<unsigned> expected_host;
  DeviceBuffer expected;        // u32 per group
  DeviceBuffer expected_fault;  // the same with the last group + 1 (Fault::kCounterTooHigh)
  DeviceBuffer ranges;          // LoopbackRange[units * world]
  int units = 0;
  // An eager call of this problem and plan has enqueued (with tracing on: warm_traced): everything it allocates,
  // plans and tunes exists, so a call during CUDA Graph capture may reuse it (capture.cpp).
  bool warm = false, warm_traced = false;
};

// The key of a (problem, plan) pair in Context::Impl::plans.
std::string plan_key(const Problem& p, const Plan& plan);

// A call after validation, as the executors see it.
struct Call {
  Op op;
  Problem problem;
  Plan plan;
  TensorRef a, b, c;
  cudaStream_t stream;
  ShapeState* shape;
  PlanState* ps;
  testing::Part part = testing::Part::kAll;      // testing::run_part
  testing::Fault fault = testing::Fault::kNone;  // testing::set_fault
  // What the GEMM and the collective read and write (Executor::bind): GEMM+AR / GEMM+RS the GEMM's row-major output
  // (`partial`) and the collective's destination (`out`, C unless bound otherwise); AG+GEMM A's rows (`rows`, A
  // unless bound otherwise) and the gathered A (`gathered`). The shape's partial and gathered_a; comm_algo
  // nccl-symmetric: its windows (nccl_src, nccl_dst), A copied into them first and the result copied into C after
  // each collective (collective_unit); tma and ce in a real world: their peer-mapped buffers.
  void* partial = nullptr;
  void* out = nullptr;
  const void* rows = nullptr;
  void* gathered = nullptr;

  bool runs_gemm() const { return part != testing::Part::kComm; }
  bool runs_comm() const { return part != testing::Part::kGemm; }
};

// Stamp slots of the last call and how they become a Timeline.
struct TraceRecord {
  struct Span {
    std::string lane, name, category;
    int start_slot, end_slot;
  };
  bool valid = false;
  int slots_used = 0;
  std::vector<Span> spans;
  // Signaled GEMM: tile stamps (by tile id) and the groups' tile id ranges; the GEMM lane gets one interval per group.
  bool tile_stamps = false;
  const unsigned long long* tile_stamp_ptr = nullptr;
  int gemm_start_slot = -1;
  std::vector<std::pair<int64_t, int64_t>> group_tiles;
  // Persistent collective: per group and CTA [start, end] stamps from slot cta_base on.
  int cta_base = -1, cta_count = 0, cta_groups = 0;
  std::string comm_name;  // "reduce-scatter", "all-reduce", "all-gather"
};

// What every executor uses, one per Context: the cuBLAS handle, the communication stream, the events and stamp slots of
// the call being enqueued, NCCL's communicators, the green-context partitions, the group counters and the device error
// record; and the pieces the executors are built from: the GEMM on a row range, one unit's collective, the signaled
// GEMM, the tracing spans.
struct Resources {
  explicit Resources(const ContextIdentity& identity);
  ~Resources();
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  static constexpr int kMaxGroups = 4096;
  static constexpr int kStampSlots = 1 << 16;

  const ContextIdentity& id;
  cublasHandle_t cublas = nullptr;
  cudaStream_t comm_stream = nullptr;  // highest priority, non-blocking
  std::vector<cudaEvent_t> events;
  int next_event = 0;
  ncclComm_t comm = nullptr;
  bool own_comm = false;
  std::map<int, std::unique_ptr<SmPartition>> partitions;
  // comm_algo nccl-symmetric: communicators split off the World's first one (or this context's own) per (CTA policy,
  // CTAs), made by the first call that needs one (collective: every rank makes the same calls). Destroyed after the
  // shapes, whose windows are registered on them.
  std::map<std::pair<CtaPolicy, int>, std::unique_ptr<NcclSymmetricComm>> nccl_symmetric_comms;
  DeviceBuffer counters;  // u32 x kMaxGroups
  // The group counters as a symmetric buffer (made by mode tma's first call in a real world of more than one rank,
  // collectively: make_symmetric_counters); every signaling call uses them from then on.
  SymmetricBuffer sym_counters;  // u32 x kMaxGroups
  // The device error record of every wait this Context's kernels do (the counter wait kernel, the loopback movers,
  // the GEMM's waits for gathered rows; kernels::DeviceError): checked and cleared by Context::synchronize.
  DeviceBuffer error;
  DeviceBuffer stamps;  // u64 x kStampSlots
  TraceRecord record;
  int next_slot = 0;

  // A new call of `op`: its events and stamp slots from the first, its trace record empty (valid when `trace`).
  void begin_call(Op op, bool trace);
  cudaEvent_t event();  // the next event of this call (made on first use)
  // The caller's stream waits for the work on the communication stream and (when it is another) the GEMM stream.
  void join_streams(cudaStream_t caller, cudaStream_t gemm_st, cudaStream_t comm_st);
  int alloc_slots(int count);  // the first of `count` consecutive stamp slots of this call
  unsigned long long* slot_ptr(int index) const { return stamps.as<unsigned long long>() + index; }
  // The communicator for a collective on `ctas` CTAs: the World's communicator made with that CTA bound
  // (WorldOptions::nccl_cta_bounds) when there is one, else the default one (NCCL's own CTA choice).
  ncclComm_t nccl(int ctas = 0);
  // The communicator of an nccl-symmetric plan (made on first use).
  ncclComm_t nccl_symmetric(const Plan& plan);
  SmPartition& partition(int comm_sms);
  // The GEMM's group counters: this rank's copy of sym_counters once made, else local.
  unsigned* counter_ptr() const {
    return sym_counters.empty() ? counters.as<unsigned>() : static_cast<unsigned*>(sym_counters.local_ptr());
  }
  void make_symmetric_counters();  // sym_counters on first use (collective), zero-filled
  kernels::DeviceError* error_ptr() const { return error.as<kernels::DeviceError>(); }

  // Executor::bind's default: the shape's partial product (GEMM+AR/RS) or gathered A (AG+GEMM), made on first use;
  // for comm_algo nccl-symmetric the shape's windows instead, made and registered on the plan's communicator on first
  // use (collective), and A copied into its window on the call's stream (AG+GEMM, unless only the GEMM runs).
  void bind_buffers(Call& call);
  // Rows [row_begin, row_end) of the GEMM: cuBLAS, or for FP8 inputs our GEMM, on the whole device or on the plan's
  // gemm_sms when fewer (cuBLAS's SM count target; our GEMM's grid).
  void cublas_gemm(const Call& call, const void* a, void* d, int64_t row_begin, int64_t row_end, cudaStream_t stream);
  // The collective of unit u (a group, a chunk, or everything) on `stream`: NCCL in a real world (unless
  // force_kernel), else the loopback collective with `ctas` CTAs.
  void collective_unit(const Call& call, int unit, int ctas, cudaStream_t stream, bool force_kernel = false);
  // The loopback collective's arguments for `call` with `ctas` CTAs: the context's share, the mover the plan's
  // comm_algo names (tma-pull / tma-push: the TMA movers; NCCL algorithms: the SIMT mover, NCCL's stand-in); paced
  // as one call over every row.
  kernels::LoopbackArguments loopback_args(const Call& call, int ctas) const;
  // In a paced loopback (a link profile, rank 0's share, world > 1): `a`'s pace and latency for a call of
  // `call_bytes` buffer bytes whose busiest link carries `link_load` times an even share; elsewhere no pace.
  void pace(kernels::LoopbackArguments& a, const Call& call, double call_bytes, double link_load) const;
  // Our GEMM over the whole problem on `grid` CTAs: GEMM+AR/RS reads A and writes Call::partial (or, given
  // `tile_major`, the plan's tile-major output into that buffer, grown here), signaling the group counters;
  // AG+GEMM reads Call::gathered into C, signals nothing, and with gathered_at > 0 waits per tile until its group's
  // counter reaches gathered_at (the value the gather's releases of one group add up to).
  void signaled_gemm(const Call& call, int grid, cudaStream_t stream, unsigned gathered_at = 0,
                     DeviceBuffer* tile_major = nullptr);
  // The streams a signaling mode runs its GEMM and its collective on (a partitioned plan's SmPartition's, else the
  // caller's and the communication stream), the GEMM's grid (signaled_gemm_grid) and the collective's CTAs
  // (signaled_comm_ctas), as the model and the simulator size them.
  struct SignaledLaunch {
    cudaStream_t gemm_stream, comm_stream;
    int grid, ctas;
  };
  SignaledLaunch signaled_launch(const Call& call);
  // The signaling modes' start: the group counters reset on the caller's stream, then the GEMM stream (when it is
  // another) and the communication stream wait for that, so no consumer sees a previous run's counts.
  void start_signaled(const Call& call, int groups, cudaStream_t gemm_stream, cudaStream_t comm_stream);
  // Tracing (no-ops returning -1 / null when tracing is off): a span is two stamp slots on one lane.
  int new_span(const std::string& lane, const std::string& name, const std::string& category);
  int stamp_span(const std::string& lane, const std::string& name, const std::string& category, cudaStream_t stream);
  unsigned long long* start_ptr(int span);
  void end_span(int span, cudaStream_t stream);

 private:
  void release() noexcept;  // the destructor, and a constructor that throws
};

}  // namespace ovl::detail
