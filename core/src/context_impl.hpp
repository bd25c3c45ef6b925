// Context internals shared by context.cpp (API, validation, caches) and executor_*.cpp (one runner per mode).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ovl/core/collectives.hpp"
#include "ovl/core/context.hpp"
#include "ovl/core/nccl_symmetric.hpp"
#include "ovl/core/sm_partition.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/kernels/loopback.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl {

namespace detail {

// Owns one cudaMalloc'ed block; frees it in the destructor (logging, never throwing).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Buffers of one Problem (shape): rank 0's partial product, the tile-major staging, the gathered A, and in
// loopback the other ranks' inputs and outputs.
struct ShapeState {
  Problem problem;
  DeviceBuffer partial;     // M x N (GEMM+AR/RS)
  DeviceBuffer tile_major;  // tiles x tile_m x tile_n, made when a plan asks for tile-major output
  DeviceBuffer gathered_a;  // M x K (AG+GEMM)
  DeviceBuffer gemm_workspace;
  DeviceBuffer tile_stamps;                      // one u64 per tile (tracing)
  std::vector<DeviceBuffer> peer_src, peer_dst;  // loopback ranks 1..W-1 (peer_dst: kWholeWorld, or kRank0 AR)
  // kRank0 GEMM+AR: peer_dst holds the full AllReduce result (the peers' reduced pieces rank 0 copies), computed
  // from the inputs of the call that made it (A and B pointers below; prepare_loopback_peers says when it is redone).
  const void* reduced_a = nullptr;
  const void* reduced_b = nullptr;
  uint64_t reduced_call = 0;  // the public call (Impl::call_epoch, from 1) whose inputs made them; 0: not made
  // Mode tma in a real world of more than one rank: the GEMM's output (M x N) and the collective's destination (RS:
  // M/W x N, AR: M x N), peer-mapped on every rank; made (collectively) by the first tma call of the shape.
  SymmetricBuffer sym_partial, sym_out;
  // comm_algo ce (executor_ce.cpp). Loopback and a world of 1: every owner's receive slots, [owner][source][slot].
  // A real world of more than one rank (peer-mapped, made collectively by the first ce call of the shape): this
  // rank's receive slots [source][slot], the AllReduce result (M x N) and the gathered A (M x K).
  DeviceBuffer ce_recv;
  SymmetricBuffer ce_recv_sym, ce_out_sym, ce_gathered_sym;
  // comm_algo nccl-symmetric: the buffers NCCL reads and writes, from ncclMemAlloc, registered as symmetric windows of
  // each communicator a call of the shape used (collectively, by its first such call: Impl::bind_nccl_symmetric).
  // GEMM+AR / GEMM+RS: the GEMM's output (M x N) and the collective's (AR: M x N, RS: M/W x N); AG+GEMM: this rank's
  // A rows (M/W x K) and the gathered A (M x K).
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
  std::unique_ptr<RangeTable> real_ranges;  // mode tma, a real world: (group, owner) -> rows of sym_partial / sym_out
  // An eager call of this problem and plan has enqueued (with tracing on: warm_traced): everything it allocates,
  // plans and tunes exists, so a call during CUDA Graph capture may reuse it (capture.cpp).
  bool warm = false, warm_traced = false;
};

// The key of a (problem, plan) pair in Context::Impl::plans.
std::string plan_key(const Problem& p, const Plan& plan);

// A call after validation, as the mode runners see it.
struct Call {
  Op op;
  Problem problem;
  Plan plan;
  TensorRef a, b, c;
  cudaStream_t stream;
  ShapeState* shape;
  PlanState* ps;
  // What the GEMM and the collective read and write (Impl::bind_buffers): GEMM+AR / GEMM+RS the GEMM's row-major
  // output (`partial`) and the collective's destination (`out`); AG+GEMM A's rows (`rows`) and the gathered A
  // (`gathered`). The shape's partial and gathered_a, C and A; comm_algo nccl-symmetric: its windows (nccl_src,
  // nccl_dst), A copied into them first and the result copied into C after each collective (collective_unit).
  void* partial = nullptr;
  void* out = nullptr;
  const void* rows = nullptr;
  void* gathered = nullptr;
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

}  // namespace detail

struct Context::Impl {
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  ContextOptions options;
  int device = 0;
  int rank = 0;
  int world = 1;
  bool loopback = false;
  LoopbackShare share = LoopbackShare::kRank0;
  bool fixed_inputs = false;  // ContextOptions::loopback_fixed_inputs
  // Calls in progress on this thread's stack: a public call (run, measure) is depth 1 and gets a new call_epoch;
  // measured tuning's candidate runs are nested in it and have its inputs (and its epoch).
  int call_depth = 0;
  uint64_t call_epoch = 0;
  int sms = 0;
  Hardware hw, plan_hw;
  // A paced loopback's link (ContextOptions::link_profile / OVL_LINK_PROFILE); plan_hw carries it too.
  std::optional<LinkProfile> link;
  uint64_t timeout_ns = 0;
  bool trace = false;
  testing::Part part = testing::Part::kAll;  // of the call being enqueued (testing::run_part)
  testing::Fault fault = testing::Fault::kNone;  // testing::set_fault

  cublasHandle_t cublas = nullptr;
  cudaStream_t comm_stream = nullptr;  // highest priority, non-blocking
  std::vector<cudaEvent_t> events;
  ncclComm_t comm = nullptr;
  bool own_comm = false;
  World world_ref;  // the real World of ContextOptions::world (its CTA-bounded communicators), else empty
  std::map<int, std::unique_ptr<SmPartition>> partitions;
  std::map<std::string, std::unique_ptr<detail::ShapeState>> shapes;
  std::map<std::string, std::unique_ptr<detail::PlanState>> plans;
  // Plan choices of calls without a plan, by problem name (tuning.cpp), and the plan cache file behind them.
  std::map<std::string, PlanChoice> choices;
  Tuning tuning = Tuning::kMeasured;
  PlanCache cache;
  std::string cache_path;  // empty: no file
  std::string gpu_name;    // cudaDeviceProp::name, part of a plan cache key

  static constexpr int kMaxGroups = 4096;
  static constexpr int kStampSlots = 1 << 16;
  detail::DeviceBuffer counters;  // u32 x kMaxGroups
  // Mode tma in a real world of more than one rank (made by its first call, collectively): the World's collectives
  // (TMA kernels over peer-mapped buffers) and the group counters as a symmetric buffer (their gate).
  std::unique_ptr<Collectives> real_coll;
  SymmetricBuffer sym_counters;  // u32 x kMaxGroups
  // The device error record of every wait this Context's kernels do (the counter wait kernel, the loopback movers,
  // the GEMM's waits for gathered rows; kernels::DeviceError): checked and cleared by synchronize().
  detail::DeviceBuffer error;
  // comm_algo ce (executor_ce.cpp): arrival flags, written with the call's epoch (a per-context sequence number of ce
  // calls, so nothing is ever reset) and waited for with cuStreamWaitValue32 (GEQ). Loopback and a world of 1: one
  // flag array per played owner (kMaxLoopbackRanks of them); a real world: this rank's array, peer-mapped.
  static constexpr int kCeFlagWords = 2 * kMaxGroups * kernels::kMaxLoopbackRanks + kernels::kMaxLoopbackRanks;
  detail::DeviceBuffer ce_flags;
  SymmetricBuffer ce_flags_sym;
  std::uint32_t ce_epoch = 0;
  bool ce_flush = false;  // the device supports CU_STREAM_WAIT_VALUE_FLUSH (waits on flags peers write)
  // Every stream memory wait of the ce calls enqueued since the communication stream was last seen idle: what the
  // host watchdog (ce_watchdog) checks and, past the timeout, releases.
  // What a gate waits for, kept as numbers: the message is formatted only when the watchdog reports it, not on every
  // call's enqueue.
  struct CeGate {
    enum class What { kStart, kRows, kRowsFor, kCounter, kSummedRows, kSummedGroupRows };
    const unsigned* addr;
    unsigned value;
    What what;
    int rank = -1, group = -1, for_rank = -1;  // the source rank, the tile group and the receiving rank, as used
    std::string describe() const;
  };
  std::vector<CeGate> ce_gates;
  cudaStream_t watchdog_stream = nullptr;  // non-blocking, highest priority: the watchdog's reads and releases
  detail::DeviceBuffer stamps;    // u64 x kStampSlots
  detail::TraceRecord record;
  int next_event = 0;
  int next_slot = 0;
  cudaStream_t last_stream = nullptr;
  // One call at a time: the calls, release_caches() and synchronize() take it, so another thread's release waits for
  // an enqueue to finish instead of freeing buffers under it (recursive: a call takes it again in plan_for() and measure()).
  std::recursive_mutex mutex;
  // Recorded on the caller's stream at the end of every call; the next call's stream waits for it, since calls
  // share the context's counters and per-shape buffers (calls on two streams would otherwise race on them).
  cudaEvent_t call_done = nullptr;
  bool call_done_recorded = false;

  // context.cpp
  cudaEvent_t event();         // the next event of this call (made on first use)
  // The caller's stream waits for the work on the communication stream and (when it is another) the GEMM stream.
  void join_streams(cudaStream_t caller, cudaStream_t gemm_stream, cudaStream_t comm_stream);
  int alloc_slots(int count);  // the first of `count` consecutive stamp slots of this call
  unsigned long long* slot_ptr(int index) const { return stamps.as<unsigned long long>() + index; }
  // The communicator for a collective on `ctas` CTAs: the World's communicator made with that CTA bound
  // (WorldOptions::nccl_cta_bounds) when there is one, else the default one (NCCL's own CTA choice).
  ncclComm_t nccl(int ctas = 0);
  // Whether the World has a communicator bounded to `ctas` CTAs (0: NCCL's own choice; WorldOptions::nccl_cta_bounds).
  bool has_nccl_bound(int ctas) const;
  SmPartition& partition(int comm_sms);
  detail::ShapeState& shape(const Problem& p);
  // shape(p) for the loopback accessors: checks the context is loopback and p's world, selects the device.
  detail::ShapeState& loopback_shape(const Problem& p, const char* api);
  detail::PlanState& plan_state(const Problem& p, const Plan& plan);
  // The GEMM's group counters: this rank's copy of sym_counters once a real world's tma mode made them, else local.
  unsigned* counter_ptr() const {
    return sym_counters.empty() ? counters.as<unsigned>() : static_cast<unsigned*>(sym_counters.local_ptr());
  }
  kernels::DeviceError* error_ptr() const { return error.as<kernels::DeviceError>(); }

  // tuning.cpp
  // Reads the plan cache file and the tuning policy (ContextOptions, else the environment); warns once about
  // entries of another GPU or version.
  void init_tuning(const ContextOptions& options);
  PlanCacheKey cache_key(const Problem& p) const;
  // The planner's result for `p` on plan_hw, restricted to the plans this context runs.
  sim::PlanResult plan_problem(const Problem& p, const Context& ctx) const;
  // The maximum over the ranks of each value (a real world: every rank passes as many; elsewhere the values).
  std::vector<double> max_over_ranks(std::vector<double> values) const;

  // capture.cpp: CUDA Graph capture. Whether `stream` is capturing; when it is, throws ovl::Error unless an eager
  // call of this problem (and plan, or the planner's cached plan when `plan` is empty) has run: a call during capture
  // may only enqueue work, never allocate, plan, tune or synchronize.
  bool check_capture(const Problem& p, const std::optional<Plan>& plan, cudaStream_t stream) const;
  // After an eager call has enqueued: its PlanState is warm.
  void note_warm(detail::PlanState& ps) const;

  // comm_algo nccl-symmetric: communicators split off the World's first one (or this context's own) per (CTA policy,
  // CTAs), made by the first call that needs one (collective: every rank makes the same calls). Destroyed after the
  // shapes, whose windows are registered on them.
  std::map<std::pair<CtaPolicy, int>, std::unique_ptr<NcclSymmetricComm>> nccl_symmetric_comms;
  // The communicator of an nccl-symmetric plan (made on first use).
  ncclComm_t nccl_symmetric(const Plan& plan);
  // Sets the call's buffers (Call::partial ...): the shape's, or for comm_algo nccl-symmetric the shape's windows,
  // made and registered on the plan's communicator on first use (collective), and A copied into its window on the
  // call's stream (AG+GEMM, unless only the GEMM runs).
  void bind_buffers(detail::Call& call);

  // executor_common.cpp
  // Rows [row_begin, row_end) of the GEMM on the whole device: cuBLAS, or for FP8 inputs our GEMM on every SM.
  void cublas_gemm(const detail::Call& call, const void* a, void* d, int64_t row_begin, int64_t row_end,
                   cudaStream_t stream);
  // The collective of unit u (a group, a chunk, or everything) on `stream`: NCCL in a real world (unless
  // force_kernel), else the loopback collective with `ctas` CTAs.
  void collective_unit(const detail::Call& call, int unit, int ctas, cudaStream_t stream, bool force_kernel = false);
  // The loopback collective's arguments for `call` with `ctas` CTAs: the context's share, the mover the plan's
  // comm_algo names (tma-pull / tma-push: the TMA movers; NCCL algorithms: the SIMT mover, NCCL's stand-in).
  kernels::LoopbackArguments loopback_args(const detail::Call& call, int ctas) const;
  // kRank0 GEMM+AR in loopback: (re)computes the peers' reduced pieces when missing or when A / B changed pointer.
  void prepare_loopback_peers(const detail::Call& call);
  // Tracing (no-ops returning -1 / null when tracing is off): a span is two stamp slots on one lane.
  int new_span(const std::string& lane, const std::string& name, const std::string& category);
  int stamp_span(const std::string& lane, const std::string& name, const std::string& category, cudaStream_t stream);
  unsigned long long* start_ptr(int span);
  void end_span(int span, cudaStream_t stream);
  // `d`: the row-major output when not the shape's partial product (mode tma in a real world: sym_partial).
  // AG+GEMM: reads the gathered A into C, signals nothing, and with wait_for_gather waits per tile for its group's
  // counter (released by run_gather_signaled).
  // `gathered`: AG+GEMM's gathered A when not the shape's gathered_a (comm_algo ce in a real world).
  void signaled_gemm(const detail::Call& call, int grid, cudaStream_t stream, void* d = nullptr,
                     bool wait_for_gather = false, const void* gathered = nullptr);
  // The streams a signaling mode runs its GEMM and its collective on (a partitioned plan's SmPartition's, else the
  // caller's and the communication stream), the GEMM's grid (signaled_gemm_grid) and the collective's CTAs
  // (signaled_comm_ctas), as the model and the simulator size them.
  struct SignaledLaunch {
    cudaStream_t gemm_stream, comm_stream;
    int grid, ctas;
  };
  SignaledLaunch signaled_launch(const detail::Call& call);
  // The signaling modes' start: the group counters reset on the caller's stream, then the GEMM stream (when it is
  // another) and the communication stream wait for that, so no consumer sees a previous run's counts.
  void start_signaled(const detail::Call& call, int groups, cudaStream_t gemm_stream, cudaStream_t comm_stream);

  // executor_*.cpp
  void run_sequential(const detail::Call& call);
  void run_decomposed(const detail::Call& call);
  void run_tile_signal(const detail::Call& call);  // kTileSignal and kGreenContext
  // run_tile_signal for AG+GEMM: each group's gather, then its counter released, on the communication stream; the
  // GEMM (one launch) waits per tile for its group's counter.
  void run_gather_signaled(const detail::Call& call, int grid, int ctas, cudaStream_t gemm_st, cudaStream_t comm_st);
  void run_tma(const detail::Call& call);
  // run_tma in a real world of more than one rank: the GEMM into sym_partial, the World's TMA collective gated by
  // the symmetric counters into sym_out, then sym_out copied to C.
  void run_tma_real(const detail::Call& call, int grid, int ctas, cudaStream_t gemm_st, cudaStream_t comm_st);
  // The shape's sym_partial and sym_out, made on first use (collective: every rank makes them at the same point).
  void make_symmetric_buffers(const Problem& p, detail::ShapeState& st);
  // comm_algo ce (mode tile-signal): stream memory operations gate copy-engine copies on the GEMM's counters.
  void run_copy_engine(const detail::Call& call);
  // The host-side watchdog of the ce waits (stream memory waits cannot time out): waits up to the context's timeout
  // for the communication stream; past it, reads every recorded gate, writes the awaited value into each one not
  // reached (cuStreamWriteValue32 on watchdog_stream), waits for the stream to drain and returns what was missing
  // ("" when the stream finished in time). Clears the recorded gates either way.
  std::string ce_watchdog();
};

namespace detail {

// One public call's scope (Context::run, Context::measure): the outermost one on the stack starts a new call_epoch;
// the candidate runs of measured tuning, nested in it, keep it (and so share the kRank0 AR peers' pieces).
class CallScope {
 public:
  explicit CallScope(Context::Impl& s) : s_(s) {
    if (s_.call_depth++ == 0) ++s_.call_epoch;
  }
  ~CallScope() { --s_.call_depth; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  Context::Impl& s_;
};

}  // namespace detail

}  // namespace ovl
