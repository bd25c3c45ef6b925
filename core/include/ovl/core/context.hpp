// The public API: one call computes a GEMM and its collective, overlapped the way a Plan says.
//
//   ovl::Context ctx({.world = ovl::World::loopback(8)});  // or a real World, or none: a world of 1
//   ctx.gemm_reduce_scatter(a, b, c, stream);            // no plan: chosen on the shape's first call (plan_for)
//   ctx.synchronize(stream);                             // waits; a device-side timeout becomes an ovl::Error
//
// Shapes (per rank, as in a row- or column-parallel linear layer; see model/problem.hpp):
//   gemm_all_reduce      A: M x K (this rank's K-slice), B: K x N or N x K, C: M x N         C = sum_r A_r B_r
//   gemm_reduce_scatter  A: M x K, B: K x N or N x K, C: M/W x N      C = rows [rank M/W, (rank+1) M/W) of the sum
//   all_gather_gemm      A: M/W x K (this rank's rows), B: K x N or N x K, C: M x N       C = gather(A) B
// Every tensor is row-major, 16-byte aligned, on the context's device. Element types: bf16 or fp16, one dtype for all
// three; or FP8 (docs/overlap.md, "FP8"): A e4m3 and B e4m3 or e5m2, each with its per-tensor scale
// (TensorRef::scale), B stored N x K, K a multiple of 16, C bf16 or fp16: C = a_scale b_scale (A B) in C's type, the
// AllGather moves FP8 A (1 byte an element), the AllReduce / ReduceScatter sums C's type. AllGather+GEMM applies A's
// scale to the whole gathered A: every rank passes the same value (in loopback the peers' rows are scaled by it).
//
// Loopback emulation (ContextOptions::world = World::loopback(W), W > 1): W virtual ranks on one GPU. Rank 0 runs for real
// (its GEMM on the caller's tensors); the other ranks' inputs (their partial products M x N for GEMM+AR/RS, their
// A rows for AG+GEMM) are buffers made once per shape from their own random data. The collective plays rank 0's
// share of the traffic (LoopbackShare::kRank0, the default: what one real GPU's SMs and HBM do) or every rank's
// (kWholeWorld: W GPUs' traffic on one HBM; every rank's output is complete, for verification). Only the link
// (NVLink) is replaced by the device's own memory. docs/overlap.md says what this does and does not model.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ovl/core/world.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/plan_cache.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/model/timeline.hpp"

namespace ovl {

namespace detail {
struct ContextAccess;
}  // namespace detail

// A row-major matrix on the device. For B, `b_layout` says how it is stored (kNxK: rows = N, cols = K, a linear
// layer's weight; kKxN: rows = K, cols = N); other tensors ignore it. `scale`: FP8 tensors only (and required there),
// a device pointer to one float on the context's device, read by the GEMM when it runs (so a scale an earlier kernel
// on the stream computes needs no host round trip): the tensor's values are scale[0] x its elements.
struct TensorRef {
  void* ptr = nullptr;
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kBF16;
  BLayout b_layout = BLayout::kNxK;
  const float* scale = nullptr;
};

// LoopbackShare (what the loopback collective plays) is declared in ovl/types.hpp.

// How a call without a plan chooses one, the first time it meets a shape (then the choice is kept; see plan_for).
enum class Tuning {
  kPredicted,  // the planner's best plan (no GPU time spent)
  kMeasured,   // the planner's tuning_candidates best plans, its best plan of each other mode and its best
               // sequential one, each run on the call's own tensors and timed; the fastest is kept (in a real world:
               // the slowest rank's time counts)
};
inline constexpr Named<Tuning> kTuningNames[] = {{Tuning::kPredicted, "predicted"}, {Tuning::kMeasured, "measured"}};
std::string_view to_string(Tuning tuning);  // "predicted", "measured"
Tuning parse_tuning(std::string_view text);  // throws ovl::Error naming the text

struct ContextOptions {
  // The world this context serves (core/world.hpp), the one way to say it:
  //   World::loopback(W, device)     W emulated ranks on one GPU (W = 1: a world of 1 on `device`)
  //   World::threads / mpi / from_nccl_id / from_nccl_comm   this rank of a real world (its device, communicators)
  //   empty (the default)            a world of 1 on `device` (a one-rank NCCL communicator made on first use)
  // A real World made with WorldOptions::nccl_cta_bounds holding a plan's comm_ctas runs that plan's NCCL calls on
  // the communicator bounded to comm_ctas CTAs (the SMs the plan gives communication); other plans get
  // nccl_comm(0), NCCL's own choice. A comm_algo nccl-symmetric plan runs on a communicator of the context's own,
  // split off the World's first one (collectively, by its first call) with the plan's cta_policy and comm_ctas
  // (ovl/core/nccl_symmetric.hpp).
  World world;
  int device = 0;  // only for an empty `world`; a World names its device
  // The profile the planner uses; default: the built-in profile of the detected GPU (loopback: its
  // loopback_hardware()). A measured profile (load_hardware) goes here.
  std::optional<Hardware> hardware;
  // Every device-side wait gives up after this long with an ovl::Error (default: env OVL_WAIT_TIMEOUT_MS, else 10 s).
  double wait_timeout_ms = 0;
  bool trace = false;  // record a measured Timeline of each call (last_timeline())
  uint64_t loopback_seed = 0x5eed;
  // Loopback only: whose collective traffic one launch plays. kRank0 with GEMM+AllReduce: the other owners' reduced
  // pieces that rank 0 copies in depend on rank 0's partial product, so each call recomputes them (a cuBLAS GEMM and
  // a sum over the emulated ranks, on the call's stream before the mode runs) unless loopback_fixed_inputs.
  LoopbackShare loopback_share = LoopbackShare::kRank0;
  // Loopback kRank0 GEMM+AllReduce: the caller promises that A's and B's contents do not change between calls with
  // the same pointers (the benchmarks' calls), so the peers' reduced pieces are computed once per shape and A / B
  // pointers and each call times rank 0's share alone. A call whose inputs did change in place would get the rows
  // the other ranks own from the old data. Measured tuning's candidates of one call share that call's pieces either
  // way.
  bool loopback_fixed_inputs = false;
  // The world's link (a built-in name, "nvlink4-node8" or "h200x2", or a JSON file; default: env OVL_LINK_PROFILE,
  // else none). Loopback with kRank0 only: the emulated link is paced to it (docs/overlap.md, "Paced loopback"):
  // every mover's CTAs move rank 0's peer traffic at most at the link's rate (LinkProfile::paced_cta_GBps), NCCL's
  // stand-in runs on the profile's NCCL CTA count, and the planner prices the same link (planning_hardware()). A real
  // world: the link as measured on this machine; the planner prices the calls its tables hold by them (with_link),
  // the executors are unchanged.
  std::optional<LinkProfile> link_profile;
  // How calls without a plan choose one (default: env OVL_TUNING = predicted | measured, else kMeasured).
  std::optional<Tuning> tuning;
  // kMeasured: how many of the planner's best plans are timed besides its best plan of each other mode and its best
  // sequential one (1..16).
  int tuning_candidates = 4;
  // An overlapped plan is chosen over the best sequential one only when it is faster by more than this fraction: in
  // the planner's prediction (kPredicted) or in the timed runs (kMeasured). Run-to-run differences of 2% were seen
  // on the H200 between two timings of the same plan (docs/performance.md, "The automatic plan").
  double tuning_min_gain = 0.02;
  // kMeasured: the wall time the timed runs of one shape may take, in ms. Two thirds go to the candidates (each runs
  // once to warm up and at least once timed, then rounds of one run each follow, at most 15 timed runs, while that
  // share allows); when overlapped plans win by tuning_min_gain, the rest times the fastest 3 of them and the best
  // sequential plan again, alone; of those that win there too, by half of tuning_min_gain (that timing follows the
  // candidates' on a GPU that has been busy longer, where overlap gains less: docs/overlap.md), the one with the
  // lowest sum of its two times is kept, else the sequential plan.
  double tuning_budget_ms = 300;
  // A plan cache file (model/plan_cache.hpp): read when the context is made, written after each new choice (in a
  // real world by rank 0 only). Default: env OVL_PLAN_CACHE; empty: no file.
  std::optional<std::string> plan_cache;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const;
  int rank() const;
  int world_size() const;
  bool loopback() const;
  LoopbackShare loopback_share() const;
  int sm_count() const;
  // The device's profile (Plan::validate uses it) and the one the planner uses (loopback: loopback_hardware()).
  const Hardware& hardware() const;
  const Hardware& planning_hardware() const;
  // The world's link (ContextOptions::link_profile or OVL_LINK_PROFILE); nullopt: none (an unpaced loopback).
  const std::optional<LinkProfile>& link_profile() const;

  // Enqueue the operator on `stream`. `plan`: a Plan (validated against the problem and the device), or
  // std::nullopt for the plan plan_for() chooses for this shape (kept per shape). Throws ovl::Error naming the bad value for
  // shapes, dtypes, pointers and plans; device-side timeouts surface in synchronize().
  void gemm_all_reduce(const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::optional<Plan>& plan,
                       cudaStream_t stream);
  void gemm_reduce_scatter(const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::optional<Plan>& plan,
                           cudaStream_t stream);
  void all_gather_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::optional<Plan>& plan,
                       cudaStream_t stream);
  // The same without a plan: the plan plan_for() chooses.
  void gemm_all_reduce(const TensorRef& a, const TensorRef& b, const TensorRef& c, cudaStream_t stream) {
    gemm_all_reduce(a, b, c, std::nullopt, stream);
  }
  void gemm_reduce_scatter(const TensorRef& a, const TensorRef& b, const TensorRef& c, cudaStream_t stream) {
    gemm_reduce_scatter(a, b, c, std::nullopt, stream);
  }
  void all_gather_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& c, cudaStream_t stream) {
    all_gather_gemm(a, b, c, std::nullopt, stream);
  }

  // The Problem a call describes (shapes checked against each other and the world); throws like the calls.
  Problem problem_for(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c) const;
  // "" when the executor can run `plan` for `problem` in this context, else why not (naming the value).
  std::string can_run(const Problem& problem, const Plan& plan) const;

  // The plan a call without a plan runs for these tensors' problem: the choice made earlier in this context or read
  // from the plan cache, else a new one by the tuning policy. Measured tuning runs candidate plans on these tensors
  // (C is overwritten) on `stream` and waits for them; in a real world it is collective (every rank calls it, as
  // every rank makes the same calls) and every rank ends with the same plan. Refused while `stream` is being
  // captured into a CUDA graph: make the first call of each shape before capturing.
  const PlanChoice& plan_for(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, cudaStream_t stream);
  // The choice a call without a plan made (or found in the plan cache) for `problem`; nullptr when none yet.
  const PlanChoice* plan_choice(const Problem& problem) const;
  // The plans measured tuning would time for `problem` in this context (the planner's best distinct plans, the best
  // of every other mode, its best sequential plan), in the order plan_for() times them. Runs the planner only.
  std::vector<Plan> tuning_candidates(const Problem& problem) const;
  // Times each of `plans` on these tensors as measured tuning does (C is overwritten; waits for `stream`) and returns
  // the fastest (chosen_by kMeasured, candidates: every plan with its time). Keeps nothing; collective in a real world.
  PlanChoice measure(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::vector<Plan>& plans,
                     cudaStream_t stream);

  // Waits for `stream` (and the context's own streams) and throws ovl::Error when a device-side wait timed out
  // (the GEMM never signaled, or a peer is missing). The context stays usable afterwards.
  void synchronize(cudaStream_t stream);

  // The context keeps device buffers and plans per problem shape (a partial product per shape, and in loopback the
  // peers' buffers) and never evicts them on its own: with many shapes, call this between steps to free them all.
  // It waits for the device first; the next call of a shape rebuilds what it needs. In a real world where the TMA
  // collective (mode tma, sequential with tma-push) made peer-mapped buffers, or comm_algo nccl-symmetric registered
  // NCCL windows, it is collective: every rank calls it (their buffers are freed together).
  void release_caches();

  // ovl's TMA collective in a real World of more than one rank (mode tma, and mode sequential with tma-push): this
  // rank's copy of the peer-mapped buffer the collective writes the result of `problem` to (RS: M/W x N, AR: M x N,
  // row-major, C's type; overwritten by every such call of that shape). A call whose C points at it skips the copy
  // of the result into C. Made on first use, which is collective: every rank calls it at the same point of its
  // sequence of calls. Throws ovl::Error naming the reason in loopback, in a world of 1, and for AllGather+GEMM.
  // release_caches() frees it: the pointer is invalid after that (a new call makes a new one).
  void* symmetric_output(const Problem& problem);

  void set_tracing(bool on);
  // The measured Timeline of the last call (source "measured", lanes "gemm" and "comm" of gpu = rank, times in ns
  // from the call's first stamp). Synchronizes. Empty when tracing was off.
  Timeline last_timeline();

  struct Impl;

 private:
  friend struct detail::ContextAccess;  // ovl/core/testing.hpp
  void run(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::optional<Plan>& plan,
           cudaStream_t stream);
  // measure() within `budget_ms` of timed rounds (measure: ContextOptions::tuning_budget_ms).
  PlanChoice measure(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::vector<Plan>& plans,
                     cudaStream_t stream, double budget_ms);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ovl
