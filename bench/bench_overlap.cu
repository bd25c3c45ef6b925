// bench_overlap: every overlap mode against the sequential baseline, in loopback emulation of 8 ranks on one GPU, or
// (OVL_BENCH_WORLD=threads) on a real World of every visible GPU, one host thread per rank.
//
// Cases (filter with --benchmark_filter, e.g. 'overlap/tma/', '/reducescatter/', '/8192x8192x4096/', 'comm_sms:16'):
//   overlap/<mode>/<op>/<M>x<N>x<K>/world:<W>/comm_sms:<c>[/groups:<g>[/order:swizzle]]   (see below)
//     op allreduce, reducescatter (GEMM first) or allgather-gemm (the gather first: A is M / W x K per rank, C is
//     M x N; in tile-signal, green-context and tma the GEMM waits per tile group for the group's gather);
//     mode decomposed, tile-signal, green-context, tma; c = 8, 16, 24, 32. The plan is
//     exactly default_plan(mode, problem, hw, c), what `ovl validate` / `ovl calibrate` reconstruct from the name:
//     tma is partitioned with default_plan's comm_algo (tma-push: the TMA push mover); the other modes use the SIMT
//     mover (it stands in for NCCL in loopback).
//   overlap/sequential/<op>/<M>x<N>x<K>/world:8/comm_sms:<S>            (S = the device's SM count)
//     default_plan(sequential, problem, hw, S): cuBLAS on the whole device, then the collective with the SIMT mover
//     on S CTAs (the whole device: the strongest baseline). The baseline of decomposed, tile-signal, green-context.
//   overlap/sequential/<op>/<M>x<N>x<K>/world:8/comm_sms:<S>/algo:<a>   (a = the tma mode's comm_algo)
//   overlap/tile-signal/<op>/<M>x<N>x<K>/world:<W>/comm_sms:8/groups:<g>/algo:ce   (g = 2, 4, 8)
//     comm_algo ce: copies gated by stream memory waits, the GEMM on every SM, 8 CTAs for the owner's sum (in
//     loopback the copies are same-device copies, which run on SMs: docs/overlap.md, "Copy engine")
//     the same with comm_algo a, i.e. the tma mode's TMA mover on S CTAs: the tma cases' baseline (like with
//     like). Seven name parts: the model's bench-name parser skips it on purpose (its plan is not
//     default_plan(sequential, ...), which has an NCCL algorithm).
//   overlap/sequential/<op>/<M>x<N>x<K>/world:<W>/comm_sms:<c>/algo:nccl-symmetric   (c = 16, 32; every op)
//   overlap/sequential/allgather-gemm/<M>x<N>x<K>/world:<W>/comm_sms:16/algo:nccl-symmetric/cta_policy:zero
//   overlap/decomposed/allreduce/<M>x<N>x<K>/world:<W>/comm_sms:<c>/algo:nccl-symmetric   (c = 8, 16, 24, 32)
//   overlap/<tile-signal|green-context>/allreduce/<M>x<N>x<K>/world:<W>/comm_sms:<c>/groups:<g>/algo:nccl-symmetric
//     (c = 16, 32; g = 2, 4, 8)
//     comm_algo nccl-symmetric: the plan of the name without the suffix (as above), with NCCL's symmetric kernels on
//     a communicator of CTA policy efficiency (or zero: the AllGather on the copy engines) bounded to c CTAs, between
//     buffers registered as symmetric windows, the result copied into C (docs/overlap.md, "NCCL's symmetric
//     kernels"). GEMM+RS and AG+GEMM only in sequential (one whole-buffer collective). A real world only: a loopback
//     world refuses them (no NCCL), and every case reports can_run's reason as its error.
// A real world (OVL_BENCH_WORLD=threads, world:<W> = the GPU count, at most 8): every rank runs the same case at once
// on its own inputs; NCCL moves the data in the NCCL modes, on a communicator bounded to the plan's comm_ctas = c
// CTAs (counter nccl_ctas); the sequential baseline: cuBLAS on the whole device, then NCCL with its own CTA choice
// (nccl_ctas 0). The tma mode moves data with the World's TMA push collective over peer-mapped buffers and writes C
// into Context::symmetric_output, as an application that allocates C there would (no copy of the result; no /algo:
// baseline: a real world's baseline is NCCL's). Times are the slowest rank's; a timed block of runs starts after a
// host barrier and one more untimed run that lines the ranks up on the device.
// FP8: the overlap/sequential and overlap/<mode>/.../comm_sms:16 cases above with /dtype:e4m3 appended, for three
// shapes (8192x8192x4096, 16384x8192x2048, 4096x8192x8192), every op, the default plans: A and B e4m3 (values in
// [-2, 2), per-tensor scales 0.5), C bf16; the AllGather moves FP8 A. Sequential and decomposed run our GEMM on every
// SM (cuBLAS has no FP8 path here: docs/overlap.md, "FP8"); `wrong` compares with the FP8 sequential result.
// Also tile-signal, green-context and tma with g = 2, 4, 8 tile groups (/groups:<g>: BenchCase::plan, g groups of
// whole row bands, and a tile-signal GEMM on sm_count - c SMs), since default_plan's one group per row band makes
// one NCCL call per band; and the same in swizzle order (/groups:<g>/order:swizzle: g groups of whole swizzle bands
// of kSwizzleRows tile rows, the GEMM visiting each band column by column).
// The JSON context says world_backend = loopback or threads (and loopback_share in loopback).
// Loopback share: rank 0's share (LoopbackShare::kRank0, the default: one real GPU's collective traffic); set
// OVL_BENCH_SHARE=whole-world to play every rank's traffic (W times as much on one HBM). In the JSON context.
// OVL_BENCH_LOOPBACK_WORLD=<W> (2..8, default 8): the loopback world. OVL_LINK_PROFILE=<name|file> paces the loopback
// to a link (docs/overlap.md, "Paced loopback"; rank 0's share only): the JSON context records it ("link_profile",
// the LinkProfile's JSON), so `ovl calibrate` / `ovl validate` price the cases on the paced profile, and the
// sequential baseline's collective runs on the profile's NCCL CTA count (default_plan on the paced profile), under
// the same name. OVL_BENCH_LOOPBACK_WORLD=2 OVL_LINK_PROFILE=h200x2 gives cases named as a real 2-GPU run's. In a
// real world OVL_LINK_PROFILE names the link the machine measured (recorded alike): the validation prices the cases'
// calls by its tables.
// Counters (all measured in the same process, each part alone: 1 warm-up run, then the mean of kReps back-to-back
// runs, a short burst after the host's setup; OVL_BENCH_SUSTAIN_MS=<ms> instead runs ~ms of back-to-back warm-up and
// times back-to-back runs filling ~ms, the sustained regime of bench_gemm. On the H200 a GEMM that starts on an idle
// GPU runs 9.5-13.5% faster than in a sustained stream of GEMMs, and a GEMM between memory-bound collectives faster too
// (power limit; docs/model.md, the power state):
//   us            time of the overlapped operator
//   t_seq_us      the sequential baseline with the same mover (see above); speedup = t_seq_us / us
//   t_gemm_us, t_comm_us   the GEMM alone and the collective alone, as this plan runs them (same SMs, CTAs)
//   efficiency    (t_gemm + t_comm - us) / min(t_gemm, t_comm): 1 = the shorter part fully hidden, 0 = no overlap
//   gemm_slowdown the GEMM's span inside the overlapped run (measured timeline) / t_gemm
//   calls_beside, call_us_beside, calls_after, call_us_after   the collective's calls in the same timeline (one per
//                 group, chunk, or the whole call; tile-signal / green-context spans start when the group's counter
//                 is reached, AllGather's when the comm stream reaches it) that started before the GEMM's end and
//                 after it: how many, and their mean duration. With equal groups, call_us_after / call_us_beside is
//                 the collective's rate beside the GEMM over its rate after it (the model's beside_gemm_rate_factor)
//   sustain_ms    OVL_BENCH_SUSTAIN_MS of the run (0: burst timing), so a calibration can tell the two regimes apart
//   wrong         elements off the sequential result (SIMT mover in loopback, NCCL in a real world) by more than 2%
//                 (+ 2% of the typical size), over every rank the process drives (loopback: rank 0), checked once per
//                 case outside the timed loop
// OVL_BENCH_TRACE=<dir> writes each case's traced run (rank 0) as a Chrome trace into dir (trace_dir()).
// Setup (inputs, peers, baselines) is made on first use per shape, so a filtered run pays only for its shapes.
// The iteration time Google Benchmark reports is the same operator, timed with CUDA events (UseManualTime).

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/tools/bench_names.hpp"

namespace {

using namespace ovl;

struct Shape {
  int64_t m, n, k;
  DType dtype = DType::kBF16;  // A's and B's type (kE4M3: FP8 A and B with scales); C is bf16
};

constexpr int kDefaultLoopbackWorld = 8;
constexpr int kReps = 5;
constexpr int kIterations = 5;

using bench::real_world;

// A real world's NCCL communicators: NCCL's own CTA choice (0; the sequential baseline's) and one bounded to each
// comm_sms of the overlap cases, so a plan's comm_ctas = c runs NCCL on c CTAs (counter nccl_ctas).
const std::vector<int>& nccl_bounds() {
  static const std::vector<int> bounds{0, 8, 16, 24, 32};
  return bounds;
}

// OVL_BENCH_LOOPBACK_WORLD, read once (default kDefaultLoopbackWorld).
int loopback_world() {
  static const int w = bench::env_int("OVL_BENCH_LOOPBACK_WORLD", 2, 8, kDefaultLoopbackWorld);
  return w;
}

// The ranks of the cases: loopback_world() in loopback, else the visible GPUs (at most 8; 0 when none answers).
int world_size() { return real_world() ? bench::visible_gpus(8) : loopback_world(); }

// OVL_BENCH_SHARE: "rank0" (default) or "whole-world".
LoopbackShare bench_share() {
  const char* text = std::getenv("OVL_BENCH_SHARE");
  if (text == nullptr || *text == '\0' || std::string(text) == "rank0") return LoopbackShare::kRank0;
  OVL_CHECK(std::string(text) == "whole-world", "OVL_BENCH_SHARE = \"{}\" is not rank0 or whole-world", text);
  return LoopbackShare::kWholeWorld;
}

// The device's SM count (the sequential cases' comm_sms); 132 when no GPU answers (the cases then fail).
int device_sms() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 132;
  }
  return prop.multiProcessorCount;
}

// Values uniform in [-range, range), rounded to T (bf16 or e4m3).
template <typename T>
__global__ void fill_kernel(T* p, int64_t n, uint64_t seed, float range) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + uint64_t(i);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    p[i] = T((float(x >> 40) * (2.0f / 16777216.0f) - 1.0f) * range);
  }
}

// The inputs of `count` elements of `dtype` at p (bf16: [-1, 1); e4m3: [-2, 2), scaled by 0.5 in the GEMM).
void fill_inputs(void* p, DType dtype, int64_t count, uint64_t seed, cudaStream_t stream) {
  if (dtype == DType::kE4M3) {
    fill_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p), count, seed, 2.0f);
  } else {
    fill_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(p), count, seed, 1.0f);
  }
  OVL_CUDA_CHECK_LAST();
}

__global__ void count_wrong_kernel(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t n, float atol,
                                   unsigned long long* wrong) {
  unsigned long long local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = __bfloat162float(x[i]), b = __bfloat162float(y[i]);
    if (!(fabsf(a - b) <= 0.02f * fabsf(b) + atol)) ++local;
  }
  if (local) atomicAdd(wrong, local);
}

struct Inputs {
  DeviceBuffer a, b, c, c_seq, scales;  // scales: FP8 only, A's and B's
  TensorRef ta, tb, tc, tc_seq;  // c_seq: this rank's result of the sequential baseline (the `wrong` reference)
  TensorRef tc_sym;              // a real world's tma cases: C = Context::symmetric_output (no copy into C)
  Problem problem;
};

// One rank the process drives: its World, Context, stream, events and inputs per shape. Loopback: one Rank that
// plays all loopback_world() ranks; threads: one Rank per visible GPU, each driven from its own host thread.
struct Rank {
  World world;
  std::unique_ptr<Context> ctx;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double block_us = 0;  // this rank's last timed block, per run
  unsigned long long wrong = 0;
  std::map<std::string, std::unique_ptr<Inputs>> inputs;
};
struct Ranks {
  std::vector<World> worlds;
  std::vector<Rank> ranks;
  std::map<std::string, std::map<CommAlgo, double>> t_seq_us;  // the baseline per shape and mover (slowest rank)
};

Ranks& ranks() {
  static Ranks& rs = *[] {  // never freed: contexts outlive main's benchmarks, as before
    auto* r = new Ranks();
    if (real_world()) {
      WorldOptions options;
      options.nccl_cta_bounds = nccl_bounds();
      r->worlds = World::threads(bench::visible_gpu_ids(8), options);
    } else {
      r->worlds.push_back(World::loopback(loopback_world(), 0));
    }
    r->ranks.resize(r->worlds.size());
    run_per_rank(r->worlds, [&](World& w) {
      Rank& rank = r->ranks[size_t(w.rank())];
      rank.world = w;
      ContextOptions o;
      o.world = w;
      o.loopback_share = bench_share();
      o.loopback_fixed_inputs = true;  // every iteration passes the same inputs: time rank 0's share alone
      rank.ctx = std::make_unique<Context>(o);
      OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&rank.stream, cudaStreamNonBlocking));
      OVL_CUDA_CHECK(cudaEventCreate(&rank.start));
      OVL_CUDA_CHECK(cudaEventCreate(&rank.stop));
    });
    return r;
  }();
  return rs;
}

// Runs fn on every rank at once, each on its own host thread with its device current (loopback: once, inline).
void for_ranks(const std::function<void(Rank&)>& fn) {
  Ranks& rs = ranks();
  run_per_rank(rs.worlds, [&](World& w) { fn(rs.ranks[size_t(w.rank())]); });
}

// The slowest rank's value of `field`.
double slowest(double Rank::*field) {
  double t = 0;
  for (const Rank& r : ranks().ranks) t = std::max(t, r.*field);
  return t;
}

void run(Rank& r, Op op, const Inputs& in, const TensorRef& c, const Plan& plan) {
  if (op == Op::kGemmAllReduce)
    r.ctx->gemm_all_reduce(in.ta, in.tb, c, plan, r.stream);
  else if (op == Op::kGemmReduceScatter)
    r.ctx->gemm_reduce_scatter(in.ta, in.tb, c, plan, r.stream);
  else
    r.ctx->all_gather_gemm(in.ta, in.tb, c, plan, r.stream);
}

// Device time in microseconds per run of `reps` back-to-back runs of fn, after `pre` untimed runs on the stream
// right before them; the slowest rank's. A real world first meets at a host barrier and runs fn once more, which
// lines the ranks up on the device (the timed runs start when every rank has finished it).
using RankFn = std::function<void(Rank&)>;
double block_us(const RankFn& fn, int reps, int pre = 0) {
  for_ranks([&](Rank& r) {
    if (real_world()) {
      r.world.barrier();
      fn(r);
    }
    for (int i = 0; i < pre; ++i) fn(r);
    OVL_CUDA_CHECK(cudaEventRecord(r.start, r.stream));
    for (int i = 0; i < reps; ++i) fn(r);
    OVL_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
    r.ctx->synchronize(r.stream);
    float ms = 0;
    OVL_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    r.block_us = double(ms) * 1e3 / reps;
  });
  return slowest(&Rank::block_us);
}

// OVL_BENCH_SUSTAIN_MS, read once (0: the default burst timing).
int sustain_ms() {
  static const int ms = bench::env_int("OVL_BENCH_SUSTAIN_MS", 0, 10000, 0);
  return ms;
}

// Mean time in microseconds of fn (see the file comment). Default: one warm-up run, then kReps timed runs right behind
// it on the stream. OVL_BENCH_SUSTAIN_MS: one warm-up run and a sync (it may include first-use setup: plan state,
// green contexts), one timed run that sizes the windows, warm-up runs for ~that much device time enqueued right
// before the timed runs, which fill it too (at least kReps). Every rank runs the same number of times (the count
// comes from the slowest rank), so the collectives inside stay matched.
double time_us(const RankFn& fn) {
  const int sustain_ms = ::sustain_ms();
  if (sustain_ms == 0) return block_us(fn, kReps, 1);
  for_ranks([&](Rank& r) {
    fn(r);
    r.ctx->synchronize(r.stream);
  });
  const double once = block_us(fn, 1);
  const int runs = std::clamp(int(sustain_ms * 1e3 / std::max(once, 1.0)), 0, 10000);
  return block_us(fn, std::max(kReps, runs), runs);
}

// The sequential baseline with the mover of `algo`: cuBLAS on the whole device, then the collective on every SM (a
// paced loopback: on the link profile's NCCL CTA count, as a node's NCCL runs it). With an NCCL algorithm this is
// exactly default_plan(sequential, p, hw, sm_count) on the planning profile (loopback: the SIMT mover; a real
// world: NCCL), what `ovl validate` reconstructs from the name on the profile the file's context names.
Plan sequential_plan(const Problem& p, const Context& ctx, CommAlgo algo) {
  Plan plan = default_plan(Mode::kSequential, p, ctx.planning_hardware(), ctx.sm_count());
  plan.comm_algo = algo;
  return plan;
}

std::string shape_key(Op op, const Shape& sh) {
  return fmt::format("{}/{}x{}x{}/{}", to_string(op), sh.m, sh.n, sh.k, to_string(sh.dtype));
}

// Every rank's inputs for (op, shape), made on first use (a collective step: every rank makes its own at once).
// Rank r's A and B come from seeds of its own, so the ranks' partial products differ.
void ensure_inputs(Op op, const Shape& sh) {
  const std::string key = shape_key(op, sh);
  bool everywhere = true;
  for (Rank& r : ranks().ranks) everywhere = everywhere && r.inputs.count(key) != 0;
  if (everywhere) return;
  for (Rank& r : ranks().ranks) r.inputs.erase(key);  // a shape half made by a failed case: every rank makes it anew
  const int w = world_size();
  for_ranks([&](Rank& r) {
    Context& ctx = *r.ctx;
    auto in = std::make_unique<Inputs>();
    const int64_t c_rows = op == Op::kGemmReduceScatter ? sh.m / w : sh.m;
    const int64_t a_rows = op == Op::kAllGatherGemm ? sh.m / w : sh.m;  // AG+GEMM: this rank's rows of A
    const uint64_t seed = 1 + 1000 * uint64_t(r.world.rank());
    const size_t in_bytes = size_t(dtype_bytes(sh.dtype));
    in->a = DeviceBuffer(size_t(a_rows * sh.k) * in_bytes);
    in->b = DeviceBuffer(size_t(sh.n * sh.k) * in_bytes);
    in->c = DeviceBuffer(size_t(c_rows * sh.n * 2));
    in->c_seq = DeviceBuffer(size_t(c_rows * sh.n * 2));
    fill_inputs(in->a.get(), sh.dtype, a_rows * sh.k, seed, r.stream);
    fill_inputs(in->b.get(), sh.dtype, sh.n * sh.k, seed + 1, r.stream);
    const float* a_scale = nullptr;
    const float* b_scale = nullptr;
    if (is_fp8(sh.dtype)) {
      const float half[2] = {0.5f, 0.5f};
      in->scales = DeviceBuffer(sizeof(half));
      copy_now(in->scales.get(), half, sizeof(half), cudaMemcpyHostToDevice, r.stream);
      a_scale = static_cast<const float*>(in->scales.get());
      b_scale = a_scale + 1;
    }
    in->ta = TensorRef{in->a.get(), a_rows, sh.k, sh.dtype, BLayout::kNxK, a_scale};
    in->tb = TensorRef{in->b.get(), sh.n, sh.k, sh.dtype, BLayout::kNxK, b_scale};
    in->tc = TensorRef{in->c.get(), c_rows, sh.n, DType::kBF16};
    in->tc_seq = TensorRef{in->c_seq.get(), c_rows, sh.n, DType::kBF16};
    in->problem = ctx.problem_for(op, in->ta, in->tb, in->tc);
    run(r, op, *in, in->tc_seq, sequential_plan(in->problem, ctx, CommAlgo::kNcclRing));
    ctx.synchronize(r.stream);
    r.inputs.emplace(key, std::move(in));
  });
}

double baseline_us(Op op, const Shape& sh, CommAlgo algo) {
  auto& per_algo = ranks().t_seq_us[shape_key(op, sh)];
  auto it = per_algo.find(algo);
  if (it != per_algo.end()) return it->second;
  const std::string key = shape_key(op, sh);
  const double t = time_us([&](Rank& r) {
    const Inputs& in = *r.inputs.at(key);
    run(r, op, in, in.tc, sequential_plan(in.problem, *r.ctx, algo));
  });
  return per_algo.emplace(algo, t).first->second;
}

// The collective's calls of a measured timeline (lane "comm": a group, a chunk, or the whole call), split by whether
// they started before the GEMM's end (`gemm_end_ns`) or after it: their count and mean duration on each side.
struct CommSplit {
  struct Side {
    int count = 0;
    double total_ns = 0;
    double mean_us() const { return count > 0 ? total_ns * 1e-3 / count : 0.0; }
  } beside, after;
};
CommSplit split_comm_calls(const Timeline& t, int64_t gemm_end_ns) {
  CommSplit s;
  for (const Interval& i : t.intervals) {
    if (i.lane != "comm") continue;
    CommSplit::Side& side = i.start_ns < gemm_end_ns ? s.beside : s.after;
    ++side.count;
    side.total_ns += double(i.end_ns - i.start_ns);
  }
  return s;
}

// A case's comm_algo other than its mode's default: /algo:<algo>[/cta_policy:<policy>] after the name the parser
// reads (docs at the top).
struct AlgoSuffix {
  CommAlgo algo;
  CtaPolicy policy = CtaPolicy::kDefault;
  std::string suffix() const {
    std::string s = fmt::format("/algo:{}", to_string(algo));
    if (policy != CtaPolicy::kDefault && policy != CtaPolicy::kEfficiency)
      s += fmt::format("/cta_policy:{}", to_string(policy));
    return s;
  }
};

// mode "sequential" without a suffix: sequential_plan(seq_algo); otherwise exactly the plan `ovl validate`
// reconstructs from the name, BenchCase::plan (default_plan(mode, p, hw, c), with groups:<g> its g groups of row
// bands), with the suffix's algorithm (ce: the GEMM on every SM).
// OVL_BENCH_TRACE=<dir>: every case's traced run (rank 0's measured timeline, the one gemm_slowdown reads) written
// as a Chrome trace to <dir>/<the case's name, '/' and ':' as '_'>.json, to open beside `ovl simulate --trace`. The
// directory is made when missing.
const char* trace_dir() {
  static const char* dir = [] {
    const char* d = std::getenv("OVL_BENCH_TRACE");
    if (d == nullptr || *d == 0) return static_cast<const char*>(nullptr);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void bench_case(benchmark::State& state, const std::string& name, const BenchCase& bc, Op op, Shape sh,
                CommAlgo seq_algo, std::optional<AlgoSuffix> algo = std::nullopt) {
  const Mode mode = bc.mode;
  try {
    ensure_inputs(op, sh);
    const std::string key = shape_key(op, sh);
    Rank& r0 = ranks().ranks[0];
    const Problem& p = r0.inputs.at(key)->problem;
    // Every rank's plan is the same: its problem and hardware profile are.
    Plan plan =
        mode == Mode::kSequential && !algo ? sequential_plan(p, *r0.ctx, seq_algo) : bc.plan(r0.ctx->hardware());
    if (algo) {
      plan.comm_algo = algo->algo;
      plan.cta_policy = algo->policy;
      // ce: the copy engine, the GEMM on every SM, comm_sms CTAs for the owner's sum.
      if (algo->algo == CommAlgo::kCopyEngine) plan.gemm_sms = r0.ctx->hardware().spec.sm_count;
    }
    if (const std::string why = r0.ctx->can_run(p, plan); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    // Like with like in loopback: the baseline moves data with this plan's mover (TMA algorithms: the TMA mover;
    // else SIMT). A real world's baseline is always cuBLAS + NCCL.
    const bool tma_mover = is_tma_mover(plan.comm_algo);
    const CommAlgo base_algo = tma_mover && !real_world() ? plan.comm_algo : CommAlgo::kNcclRing;
    const double t_seq = baseline_us(op, sh, base_algo);
    // A real world's tma mode writes C into the context's symmetric output, as an application that allocates C
    // there would (made once per shape, collectively); every other case into its own C.
    const bool sym_out = mode == Mode::kTma && real_world() && world_size() > 1;
    if (sym_out && r0.inputs.at(key)->tc_sym.ptr == nullptr) {
      for_ranks([&](Rank& r) {
        Inputs& in = *r.inputs.at(key);
        in.tc_sym = in.tc;
        in.tc_sym.ptr = r.ctx->symmetric_output(in.problem);
      });
    }
    auto out = [&](const Inputs& in) -> const TensorRef& { return sym_out ? in.tc_sym : in.tc; };
    auto whole = [&](Rank& r) {
      const Inputs& in = *r.inputs.at(key);
      run(r, op, in, out(in), plan);
    };
    auto part = [&](ovl::testing::Part pt) {
      return [&, pt](Rank& r) {
        const Inputs& in = *r.inputs.at(key);
        ovl::testing::run_part(*r.ctx, pt, op, in.ta, in.tb, out(in), plan, r.stream);
      };
    };
    const double t_gemm = time_us(part(ovl::testing::Part::kGemm));
    const double t_comm = time_us(part(ovl::testing::Part::kComm));
    const double t_all = time_us(whole);

    // Correctness, once: every rank's result against its sequential result.
    const float atol = 0.02f * std::sqrt(float(world_size()) * float(sh.k) / 9.f);
    for_ranks([&](Rank& r) {
      const Inputs& in = *r.inputs.at(key);
      cudaStream_t s = r.stream;
      OVL_CUDA_CHECK(cudaMemsetAsync(out(in).ptr, 0xFF, size_t(in.tc.rows * in.tc.cols * 2), s));
      whole(r);
      unsigned long long* wrong_d = nullptr;
      OVL_CUDA_CHECK(cudaMallocAsync(&wrong_d, sizeof(unsigned long long), s));
      OVL_CUDA_CHECK(cudaMemsetAsync(wrong_d, 0, sizeof(unsigned long long), s));
      count_wrong_kernel<<<1024, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(out(in).ptr),
                                              static_cast<const __nv_bfloat16*>(in.c_seq.get()),
                                              in.tc.rows * in.tc.cols, atol, wrong_d);
      OVL_CUDA_CHECK_LAST();
      OVL_CUDA_CHECK(cudaMemcpyAsync(&r.wrong, wrong_d, sizeof(r.wrong), cudaMemcpyDeviceToHost, s));
      OVL_CUDA_CHECK(cudaFreeAsync(wrong_d, s));
      r.ctx->synchronize(s);
    });
    double wrong = 0;
    for (const Rank& r : ranks().ranks) wrong += double(r.wrong);

    // The GEMM's span inside the overlapped run, and the collective's calls (a group, a chunk, or the whole call)
    // that started before its end and after it, from rank 0's measured timeline.
    int64_t g0 = INT64_MAX, g1 = 0;
    CommSplit comm_split;
    for_ranks([&](Rank& r) {
      r.ctx->set_tracing(true);
      whole(r);
      r.ctx->synchronize(r.stream);
      const Timeline t = r.ctx->last_timeline();
      r.ctx->set_tracing(false);
      if (r.world.rank() != 0) return;
      if (const char* dir = trace_dir()) {
        std::string file = name;
        std::replace(file.begin(), file.end(), '/', '_');
        std::replace(file.begin(), file.end(), ':', '_');
        t.write_chrome_trace(fmt::format("{}/{}.json", dir, file));
      }
      for (const Interval& i : t.intervals) {
        if (i.lane != "gemm") continue;
        g0 = std::min(g0, i.start_ns);
        g1 = std::max(g1, i.end_ns);
      }
      comm_split = split_comm_calls(t, g1);
    });

    for (auto _ : state) {  // one run per iteration, the slowest rank's time (after a host barrier)
      for_ranks([&](Rank& r) {
        r.world.barrier();
        OVL_CUDA_CHECK(cudaEventRecord(r.start, r.stream));
        whole(r);
        OVL_CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
        r.ctx->synchronize(r.stream);
        float ms = 0;
        OVL_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
        r.block_us = double(ms) * 1e3;
      });
      state.SetIterationTime(slowest(&Rank::block_us) * 1e-6);
    }
    state.counters["us"] = t_all;
    state.counters["t_seq_us"] = t_seq;
    state.counters["t_gemm_us"] = t_gemm;
    state.counters["sustain_ms"] = sustain_ms();  // the timing regime of every time here (0: burst)
    state.counters["t_comm_us"] = t_comm;
    state.counters["speedup"] = t_seq / t_all;
    state.counters["efficiency"] = (t_gemm + t_comm - t_all) / std::min(t_gemm, t_comm);
    state.counters["gemm_slowdown"] = g1 > g0 ? double(g1 - g0) * 1e-3 / t_gemm : 0.0;
    state.counters["calls_beside"] = double(comm_split.beside.count);
    state.counters["call_us_beside"] = comm_split.beside.mean_us();
    state.counters["calls_after"] = double(comm_split.after.count);
    state.counters["call_us_after"] = comm_split.after.mean_us();
    state.counters["wrong"] = wrong;
    if (real_world() && plan.comm_algo == CommAlgo::kNcclRing) {  // the CTA bound of the NCCL calls' communicator
      const auto& b = nccl_bounds();
      state.counters["nccl_ctas"] = std::find(b.begin(), b.end(), plan.comm_ctas) != b.end() ? plan.comm_ctas : 0;
    }
    // nccl-symmetric's communicator is bounded to the plan's CTAs (0: the copy engines).
    if (plan.comm_algo == CommAlgo::kNcclSymmetric)
      state.counters["nccl_ctas"] = collective_ctas(plan, collective_of(op));
    // What ran, as JSON: `ovl calibrate` and `ovl validate` read the problem and the plan from here instead of
    // deriving them from the name.
    nlohmann::json label = {{"problem", p},
                            {"plan", plan},
                            {"share", real_world() ? "real" : to_string(r0.ctx->loopback_share())},
                            {"baseline_algo", to_string(base_algo)}};
    state.SetLabel(label.dump());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Registered from main, after Initialize: the sequential cases' names carry the device's SM count.
void register_cases() {
  const int sms = device_sms();
  // Five benchmark shapes, then six more that differ in M, N or K (held-out problems for `ovl validate`; the last
  // three in no fit of any committed profile).
  const std::vector<Shape> shapes = {{8192, 8192, 1024}, {8192, 8192, 2048},  {8192, 8192, 4096},  {8192, 8192, 8192},
                                     {4096, 8192, 8192}, {4096, 8192, 4096},  {16384, 8192, 2048}, {8192, 4096, 8192},
                                     {6144, 8192, 3072}, {12288, 4096, 4096}, {8192, 6144, 2048}};
  // name: the case as the name parser reads it (the sequential /algo: cases are not names it knows: only the mode);
  // `algo` registers it with its suffix appended (/algo:ce, /algo:nccl-symmetric ...), and bench_case sets the
  // algorithm.
  auto add = [](const std::string& name, Mode mode, Op op, Shape sh, int c, CommAlgo seq_algo,
                std::optional<AlgoSuffix> algo = std::nullopt) {
    BenchCase bc;
    if (auto parsed = parse_bench_name(name)) bc = *parsed;
    bc.mode = mode;
    bc.comm_sms = c;
    const std::string registered = algo ? name + algo->suffix() : name;
    benchmark::RegisterBenchmark(registered.c_str(),
                                 [=](benchmark::State& st) { bench_case(st, registered, bc, op, sh, seq_algo, algo); })
        ->UseManualTime()
        ->Iterations(kIterations)
        ->Unit(benchmark::kMicrosecond);
  };
  Hardware hw = builtin_hardware("h200");  // only for the tma mode's default comm_algo (independent of the GPU)
  hw.spec.sm_count = sms;
  const int w = world_size();
  if (w < 1) return;
  // The /algo: baseline (the tma mode's mover on every SM) only in loopback: a real world's baseline is NCCL's.
  const bool tma_baseline = !real_world();
  const std::vector<Mode> overlapped_modes{Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma};
  for (const Shape& sh : shapes) {
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
      const Problem p = make_problem(op, sh.m, sh.n, sh.k, w);
      const CommAlgo tma_algo = default_plan(Mode::kTma, p, hw, 8).comm_algo;
      const std::string tail = fmt::format("{}/{}x{}x{}/world:{}", to_string(op), sh.m, sh.n, sh.k, w);
      add(fmt::format("overlap/sequential/{}/comm_sms:{}", tail, sms), Mode::kSequential, op, sh, sms,
          CommAlgo::kNcclRing);
      // NCCL's symmetric kernels: sequential (every op; AG+GEMM also on the copy engines), and for GEMM+AR the
      // overlapped NCCL modes (GEMM+RS and AG+GEMM cut into chunks or groups need ncclReduce / ncclBroadcast).
      const AlgoSuffix symmetric{CommAlgo::kNcclSymmetric, CtaPolicy::kEfficiency};
      for (int c : {16, 32})
        add(fmt::format("overlap/sequential/{}/comm_sms:{}", tail, c), Mode::kSequential, op, sh, c,
            CommAlgo::kNcclRing, symmetric);
      if (op == Op::kAllGatherGemm)
        add(fmt::format("overlap/sequential/{}/comm_sms:16", tail), Mode::kSequential, op, sh, 16, CommAlgo::kNcclRing,
            AlgoSuffix{CommAlgo::kNcclSymmetric, CtaPolicy::kZero});
      if (op == Op::kGemmAllReduce) {
        for (int c : {8, 16, 24, 32})
          add(fmt::format("overlap/decomposed/{}/comm_sms:{}", tail, c), Mode::kDecomposed, op, sh, c,
              CommAlgo::kNcclRing, symmetric);
        for (Mode mode : {Mode::kTileSignal, Mode::kGreenContext})
          for (int c : {16, 32})
            for (int g : {2, 4, 8})
              add(fmt::format("overlap/{}/{}/comm_sms:{}/groups:{}", to_string(mode), tail, c, g), mode, op, sh, c,
                  CommAlgo::kNcclRing, symmetric);
      }
      if (tma_baseline)
        add(fmt::format("overlap/sequential/{}/comm_sms:{}/algo:{}", tail, sms, to_string(tma_algo)), Mode::kSequential,
            op, sh, sms, tma_algo);
      for (Mode mode : overlapped_modes) {
        for (int c : {8, 16, 24, 32}) {
          add(fmt::format("overlap/{}/{}/comm_sms:{}", to_string(mode), tail, c), mode, op, sh, c, CommAlgo::kNcclRing);
        }
      }
      // The signaling modes also with 2, 4 and 8 tile groups (default_plan's one group per row band costs one
      // collective call per band, and AG+GEMM a counter release as well), in row-band order and in swizzle order
      // (groups of whole swizzle bands, where there are that many).
      const int64_t bands = swizzle_bands(default_plan(Mode::kSequential, p, hw, 0).tiles_m(p));
      for (Mode mode : overlapped_modes) {
        if (mode == Mode::kDecomposed) continue;
        for (int c : {8, 16, 24, 32}) {
          for (int g : {2, 4, 8}) {
            const std::string name = fmt::format("overlap/{}/{}/comm_sms:{}/groups:{}", to_string(mode), tail, c, g);
            add(name, mode, op, sh, c, CommAlgo::kNcclRing);
            if (g <= bands) add(name + "/order:swizzle", mode, op, sh, c, CommAlgo::kNcclRing);
            // The copy engine (tile-signal only; c: the owner's sum's CTAs).
            if (mode == Mode::kTileSignal && c == 8)
              add(name, mode, op, sh, c, CommAlgo::kNcclRing, AlgoSuffix{CommAlgo::kCopyEngine});
          }
        }
      }
    }
  }
  // FP8 (e4m3 A and B, bf16 C): three shapes, every op, the default plans on 16 communication SMs.
  for (Shape sh : {Shape{8192, 8192, 4096}, Shape{16384, 8192, 2048}, Shape{4096, 8192, 8192}}) {
    sh.dtype = DType::kE4M3;
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
      const std::string tail = fmt::format("{}/{}x{}x{}/world:{}", to_string(op), sh.m, sh.n, sh.k, w);
      add(fmt::format("overlap/sequential/{}/comm_sms:{}/dtype:e4m3", tail, sms), Mode::kSequential, op, sh, sms,
          CommAlgo::kNcclRing);
      for (Mode mode : overlapped_modes) {
        add(fmt::format("overlap/{}/{}/comm_sms:16/dtype:e4m3", to_string(mode), tail), mode, op, sh, 16,
            CommAlgo::kNcclRing);
      }
    }
  }
}

}  // namespace

// OVL_BENCHMARK_MAIN() plus the share in the JSON context and the registration (which needs the device).
int main(int argc, char** argv) {
  ::benchmark::Initialize(&argc, argv);
  if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::ovl::bench::add_device_context();
  try {
    OVL_CHECK(bench::world_kind() != bench::WorldKind::kMpi,
              "OVL_BENCH_WORLD = mpi: bench_overlap drives a real world from one process (threads)");
    ::benchmark::AddCustomContext("world_backend", bench::to_string(bench::world_kind()));
    if (!real_world()) ::benchmark::AddCustomContext("loopback_share", std::string(::ovl::to_string(bench_share())));
    // The link (the Context reads the same variable): its name and every field, as JSON text. A paced loopback ran
    // at it; a real world's cases are priced over it by `ovl validate` and `ovl calibrate` (its measured tables).
    if (const auto link = link_profile_from_env()) {
      ::benchmark::AddCustomContext("link_profile_name", link->name);
      ::benchmark::AddCustomContext("link_profile", nlohmann::json(*link).dump());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_overlap: {}\n", e.what());
    return 2;
  }
  register_cases();
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
  return 0;
}
