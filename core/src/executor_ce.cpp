// comm_algo ce (mode tile-signal): the communication leaves every SM to the GEMM. No kernel polls: the GEMM's group
// counters gate stream memory operations on the communication stream (cuStreamWaitValue32, GEQ), which then copy the
// group's rows with cudaMemcpyAsync (peer copies run on the copy engines) and raise the destination's arrival flag
// (cuStreamWriteValue32, which fences the copies before it). Flags carry the call's epoch, a per-context sequence
// number of ce calls, so no flag is ever reset: a wait compares GEQ epoch.
//
// GEMM+ReduceScatter: owner o's rows are the row block [rb(o), re(o)); source s pushes each finished group's
// rows of block o into o's receive slot s (one slot per source; its own rows stay in its partial product), then sets
// o's flag (g, s). Owner o waits for the (g, s) flags and sums its partial rows and the W - 1 slots in fp32 in rank
// order (kernels::launch_sum, comm_ctas CTAs): per group when the GEMM's grid leaves comm_ctas SMs
// (ce_sums_per_group: gemm_sms + comm_ctas <= SMs), else once after the GEMM, which holds every SM until then.
// GEMM+AllReduce: the ReduceScatter above over W near-equal row blocks, then the copy-engine AllGather of the sums
// (per group, or each whole block at the end): the owner copies its summed rows to every peer's output and sets its
// gather flag there.
// AllGather+GEMM: each rank's rows of A go group by group to every peer's gathered A, each group's copies followed by
// the peer's flag (g, s); the rank's communication stream waits for every source's flag of group g, then writes
// counter[g] = 1 (cuStreamWriteValue32), which the GEMM's per-group waits (for >= 1) consume. The rank's own rows
// are copied into its gathered A before the GEMM starts (a same-device copy needs an SM, and the GEMM's CTAs wait in
// place on every SM).
//
// Worlds. A real World of more than one rank: receive slots, flags, the AllReduce result and the gathered A are
// peer-mapped (SymmetricBuffer), and a barrier of flags at the start of each call (every rank raises its flag on
// every peer, then waits for theirs) keeps a rank's pushes of call e + 1 behind the peers' last reads of call e.
// A world of 1: the sum is a copy; AllGather copies the rank's rows. Loopback: the peers are buffers on the same
// device, and the copies are same-device copies, which run on SMs: correct, but the copy engines' overlap cannot
// show (docs/overlap.md, "Copy engine"); AllGather+GEMM there leaves comm_ctas SMs beside the GEMM for the copies.
// kWholeWorld plays every rank's copies and sums; kRank0 plays what rank 0 sends and receives (its ReduceScatter
// pushes land in scratch slots; its AllGather sends are not played, since the peers' outputs are not kept).
//
// Stream memory waits cannot time out: every wait is recorded (gates_) and Context::synchronize's watchdog
// (CopyEngineExecutor::watchdog) releases the ones not reached after the timeout and reports them
// (docs/reliability.md).
#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "executors.hpp"
#include "ovl/core/driver_api.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/reduce.hpp"

namespace ovl::detail {
namespace {

constexpr int kFlagRanks = kernels::kMaxLoopbackRanks;

char* bytes_at(const void* base, int64_t offset) {
  return static_cast<char*>(const_cast<void*>(base)) + offset;
}

// The flag words of one owner: (group g, source s) at g * kFlagRanks + s; then the AllReduce's gather flags (unit u:
// a group, or 0 for a whole block; from owner o); then the start barrier (from rank r).
constexpr int kGroupFlags = Resources::kMaxGroups * kFlagRanks;
unsigned data_flag(int g, int s) { return unsigned(g * kFlagRanks + s); }
unsigned gather_flag(int u, int o) { return unsigned(kGroupFlags + u * kFlagRanks + o); }
unsigned barrier_flag(int r) { return unsigned(2 * kGroupFlags + r); }

}  // namespace

CopyEngineExecutor::~CopyEngineExecutor() {
  if (watchdog_stream_ != nullptr) (void)cudaStreamDestroy(watchdog_stream_);
}

CopyEngineExecutor::Shape& CopyEngineExecutor::shape(const Call& c) {
  const Problem& p = c.problem;
  const int w = res_.id.world;
  const bool ag = p.op == Op::kAllGatherGemm;
  const int64_t eb = dtype_bytes(p.comm_dtype());  // AG: A's type (FP8 moves as bytes); RS / AR: C's
  const int64_t slot_bytes = (p.m + w - 1) / w * p.n * eb;
  Shape& sh = shapes_[p.name()];
  // The flags are zero and epochs start at 1.
  if (res_.id.real_world()) {
    const World& world = res_.id.world_ref;
    if (flags_sym_.empty()) flags_sym_ = SymmetricBuffer(world, sizeof(unsigned) * kFlagWords);
    if (ag && sh.gathered_sym.empty()) sh.gathered_sym = SymmetricBuffer(world, size_t(p.m * p.k * eb));
    if (!ag && sh.recv_sym.empty()) sh.recv_sym = SymmetricBuffer(world, size_t(w) * size_t(slot_bytes));
    if (p.op == Op::kGemmAllReduce && sh.out_sym.empty()) sh.out_sym = SymmetricBuffer(world, size_t(p.m * p.n * eb));
  } else {
    if (flags_.bytes() == 0) {
      flags_ = context_buffer(sizeof(unsigned) * size_t(kFlagWords) * kFlagRanks);
      fill_now(flags_.get(), 0, flags_.bytes());
    }
    if (!ag && sh.recv.bytes() < size_t(w) * size_t(w) * size_t(slot_bytes))
      sh.recv = context_buffer(size_t(w) * size_t(w) * size_t(slot_bytes));
  }
  return sh;
}

void CopyEngineExecutor::bind(Call& c) {
  Shape& sh = shape(c);
  if (res_.id.real_world() && c.op == Op::kAllGatherGemm) {
    c.gathered = sh.gathered_sym.local_ptr();
    return;
  }
  Executor::bind(c);
}

void CopyEngineExecutor::run(const Call& c) {
  const DriverApi& api = require_stream_memory_ops();
  Resources& res = res_;
  const Plan& plan = c.plan;
  const Problem& p = c.problem;
  const ShapeState& st = *c.shape;
  const PlanState& ps = *c.ps;
  const Shape& sh = shape(c);
  const int w = res.id.world;
  const bool real = res.id.real_world();
  const bool whole = res.id.loopback && res.id.share == LoopbackShare::kWholeWorld;
  const bool ag = p.op == Op::kAllGatherGemm, ar = p.op == Op::kGemmAllReduce;
  const int groups = int(plan.tile_groups.size());
  const int64_t eb = dtype_bytes(p.comm_dtype());  // AG: A's type (FP8 moves as bytes); RS / AR: C's
  const int64_t cols = ag ? p.k : p.n;  // row length of what moves
  const int64_t row_bytes = cols * eb;
  // Row blocks: owner o holds rows [rb(o), re(o)), ovl::owner_rows over all of M (ReduceScatter / AllGather: M / W
  // each; AllReduce: near-equal runs).
  const auto rb = [&](int o) { return owner_rows(p, 0, p.m, o).begin; };
  const auto re = [&](int o) { return owner_rows(p, 0, p.m, o).end; };
  const int64_t slot_rows = (p.m + w - 1) / w;
  const int64_t slot_bytes = slot_rows * p.n * eb;
  const int me = real ? res.id.rank : 0;
  const bool gemm = c.runs_gemm(), coll = c.runs_comm();
  cudaStream_t gemm_st = c.stream, comm_st = res.comm_stream;

  if (watchdog_stream_ == nullptr) {
    int least = 0, greatest = 0;
    OVL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    OVL_CUDA_CHECK(cudaStreamCreateWithPriority(&watchdog_stream_, cudaStreamNonBlocking, greatest));
    int flush = 0;
    OVL_CUDA_CHECK(cudaDeviceGetAttribute(&flush, cudaDevAttrCanFlushRemoteWrites, res.id.device));
    flush_ = flush != 0;
  }
  // The gates of earlier calls are done once the stream is idle (the watchdog needs only those still pending).
  if (const cudaError_t q = cudaStreamQuery(comm_st); q == cudaSuccess) {
    gates_.clear();
  } else if (q == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error
  }
  const unsigned epoch = ++epoch_;

  // Views of the world: rank r's flags, sources, receive slots and outputs (a real world: peer-mapped pointers).
  const auto flags = [&](int o) -> unsigned* {
    return real ? flags_sym_.peer<unsigned>(o) : flags_.as<unsigned>() + size_t(o) * size_t(kFlagWords);
  };
  const auto partial_of = [&](int s) -> const void* {
    if (ag) return s == 0 || real ? c.a.ptr : st.peer_src[size_t(s - 1)].get();
    return s == 0 || real ? c.partial : st.peer_src[size_t(s - 1)].get();
  };
  const auto recv = [&](int o, int s) -> char* {
    if (real) return bytes_at(sh.recv_sym.peer_ptr(o), int64_t(s) * slot_bytes);
    return bytes_at(sh.recv.get(), (int64_t(o) * w + s) * slot_bytes);
  };
  // The output holding owner o's rows: RS: o's M / W rows; AR: M x N (the result); AG: the gathered A (M x K).
  const auto out = [&](int o) -> void* {
    if (real) {
      if (ag) return sh.gathered_sym.peer_ptr(o);
      return ar ? sh.out_sym.peer_ptr(o) : c.c.ptr;
    }
    if (o == 0) return ag ? c.gathered : c.c.ptr;
    return st.peer_dst.empty() ? nullptr : st.peer_dst[size_t(o - 1)].get();
  };
  // What this rank (or the emulation) plays: real: its own sends and receives; kWholeWorld: all; kRank0: rank 0's.
  const auto plays_send = [&](int s, int o) {
    if (real) return s == me;
    if (whole) return true;
    return o == 0 || (s == 0 && !ag);  // kRank0: receives, and its ReduceScatter pushes into scratch slots
  };
  const auto plays_owner = [&](int o) { return real ? o == me : whole || o == 0; };

  const auto copy = [&](void* dst, const void* src, int64_t bytes, cudaStream_t s) {
    if (bytes > 0) OVL_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDefault, s));
  };
  const auto write = [&](unsigned* addr, unsigned value, cudaStream_t s) {
    OVL_CU_CHECK(api.cuStreamWriteValue32(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(addr), value,
                                          CU_STREAM_WRITE_VALUE_DEFAULT));
  };
  const auto wait = [&](const unsigned* addr, unsigned value, bool remote, Gate::What what, int rank, int group = -1,
                        int for_rank = -1) {
    const unsigned flags_word = CU_STREAM_WAIT_VALUE_GEQ | (remote && flush_ ? CU_STREAM_WAIT_VALUE_FLUSH : 0u);
    OVL_CU_CHECK(api.cuStreamWaitValue32(reinterpret_cast<CUstream>(comm_st), reinterpret_cast<CUdeviceptr>(addr),
                                         value, flags_word));
    gates_.push_back(Gate{addr, value, what, rank, group, for_rank});
  };
  // Rows [r0, r1) of the gathered rows cut at owner o's block.
  const auto cut = [&](int64_t r0, int64_t r1, int o) {
    return std::pair<int64_t, int64_t>{std::max(r0, rb(o)), std::min(r1, re(o))};
  };

  res.start_signaled(c, groups, gemm_st, comm_st);
  // A real world: the start barrier (each rank's previous call is over once it raises its flag here).
  if (real && coll) {
    for (int r = 0; r < w; ++r)
      if (r != me) write(flags(r) + barrier_flag(me), epoch, comm_st);
    for (int r = 0; r < w; ++r)
      if (r != me) wait(flags(me) + barrier_flag(r), epoch, true, Gate::What::kStart, r);
  }

  if (ag) {
    // The receivers' own rows, before the GEMM (whose CTAs then wait on every SM).
    for (int o = 0; coll && o < w; ++o) {
      if (!plays_owner(o) || out(o) == nullptr) continue;
      copy(bytes_at(out(o), rb(o) * row_bytes), partial_of(o), (re(o) - rb(o)) * row_bytes, gemm_st);
    }
    // Loopback copies are same-device copies on SMs: the GEMM leaves comm_ctas of them (can_run checks it fits).
    const int grid = signaled_gemm_grid(plan, p, res.id.plan_hw);
    if (gemm) res.signaled_gemm(c, grid, gemm_st, /*gathered_at=*/coll ? 1u : 0u);
    for (int g = 0; coll && g < groups; ++g) {
      const int64_t r0 = ps.row_begin[size_t(g)], r1 = ps.row_end[size_t(g)];
      for (int s = 0; s < w; ++s) {
        const auto [a0, a1] = cut(r0, r1, s);
        if (a1 <= a0) continue;
        for (int o = 0; o < w; ++o) {
          if (o == s || !plays_send(s, o) || out(o) == nullptr) continue;
          copy(bytes_at(out(o), a0 * row_bytes), bytes_at(partial_of(s), (a0 - rb(s)) * row_bytes),
               (a1 - a0) * row_bytes, comm_st);
          write(flags(o) + data_flag(g, s), epoch, comm_st);
        }
      }
      // Rank 0's (a real world: this rank's) GEMM: every source's rows of the group, then its counter.
      const int o = me;
      unsigned need = epoch;
      if (c.fault == testing::Fault::kCounterTooHigh && g == groups - 1) ++need;  // a peer that never arrives
      for (int s = 0; s < w; ++s) {
        const auto [a0, a1] = cut(r0, r1, s);
        if (s == o || a1 <= a0) continue;
        wait(flags(o) + data_flag(g, s), need, real, Gate::What::kRows, s, g);
      }
      if (gemm) write(res.counter_ptr() + g, 1u, comm_st);  // the GEMM waits for >= GemmArguments::wait_value (1)
    }
    res.join_streams(c.stream, gemm_st, comm_st);
    return;
  }

  // GEMM+RS / GEMM+AR: the GEMM on every SM (nothing polls), its partial product in Call::partial.
  if (gemm) res.signaled_gemm(c, signaled_gemm_grid(plan, p, res.id.plan_hw), gemm_st);
  if (!coll) {
    res.join_streams(c.stream, gemm_st, comm_st);
    return;
  }
  const int64_t row = p.n * eb;
  // Owner o's sum of rows [a0, a1) of its block: its own partial rows and the W - 1 slots, in rank order.
  const auto reduce_rows = [&](int o, int64_t a0, int64_t a1) {
    void* dst = out(o);
    OVL_CHECK(dst != nullptr, "ce: the output of loopback rank {} of {} is missing", o, p.name());
    kernels::SumArguments sum;
    sum.sources = w;
    for (int s = 0; s < w; ++s)
      sum.src[s] = s == o ? static_cast<const void*>(bytes_at(partial_of(o), a0 * row)) : recv(o, s) + (a0 - rb(o)) * row;
    // RS: the owner's output is its block; AR: the block's rows of the M x N result.
    sum.dst = bytes_at(dst, (ar ? a0 : a0 - rb(o)) * row);
    sum.elements = (a1 - a0) * p.n;
    sum.bf16 = p.comm_dtype() == DType::kBF16;
    sum.ctas = std::max(1, plan.comm_ctas);
    kernels::launch_sum(sum, comm_st);
  };
  const auto wait_sources = [&](int o, int g) {
    for (int s = 0; s < w; ++s)
      if (s != o)
        wait(flags(o) + data_flag(g, s), epoch, real, Gate::What::kRowsFor, s, g, o);
  };
  // AR: owner o's summed rows [a0, a1) to every other rank's result, then flag (unit u, o) there. kRank0: rank 0
  // receives the peers' rows from their precomputed results (prepare_loopback_peers).
  const auto gather_rows = [&](int o, int u, int64_t a0, int64_t a1) {
    for (int r = 0; r < w; ++r) {
      const bool played = real ? o == me : whole || r == 0;
      if (r == o || !played || out(o) == nullptr || out(r) == nullptr) continue;
      copy(bytes_at(out(r), a0 * row), bytes_at(out(o), a0 * row), (a1 - a0) * row, comm_st);
      write(flags(r) + gather_flag(u, o), epoch, comm_st);
    }
  };
  // With SMs beside the GEMM for the sum (gemm_sms + comm_ctas <= SMs: ce_sums_per_group), each group is summed (and,
  // for AllReduce, gathered) as soon as its rows are in; else once after the GEMM, which holds every SM until then.
  const bool per_group = ce_sums_per_group(plan, res.id.sms);
  for (int g = 0; g < groups; ++g) {
    unsigned expected = ps.expected_host[size_t(g)];
    if (c.fault == testing::Fault::kCounterTooHigh && g == groups - 1) ++expected;
    if (gemm) wait(res.counter_ptr() + g, expected, false, Gate::What::kCounter, -1, g);
    const int64_t r0 = ps.row_begin[size_t(g)], r1 = ps.row_end[size_t(g)];
    for (int s = 0; s < w; ++s) {
      for (int o = 0; o < w; ++o) {
        const auto [a0, a1] = cut(r0, r1, o);
        if (o == s || a1 <= a0 || !plays_send(s, o)) continue;
        copy(recv(o, s) + (a0 - rb(o)) * row, bytes_at(partial_of(s), a0 * row), (a1 - a0) * row, comm_st);
        write(flags(o) + data_flag(g, s), epoch, comm_st);
      }
    }
    for (int o = 0; per_group && o < w; ++o) {
      const auto [a0, a1] = cut(r0, r1, o);
      if (a1 <= a0) continue;
      if (plays_owner(o)) {
        wait_sources(o, g);
        reduce_rows(o, a0, a1);
      }
      if (ar) gather_rows(o, g, a0, a1);
    }
  }
  if (!per_group) {
    for (int o = 0; o < w; ++o) {
      if (!plays_owner(o)) continue;
      for (int g = 0; g < groups; ++g) {
        const auto [a0, a1] = cut(ps.row_begin[size_t(g)], ps.row_end[size_t(g)], o);
        if (a1 > a0) wait_sources(o, g);
      }
      reduce_rows(o, rb(o), re(o));
    }
    for (int o = 0; ar && o < w; ++o) gather_rows(o, 0, rb(o), re(o));
  }
  if (ar) {
    // Every played rank: every other owner's rows (per group, or its whole block as unit 0).
    for (int r = 0; r < w; ++r) {
      if (!plays_owner(r)) continue;
      for (int o = 0; o < w; ++o) {
        if (o == r) continue;
        for (int u = 0; u < (per_group ? groups : 1); ++u) {
          const auto [a0, a1] = per_group ? cut(ps.row_begin[size_t(u)], ps.row_end[size_t(u)], o)
                                          : std::pair<int64_t, int64_t>{rb(o), re(o)};
          if (a1 > a0)
            wait(flags(r) + gather_flag(u, o), epoch, real,
                 per_group ? Gate::What::kSummedGroupRows : Gate::What::kSummedRows, o, u, r);
        }
      }
    }
    if (real && c.c.ptr != out(me)) copy(c.c.ptr, out(me), p.m * p.n * eb, comm_st);
  }
  res.join_streams(c.stream, gemm_st, comm_st);
}

std::string CopyEngineExecutor::Gate::describe() const {
  switch (what) {
    case What::kStart: return fmt::format("rank {} at the call's start", rank);
    case What::kRows: return fmt::format("rank {}'s rows of tile group {}", rank, group);
    case What::kRowsFor: return fmt::format("rank {}'s rows of tile group {} for rank {}", rank, group, for_rank);
    case What::kCounter: return fmt::format("tile group {}'s counter (the GEMM)", group);
    case What::kSummedRows: return fmt::format("rank {}'s summed rows for rank {}", rank, for_rank);
    case What::kSummedGroupRows:
      return fmt::format("rank {}'s summed rows of tile group {} for rank {}", rank, group, for_rank);
  }
  return "?";
}

std::string CopyEngineExecutor::watchdog() {
  if (gates_.empty()) return "";
  cudaStream_t comm_stream = res_.comm_stream;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(res_.id.timeout_ns);
  cudaError_t q = cudaStreamQuery(comm_stream);
  while (q == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    q = cudaStreamQuery(comm_stream);
  }
  if (q != cudaErrorNotReady) {  // done, or an error, which the caller's stream synchronization reports
    gates_.clear();
    return "";
  }
  (void)cudaGetLastError();
  // Past the timeout: read every gate (on the watchdog's own stream, which no wait blocks), release the ones not
  // reached, and report the first of them in enqueue order.
  const DriverApi& api = driver_api();
  std::vector<unsigned> seen(gates_.size(), 0);
  for (size_t i = 0; i < gates_.size(); ++i)
    OVL_CUDA_CHECK(cudaMemcpyAsync(&seen[i], gates_[i].addr, sizeof(unsigned), cudaMemcpyDefault, watchdog_stream_));
  OVL_CUDA_CHECK(cudaStreamSynchronize(watchdog_stream_));
  std::string what;
  int missing = 0;
  for (size_t i = 0; i < gates_.size(); ++i) {
    const Gate& gate = gates_[i];
    if (int(seen[i] - gate.value) >= 0) continue;  // GEQ, as the wait compares
    if (missing++ == 0) what = fmt::format("{} (flag {} of {} expected)", gate.describe(), seen[i], gate.value);
    OVL_CU_CHECK(api.cuStreamWriteValue32(reinterpret_cast<CUstream>(watchdog_stream_),
                                          reinterpret_cast<CUdeviceptr>(gate.addr), gate.value,
                                          CU_STREAM_WRITE_VALUE_DEFAULT));
  }
  OVL_CUDA_CHECK(cudaStreamSynchronize(watchdog_stream_));
  OVL_CUDA_CHECK(cudaStreamSynchronize(comm_stream));
  gates_.clear();
  if (missing == 0) return "";  // reached just now
  return fmt::format(
      "the copy engine's stream waited for {}{}; the host watchdog released the wait after the timeout: the GEMM did "
      "not signal (failed, skipped or fewer tiles than the plan) or a peer is missing; the output is invalid",
      what, missing > 1 ? fmt::format(" and {} more", missing - 1) : std::string());
}

}  // namespace ovl::detail
