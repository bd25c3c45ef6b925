// ovl_soak: random calls on ovl::Context for a set time, each checked against the sequential mode on the same inputs.
//
//   ovl_soak [--duration-s 300] [--seed 1] [--out soak.json] [--wait-timeout-ms 10000] [--max-dim 8192]
//            [--threads 2] [--only-thread ID] [--calls N] [--problem NAME]... [--share rank0|whole-world]
//            [--plan random|auto|candidate:I|file:PATH] [--pool N]
//
// To narrow a failure down: --threads 1 (one host thread; a run is then repeatable from its --seed), --problem NAME
// (Problem::name(), e.g. gemm-reducescatter/2040x1024x8192/fp16/nt/world:5; repeatable, one world) instead of random
// problems, on Contexts of the thread's own in that world with --share, --plan auto (every call without a plan:
// measured tuning) or candidate:I (the I-th plan measured tuning would time, Context::tuning_candidates, alone), and
// --calls N (at most N calls per thread). --only-thread ID runs thread ID's random sequence alone. Every wrong result
// and error is recorded with the thread's call number and its plan's JSON (for a call without a plan, the plan
// measured tuning chose): saved to a file, --plan file:PATH with the same --problem and --share runs that call again,
// and --only-thread ID --calls N replays the thread's sequence up to that call.
//
// Two host threads run at once, each with two streams. Each runs epochs of 8..24 calls: on a Context of its own (a
// loopback world of 2..8 ranks, share rank0 or whole-world: two Contexts on one device) or on one Context both
// threads share (two threads on one Context). Every call: a random problem (GEMM+AR, GEMM+RS, AG+GEMM; bf16 or fp16;
// B as N x K or K x N; M, N, K up to --max-dim with M off the 128-row tile, N off the 256-column tile, K from 64)
// with fresh random inputs, a random plan the executor accepts (Context::can_run; every mode, 8..32 communication SMs,
// 1..16 tile groups, swizzle, tile-major output, tma-push / tma-pull, partitioned or not, 1..8 chunks) or the
// planner's choice (std::nullopt), on a random one of the two streams. The sequential mode runs the same inputs into
// a second output; both are compared on the device.
//
// Tolerance: ||out - seq|| / ||seq|| < 1e-2, and no NaN or inf. bf16 / fp16 inputs, fp32 accumulation, outputs
// rounded to 16 bits: two correct runs that differ only in summation order are ~2e-3 apart; a missing tile group,
// row band or rank is >= 0.1 off (tests/gpu/test_overlap.cu uses the same bound).
//
// At the end of each epoch the thread calls release_caches() (on the shared Context, while the other thread may be
// calling it) and records the device memory it freed (cudaMemGetInfo) and the process RSS. Memory is read three times
// with every Context released (the threads joined): at the start, at half the duration and at the end. The first half
// pays what a process sets up once (CUDA modules, green contexts per SM partition, cuBLAS's and NCCL's state); growth
// over the second half is what the calls keep. --pool N draws each world's problems from N fixed random ones (the same
// for both threads) instead of a new one per call, so that state kept per shape outside ovl (by cuBLAS or the driver)
// stops growing too. The JSON written to --out: calls, distinct problems, calls per mode / op / dtype / world, wrong
// results (the first 20 described), errors by kind (timeout, other) and timeouts by the wait that timed out, memory at
// start, half and end (device used, RSS) and the growth over the whole run and over its second half, the longest call
// (enqueue to synchronize) and what it ran. A Context reports a device-side timeout at the next synchronize() of any
// thread, so on the shared Context a mismatch after a timeout there is counted apart (wrong_after_shared_timeout), not
// as a wrong result. Exit status: 0; 1 on a wrong result; 2 on an error that is not a device-side timeout, and at once,
// with the JSON's "fatal" saying what, when a sticky CUDA error (an illegal address) left the device unusable; 3 when a
// call made no progress for 3 x the wait timeout + 60 s (a hang: the JSON is written with "hung": true first).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ovl/core/ovl.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/error.hpp"

namespace ovl::soak {
namespace {

constexpr double kTolerance = 1e-2;

// Which plan a call runs: a random one the context accepts (or, one call in eight, the planner's), always the
// planner's (a call without a plan), or one candidate of measured tuning.
enum class PlanKind { kRandom, kAuto, kCandidate, kFile };

struct Options {
  double duration_s = 300;
  uint64_t seed = 1;
  std::string out = "soak.json";
  double wait_timeout_ms = 10000;
  int64_t max_dim = 8192;
  int threads = 2;
  int only_thread = -1;                // >= 0: run only the thread of this id (its own random sequence), alone
  int64_t calls = 0;                   // per thread; 0: no limit
  std::vector<Problem> problems;       // empty: random problems
  std::optional<LoopbackShare> share;  // of the threads' own Contexts; nullopt: random
  PlanKind plan = PlanKind::kRandom;
  int candidate = 0;  // PlanKind::kCandidate: index into Context::tuning_candidates
  Plan plan_file;     // PlanKind::kFile: the plan of --plan file:PATH
  int pool = 0;       // > 0: each world's random problems come from this many fixed ones
};

// ---- device helpers: random fill and comparison ----

__device__ float uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (2.0f / float(1 << 24)) - 1.0f;  // [-1, 1)
}

__global__ void fill_kernel(void* p, int64_t n, bool fp16, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = uniform(seed, i);
    if (fp16) {
      static_cast<__half*>(p)[i] = __float2half(v);
    } else {
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    }
  }
}

// sums[0] += (x - ref)^2, sums[1] += ref^2, *nonfinite += elements of x that are NaN or inf.
__global__ void compare_kernel(const void* x, const void* ref, int64_t n, bool fp16, double* sums,
                               unsigned long long* nonfinite) {
  double diff = 0, norm = 0;
  unsigned long long bad = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = fp16 ? __half2float(static_cast<const __half*>(x)[i])
                         : __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]);
    const float r = fp16 ? __half2float(static_cast<const __half*>(ref)[i])
                         : __bfloat162float(static_cast<const __nv_bfloat16*>(ref)[i]);
    if (!isfinite(a)) {
      ++bad;
      continue;
    }
    diff += double(a - r) * double(a - r);
    norm += double(r) * double(r);
  }
  atomicAdd(&sums[0], diff);
  atomicAdd(&sums[1], norm);
  if (bad != 0) atomicAdd(nonfinite, bad);
}

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 20);
}

double device_used_mib() {
  size_t free = 0, total = 0;
  OVL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return double(total - free) / double(1 << 20);
}

// ---- what the run records (one lock; the threads add to it) ----

struct Record {
  std::mutex mutex;
  int64_t calls = 0, wrong = 0, timeouts = 0, other_errors = 0;
  std::set<std::string> problems;
  std::map<std::string, int64_t> modes, ops, dtypes, worlds, contexts, errors_by_kind;
  std::map<std::string, int64_t> timeouts_by_wait;  // which wait timed out (timeout_wait)
  std::vector<std::string> wrong_examples, error_examples;
  double longest_ms = 0;
  std::string longest_what;
  std::vector<nlohmann::json> releases;
  std::atomic<int64_t> last_progress_ms{0};
  // Device-side timeouts seen on the shared Context. Its synchronize() reports a timeout of either thread's call
  // (one error record per Context), so a thread whose call overlapped one cannot trust its own "no error": a
  // mismatch then counts as wrong_after_shared_timeout, not as a wrong result.
  std::atomic<int64_t> shared_timeouts{0};
  int64_t wrong_after_shared_timeout = 0;
  // A sticky CUDA error (an illegal address, a kernel fault) leaves the device unusable for the whole process: the
  // first one stops both threads, and the run reports it and exits 2.
  std::atomic<bool> stop{false};
  std::string fatal;
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Which wait a timeout's message names (kernels::describe's and the ce watchdog's wording).
std::string timeout_wait(const std::string& text) {
  const std::pair<const char*, const char*> waits[] = {
      {"the GEMM waited for the gathered rows", "the GEMM waited for a gather"},
      {"the persistent collective", "the persistent collective waited for the GEMM"},
      {"the counter wait kernel", "the counter wait kernel waited for the GEMM"},
      {"the copy engine's stream", "the copy engine's stream waited"},
      {"timed out waiting for the", "a rank waited for a peer's flag"}};
  for (const auto& [needle, name] : waits)
    if (text.find(needle) != std::string::npos) return name;
  return "another wait";
}

// ---- random problems and plans ----

int64_t pick(std::mt19937_64& rng, std::initializer_list<int64_t> values) {
  return *(values.begin() + rng() % values.size());
}

// A problem from its name, as Problem::name() writes it: op/MxNxK/dtype/layout/world:W.
Problem parse_problem_name(const std::string& name) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  Problem p;
  long long m = 0, n = 0, k = 0;
  int world = 0;
  OVL_CHECK(parts.size() == 5 && std::sscanf(parts[1].c_str(), "%lldx%lldx%lld", &m, &n, &k) == 3 &&
                std::sscanf(parts[4].c_str(), "world:%d", &world) == 1,
            "ovl_soak: --problem \"{}\" is not op/MxNxK/dtype/layout/world:W (as Problem::name() writes it)", name);
  p.op = parse_op(parts[0]);
  p.m = m;
  p.n = n;
  p.k = k;
  p.dtype = parse_dtype(parts[2]);
  p.b_layout = parse_b_layout(parts[3]);
  p.world = world;
  p.gpus_per_node = std::max(8, world);
  p.validate();
  return p;
}

// A problem for `world` ranks within the limits (context.hpp): N, K multiples of 8, M divisible by the world for
// RS / AG. M often off the 128-row tile, N off the 256-column tile.
Problem random_problem(std::mt19937_64& rng, int world, int64_t max_dim) {
  Problem p;
  p.op = Op(rng() % 3);
  p.dtype = rng() % 2 ? DType::kBF16 : DType::kFP16;
  p.b_layout = rng() % 4 == 0 ? BLayout::kKxN : BLayout::kNxK;
  p.world = world;
  p.gpus_per_node = std::max(8, world);
  const int64_t unit = 8 * world;  // M: a multiple of 8 rows per rank (16-byte rows in every range)
  const int64_t m_max = std::max<int64_t>(unit, std::min<int64_t>(max_dim, 8192) / unit * unit);
  p.m = rng() % 2 ? pick(rng, {128, 256, 1024, 2048, 4096}) : unit * int64_t(1 + rng() % uint64_t(m_max / unit));
  p.m = std::max<int64_t>(unit, std::min(p.m, m_max) / unit * unit);
  const int64_t n_max = std::min<int64_t>(max_dim, 8192);
  p.n = rng() % 2 ? pick(rng, {256, 768, 1024, 4096}) : 8 * int64_t(1 + rng() % uint64_t(n_max / 8));
  p.n = std::min(p.n, n_max);
  p.k = pick(rng, {64, 128, 256, 512, 1000, 2048, 4096, 8192});
  p.k = std::min<int64_t>(p.k / 8 * 8, std::min<int64_t>(max_dim, 8192));
  // Keep one call bounded so that a soak covers many problems and the caches fit: M x N and M x K <= 2^25 elements
  // (a loopback world of 8 keeps 16 such buffers per shape: 1 GiB), M x N x K <= 2^35.
  constexpr int64_t kMaxElems = int64_t{1} << 25;
  if (p.m * p.n > kMaxElems) p.n = std::max<int64_t>(8, kMaxElems / p.m / 8 * 8);
  if (p.m * p.k > kMaxElems) p.k = std::max<int64_t>(64, kMaxElems / p.m / 8 * 8);
  while (double(p.m) * double(p.n) * double(p.k) > double(int64_t{1} << 35) && p.k > 64) p.k /= 2;
  p.k = std::max<int64_t>(64, p.k / 8 * 8);
  return p;
}

// A random plan the context accepts for p, or nullopt (the planner's choice).
std::optional<Plan> random_plan(const Context& ctx, const Problem& p, std::mt19937_64& rng) {
  if (rng() % 8 == 0) return std::nullopt;
  const Hardware& hw = ctx.hardware();
  const std::vector<Mode> modes = all_modes();
  for (int attempt = 0; attempt < 12; ++attempt) {
    const Mode mode = modes[rng() % modes.size()];
    const int comm_sms = hw.spec.sm_granularity * int(1 + rng() % 4);
    Plan plan = default_plan(mode, p, hw, comm_sms);
    if (mode_signals(mode)) {
      const int64_t tm = plan.tiles_m(p), tn = plan.tiles_n(p);
      const int groups = int(1 + rng() % uint64_t(std::min<int64_t>(tm, 16)));
      if (rng() % 4 == 0 && mode != Mode::kTileSignal) {
        plan.tile_order = TileOrder::kSwizzle;
        plan.tile_groups = swizzle_band_groups(tm, tn, int(std::min<int64_t>(groups, swizzle_bands(tm))));
      } else {
        plan.tile_groups = band_groups(tm, tn, groups);
      }
      if (mode == Mode::kTileSignal) {
        plan.gemm_sms = hw.spec.sm_count - comm_sms;
        if (rng() % 4 == 0) plan.output = OutputLayout::kTileMajor;
      }
      if (mode == Mode::kTma) {
        plan.comm_algo = rng() % 2 ? CommAlgo::kTmaPush : CommAlgo::kTmaPull;
        if (rng() % 3 == 0) {
          plan.partitioned = false;
          plan.gemm_sms = hw.spec.sm_count - comm_sms;
        }
      }
    }
    if (mode == Mode::kDecomposed) plan.chunks = int(pick(rng, {1, 2, 3, 4, 8}));
    if (ctx.can_run(p, plan).empty()) return plan;
  }
  return std::nullopt;
}

void run_op(Context& ctx, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
            const std::optional<Plan>& plan, cudaStream_t stream) {
  switch (op) {
    case Op::kGemmAllReduce:
      return ctx.gemm_all_reduce(a, b, c, plan, stream);
    case Op::kGemmReduceScatter:
      return ctx.gemm_reduce_scatter(a, b, c, plan, stream);
    case Op::kAllGatherGemm:
      return ctx.all_gather_gemm(a, b, c, plan, stream);
  }
}

// ---- one thread ----

class Worker {
 public:
  Worker(int id, const Options& o, Record& record, Context& shared)
      : id_(id), o_(o), record_(record), shared_(shared), rng_(o.seed * 7919 + uint64_t(id)) {
    const size_t elems = size_t(o.max_dim) * size_t(o.max_dim);
    a_ = ovl::DeviceBuffer(elems * 2);
    b_ = ovl::DeviceBuffer(elems * 2);
    c_ = ovl::DeviceBuffer(elems * 2);
    ref_ = ovl::DeviceBuffer(elems * 2);
    sums_ = ovl::DeviceBuffer(2 * sizeof(double) + sizeof(unsigned long long));
    for (cudaStream_t& s : streams_) OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ~Worker() {
    for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
  }

  void run(std::chrono::steady_clock::time_point end) {
    try {
      loop(end);
    } catch (const std::exception& e) {  // a device left unusable: release_caches or a memory probe threw
      stop_with(fmt::format("thread {}: {}", id_, e.what()));
    }
  }

 private:
  void stop_with(const std::string& why) {
    {
      const std::lock_guard lock(record_.mutex);
      if (record_.fatal.empty()) record_.fatal = why;
    }
    record_.stop.store(true);
  }

  void loop(std::chrono::steady_clock::time_point end) {
    while (std::chrono::steady_clock::now() < end && !record_.stop.load() && calls_left()) {
      // Given problems run on Contexts of their own world (the shared one has world 4).
      const bool use_shared = o_.problems.empty() && rng_() % 3 == 0;
      std::unique_ptr<Context> own;
      if (!use_shared) {
        ContextOptions co;
        co.world = World::loopback(o_.problems.empty() ? int(2 + rng_() % 7) : o_.problems.front().world);
        const LoopbackShare share = rng_() % 2 ? LoopbackShare::kRank0 : LoopbackShare::kWholeWorld;
        co.loopback_share = o_.share ? *o_.share : share;
        co.wait_timeout_ms = o_.wait_timeout_ms;
        co.loopback_seed = rng_();
        own = std::make_unique<Context>(co);
      }
      Context& ctx = use_shared ? shared_ : *own;
      const std::string context_kind = use_shared ? "shared by both threads" : "own";
      const int calls = int(8 + rng_() % 17);
      for (int i = 0; i < calls && std::chrono::steady_clock::now() < end && !record_.stop.load() && calls_left(); ++i)
        one_call(ctx, context_kind);
      if (record_.stop.load()) return;
      const double before = device_used_mib();
      ctx.release_caches();
      const double after = device_used_mib();
      {
        const std::lock_guard lock(record_.mutex);
        record_.releases.push_back({{"thread", id_},
                                    {"context", context_kind},
                                    {"world", ctx.world_size()},
                                    {"device_used_before_mib", before},
                                    {"device_used_after_mib", after},
                                    {"rss_mib", rss_mib()}});
      }
    }
  }

  // A random problem for `world` ranks: a new one, or (--pool N) one of the world's N, made from the seed and the
  // world alone so that both threads draw from the same N.
  Problem next_problem(int world) {
    if (o_.pool == 0) return random_problem(rng_, world, o_.max_dim);
    std::vector<Problem>& pool = pool_[world];
    if (pool.empty()) {
      std::mt19937_64 rng(o_.seed * 104729 + uint64_t(world));
      for (int i = 0; i < o_.pool; ++i) pool.push_back(random_problem(rng, world, o_.max_dim));
    }
    return pool[rng_() % pool.size()];
  }

  void one_call(Context& ctx, const std::string& context_kind) {
    const Problem p = o_.problems.empty() ? next_problem(ctx.world_size()) : o_.problems[rng_() % o_.problems.size()];
    ++calls_;
    const int w = p.world;
    const int64_t a_rows = p.op == Op::kAllGatherGemm ? p.m / w : p.m;
    const int64_t c_rows = p.op == Op::kGemmReduceScatter ? p.m / w : p.m;
    const bool fp16 = p.dtype == DType::kFP16;
    const TensorRef a{a_.get(), a_rows, p.k, p.dtype};
    const TensorRef b{b_.get(), p.b_layout == BLayout::kNxK ? p.n : p.k, p.b_layout == BLayout::kNxK ? p.k : p.n,
                      p.dtype, p.b_layout};
    const TensorRef c{c_.get(), c_rows, p.n, p.dtype}, ref{ref_.get(), c_rows, p.n, p.dtype};
    cudaStream_t s = streams_[rng_() % 2];
    fill_kernel<<<1024, 256, 0, s>>>(a_.get(), a_rows * p.k, fp16, rng_());
    fill_kernel<<<1024, 256, 0, s>>>(b_.get(), p.n * p.k, fp16, rng_());
    OVL_CUDA_CHECK(cudaMemsetAsync(c_.get(), 0xFF, size_t(c_rows * p.n * 2), s));  // NaN: an unwritten element shows
    OVL_CUDA_CHECK(cudaGetLastError());
    const std::optional<Plan> plan = choose_plan(ctx, p);
    const std::string mode = plan ? std::string(to_string(plan->mode)) : "auto";
    // The plan's JSON too: a call that failed replays with --problem, --share and --plan file:PATH.
    std::string what = fmt::format("thread {} call {} ({} context, loopback {} {}): {} plan {}{}", id_, calls_,
                                   context_kind, w, to_string(ctx.loopback_share()), p.name(),
                                   plan ? plan->summary() : "auto",
                                   plan ? " " + nlohmann::json(*plan).dump() : std::string());
    // Without a plan, what measured tuning chose (known once the call chose; host state, readable after a fault).
    const auto name_choice = [&] {
      if (plan) return;
      const PlanChoice* choice = ctx.plan_choice(p);
      if (choice != nullptr) what += fmt::format(" (chose {} {})", choice->plan.summary(), nlohmann::json(choice->plan).dump());
    };
    record_.last_progress_ms.store(now_ms());
    const bool shared = &ctx == &shared_;
    const int64_t shared_timeouts_before = record_.shared_timeouts.load();
    try {
      run_op(ctx, p.op, a, b, ref, default_plan(Mode::kSequential, p, ctx.hardware(), 16), s);
      cudaStream_t s2 = streams_[rng_() % 2];  // the call under test on either stream (the Context orders them)
      const auto t0 = std::chrono::steady_clock::now();
      run_op(ctx, p.op, a, b, c, plan, s2);
      ctx.synchronize(s2);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      ctx.synchronize(s);
      const double err = compare(c, ref, c_rows * p.n, fp16, s2);
      if (!(err < kTolerance)) name_choice();
      const std::lock_guard lock(record_.mutex);
      count(p, mode, w, context_kind);
      if (ms > record_.longest_ms) {
        record_.longest_ms = ms;
        record_.longest_what = what;
      }
      if (!(err < kTolerance) && shared && record_.shared_timeouts.load() != shared_timeouts_before) {
        ++record_.wrong_after_shared_timeout;
      } else if (!(err < kTolerance)) {
        ++record_.wrong;
        if (record_.wrong_examples.size() < 20) {
          record_.wrong_examples.push_back(fmt::format("{}: relative error {}", what, err));
        }
        fmt::print(stderr, "WRONG RESULT: {}: relative error {}\n", what, err);
      }
    } catch (const Error& e) {
      name_choice();
      const std::string text = e.what();
      const bool timeout = text.find("timed out") != std::string::npos;
      if (timeout && shared) record_.shared_timeouts.fetch_add(1);
      const std::lock_guard lock(record_.mutex);
      count(p, mode, w, context_kind);
      ++(timeout ? record_.timeouts : record_.other_errors);
      ++record_.errors_by_kind[timeout ? "timeout" : "other"];
      if (timeout) ++record_.timeouts_by_wait[timeout_wait(text)];
      if (record_.error_examples.size() < 20) record_.error_examples.push_back(what + ": " + text);
      fmt::print(stderr, "error: {}: {}\n", what, text);
      // A sticky error shows in every later CUDA call: the device is lost for this process.
      if (const cudaError_t sticky = cudaDeviceSynchronize(); sticky != cudaSuccess) {
        if (record_.fatal.empty()) {
          record_.fatal = fmt::format("{}: {} (the device is unusable afterwards: {})", what, text,
                                      cudaGetErrorString(sticky));
        }
        record_.stop.store(true);
      }
    }
    record_.last_progress_ms.store(now_ms());
  }

  std::optional<Plan> choose_plan(const Context& ctx, const Problem& p) {
    switch (o_.plan) {
      case PlanKind::kRandom:
        return random_plan(ctx, p, rng_);
      case PlanKind::kAuto:
        return std::nullopt;
      case PlanKind::kFile:
        return o_.plan_file;
      case PlanKind::kCandidate: {
        const std::vector<Plan> plans = ctx.tuning_candidates(p);
        OVL_CHECK(size_t(o_.candidate) < plans.size(), "ovl_soak: --plan candidate:{}, but {} has {} candidates",
                  o_.candidate, p.name(), plans.size());
        return plans[size_t(o_.candidate)];
      }
    }
    return std::nullopt;
  }

  bool calls_left() const { return o_.calls == 0 || calls_ < o_.calls; }

  // ||x - ref|| / ||ref||, +inf with a NaN or inf in x. Synchronizes s.
  double compare(const TensorRef& x, const TensorRef& ref, int64_t n, bool fp16, cudaStream_t s) {
    auto* sums = static_cast<double*>(sums_.get());
    auto* bad = reinterpret_cast<unsigned long long*>(sums + 2);
    OVL_CUDA_CHECK(cudaMemsetAsync(sums_.get(), 0, 2 * sizeof(double) + sizeof(unsigned long long), s));
    compare_kernel<<<512, 256, 0, s>>>(x.ptr, ref.ptr, n, fp16, sums, bad);
    OVL_CUDA_CHECK(cudaGetLastError());
    double host[2] = {};
    unsigned long long nonfinite = 0;
    OVL_CUDA_CHECK(cudaMemcpyAsync(host, sums, sizeof(host), cudaMemcpyDeviceToHost, s));
    OVL_CUDA_CHECK(cudaMemcpyAsync(&nonfinite, bad, sizeof(nonfinite), cudaMemcpyDeviceToHost, s));
    OVL_CUDA_CHECK(cudaStreamSynchronize(s));
    if (nonfinite != 0) return INFINITY;
    return std::sqrt(host[0] / std::max(host[1], 1e-30));
  }

  void count(const Problem& p, const std::string& mode, int w, const std::string& context_kind) {
    ++record_.calls;
    record_.problems.insert(p.name());
    ++record_.modes[mode];
    ++record_.ops[std::string(to_string(p.op))];
    ++record_.dtypes[std::string(to_string(p.dtype))];
    ++record_.worlds[std::to_string(w)];
    ++record_.contexts[context_kind];
  }

  int id_;
  const Options& o_;
  Record& record_;
  Context& shared_;
  std::mt19937_64 rng_;
  ovl::DeviceBuffer a_, b_, c_, ref_, sums_;
  std::map<int, std::vector<Problem>> pool_;  // --pool: each world's problems
  int64_t calls_ = 0;
  cudaStream_t streams_[2] = {};
};

nlohmann::json report(const Options& o, Record& r, double elapsed_s, const nlohmann::json& memory, bool hung) {
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> problems;
  for (const Problem& p : o.problems) problems.push_back(p.name());
  return {{"duration_s", elapsed_s},
          {"threads", o.only_thread >= 0 ? fmt::format("thread {} alone", o.only_thread) : std::to_string(o.threads)},
          {"given_problems", problems},
          {"plan", o.plan == PlanKind::kRandom ? std::string("random")
                   : o.plan == PlanKind::kAuto ? std::string("auto")
                   : o.plan == PlanKind::kFile ? "file: " + o.plan_file.summary()
                                               : fmt::format("candidate:{}", o.candidate)},
          {"requested_duration_s", o.duration_s},
          {"seed", o.seed},
          {"pool", o.pool},
          {"tolerance", kTolerance},
          {"wait_timeout_ms", o.wait_timeout_ms},
          {"calls", r.calls},
          {"problems", r.problems.size()},
          {"modes", r.modes},
          {"ops", r.ops},
          {"dtypes", r.dtypes},
          {"worlds", r.worlds},
          {"contexts", r.contexts},
          {"wrong_results", r.wrong},
          {"wrong_examples", r.wrong_examples},
          {"wrong_after_shared_timeout", r.wrong_after_shared_timeout},
          {"timeouts", r.timeouts},
          {"errors_by_kind", r.errors_by_kind},
          {"timeouts_by_wait", r.timeouts_by_wait},
          {"error_examples", r.error_examples},
          {"memory", memory},
          {"releases", r.releases},
          {"longest_call_ms", r.longest_ms},
          {"longest_call", r.longest_what},
          {"hung", hung},
          {"fatal", r.fatal}};
}

void write(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    OVL_CHECK(i + 1 < argc,
              "ovl_soak: {} needs a value (flags: --duration-s, --seed, --out, --wait-timeout-ms, --max-dim, "
              "--threads, --only-thread, --calls, --problem, --share, --plan, --pool)",
              flag);
    const std::string v = argv[++i];
    if (flag == "--duration-s") {
      o.duration_s = std::stod(v);
    } else if (flag == "--seed") {
      o.seed = std::stoull(v);
    } else if (flag == "--out") {
      o.out = v;
    } else if (flag == "--wait-timeout-ms") {
      o.wait_timeout_ms = std::stod(v);
    } else if (flag == "--max-dim") {
      o.max_dim = std::stoll(v);
    } else if (flag == "--threads") {
      o.threads = std::stoi(v);
    } else if (flag == "--only-thread") {
      o.only_thread = std::stoi(v);
    } else if (flag == "--calls") {
      o.calls = std::stoll(v);
    } else if (flag == "--problem") {
      o.problems.push_back(parse_problem_name(v));
    } else if (flag == "--pool") {
      o.pool = std::stoi(v);
    } else if (flag == "--share") {
      o.share = parse_loopback_share(v);
    } else if (flag == "--plan") {
      if (v == "random") {
        o.plan = PlanKind::kRandom;
      } else if (v == "auto") {
        o.plan = PlanKind::kAuto;
      } else if (v.rfind("candidate:", 0) == 0) {
        o.plan = PlanKind::kCandidate;
        o.candidate = std::stoi(v.substr(10));
        OVL_CHECK(o.candidate >= 0, "ovl_soak: --plan {}: the candidate index must be >= 0", v);
      } else if (v.rfind("file:", 0) == 0) {
        o.plan = PlanKind::kFile;
        o.plan_file = load_plan(v.substr(5));
      } else {
        OVL_FAIL("ovl_soak: --plan {} is not random, auto, candidate:I or file:PATH", v);
      }
    } else {
      OVL_FAIL("ovl_soak: unknown flag {}", flag);
    }
  }
  OVL_CHECK(o.duration_s > 0 && o.duration_s <= 86400, "ovl_soak: --duration-s {} is not in (0, 86400]", o.duration_s);
  OVL_CHECK(o.threads == 1 || o.threads == 2, "ovl_soak: --threads {} is not 1 or 2", o.threads);
  OVL_CHECK(o.only_thread < 2, "ovl_soak: --only-thread {} is not 0 or 1", o.only_thread);
  if (o.only_thread >= 0) o.threads = 1;
  OVL_CHECK(o.calls >= 0, "ovl_soak: --calls {} is negative", o.calls);
  OVL_CHECK(o.pool >= 0 && o.pool <= 100000, "ovl_soak: --pool {} is not in [0, 100000]", o.pool);
  OVL_CHECK(o.pool == 0 || o.problems.empty(), "ovl_soak: --pool draws random problems; it cannot go with --problem");
  for (const Problem& p : o.problems) {
    OVL_CHECK(p.world == o.problems.front().world, "ovl_soak: --problem {} and {} have different worlds", p.name(),
              o.problems.front().name());
    OVL_CHECK(p.world >= 2 && p.world <= 8, "ovl_soak: --problem {}: the world must be 2..8 (a loopback world)",
              p.name());
    const int64_t cap = o.max_dim * o.max_dim;  // elements of each of a thread's buffers
    OVL_CHECK(p.m * p.k <= cap && p.n * p.k <= cap && p.m * p.n <= cap,
              "ovl_soak: --problem {} needs buffers over --max-dim {} squared elements", p.name(), o.max_dim);
  }
  OVL_CHECK((o.plan != PlanKind::kCandidate && o.plan != PlanKind::kFile) || !o.problems.empty(),
            "ovl_soak: --plan candidate:I and file:PATH need --problem");
  OVL_CHECK(o.max_dim >= 512 && o.max_dim <= 16384 && o.max_dim % 8 == 0,
            "ovl_soak: --max-dim {} is not a multiple of 8 in [512, 16384]", o.max_dim);
  return o;
}

int main_impl(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print(stderr, "ovl_soak: no CUDA GPU\n");
    return 2;
  }
  OVL_CUDA_CHECK(cudaSetDevice(0));
  OVL_CUDA_CHECK(cudaFree(nullptr));
  Record record;
  nlohmann::json memory;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(o.duration_s));
  std::atomic<bool> finished{false};
  // Watchdog: no call finished for 3 x the wait timeout + 60 s is a hang; write what we have and exit 3.
  std::thread watchdog([&] {
    const int64_t limit_ms = int64_t(3 * o.wait_timeout_ms) + 60000;
    record.last_progress_ms.store(now_ms());
    while (!finished.load()) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      if (now_ms() - record.last_progress_ms.load() > limit_ms && !finished.load()) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        write(o.out, report(o, record, s, memory, true));
        fmt::print(stderr, "ovl_soak: no call finished for {} ms: hung\n", limit_ms);
        std::_Exit(3);
      }
    }
  });
  {
    ContextOptions shared_options;
    shared_options.world = World::loopback(4);
    shared_options.wait_timeout_ms = o.wait_timeout_ms;
    Context shared(shared_options);
    std::vector<std::unique_ptr<Worker>> workers;
    for (int id = 0; id < 2; ++id)
      if (o.only_thread < 0 ? id < o.threads : id == o.only_thread)
        workers.push_back(std::make_unique<Worker>(id, o, record, shared));
    memory["device_used_start_mib"] = device_used_mib();
    memory["rss_start_mib"] = rss_mib();
    // Two halves; between them and after them every Context is released (the threads' own ones are gone with their
    // epochs) and memory is read.
    const auto mid = start + (end - start) / 2;
    const std::pair<std::chrono::steady_clock::time_point, const char*> halves[] = {{mid, "mid"}, {end, "end"}};
    for (const auto& half : halves) {
      const auto until = half.first;
      const char* label = half.second;
      std::vector<std::thread> threads;
      for (auto& w : workers) threads.emplace_back([&w, until] { w->run(until); });
      for (std::thread& t : threads) t.join();
      if (record.stop.load()) {
        // The device is lost: report what the run saw and stop (the Contexts' destructors only log).
        finished.store(true);
        watchdog.join();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        write(o.out, report(o, record, s, memory, false));
        fmt::print(stderr, "ovl_soak: stopped after a sticky CUDA error: {}\n", record.fatal);
        std::_Exit(2);  // the Contexts cannot be torn down on a lost device
      }
      shared.release_caches();
      memory[fmt::format("device_used_{}_mib", label)] = device_used_mib();
      memory[fmt::format("rss_{}_mib", label)] = rss_mib();
    }
  }
  finished.store(true);
  watchdog.join();
  const auto growth = [&](const char* what, const char* from) {
    return memory[fmt::format("{}_end_mib", what)].get<double>() -
           memory[fmt::format("{}_{}_mib", what, from)].get<double>();
  };
  memory["device_growth_mib"] = growth("device_used", "start");
  memory["rss_growth_mib"] = growth("rss", "start");
  memory["device_growth_second_half_mib"] = growth("device_used", "mid");
  memory["rss_growth_second_half_mib"] = growth("rss", "mid");
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json j = report(o, record, elapsed, memory, false);
  write(o.out, j);
  fmt::print(
      "ovl_soak: {} calls, {} problems, {} wrong, {} timeouts, {} other errors, memory growth (whole run / second "
      "half) device {:.1f} / {:.1f} MiB, RSS {:.1f} / {:.1f} MiB, longest call {:.1f} ms; {}\n",
      record.calls, record.problems.size(), record.wrong, record.timeouts, record.other_errors,
      memory["device_growth_mib"].get<double>(), memory["device_growth_second_half_mib"].get<double>(),
      memory["rss_growth_mib"].get<double>(), memory["rss_growth_second_half_mib"].get<double>(), record.longest_ms,
      o.out);
  if (record.wrong > 0) return 1;
  if (record.other_errors > 0) return 2;
  return 0;
}

}  // namespace
}  // namespace ovl::soak

int main(int argc, char** argv) {
  try {
    return ovl::soak::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ovl_soak: %s\n", e.what());
    return 2;
  }
}
