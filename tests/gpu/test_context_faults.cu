// ovl::Context under bad input, faults and concurrent use (docs/reliability.md lists every case and its message).
//
// Bad input: each call is refused with an ovl::Error naming the tensor and the value before anything is enqueued:
// outputs that alias or partly overlap an input, null, host (pinned and pageable), freed and wrong-device pointers,
// tensors larger than their allocation, mismatched dtypes, sizes that are zero, negative or over int32, a plan made
// for another problem. The device-free parts of these checks are unit-tested in tests/base/test_tensor_checks.cpp.
//
// Faults: a device-side wait timeout set tiny (every call either completes correctly or ends in an ovl::Error saying
// it timed out, never a hang or a wrong answer reported as success); release_caches() from another thread while
// calls run (it waits for the call being enqueued: Context holds one lock over each call, release_caches and
// synchronize); calls on two streams and from two threads on one Context, and two Contexts on one device; a peer of
// a real World that stops before a call (2 GPUs; mode tma's collective times out naming the peer). After each fault
// a correct call on the same Context is checked against the sequential mode on the same inputs.
//
// Tolerance: as in test_overlap.cu, ||out - ref|| / ||ref|| < 1e-2 against the sequential mode (bf16 inputs, fp32
// accumulation: a correct run is ~2e-3 off the float64 result, a missing group or rank >= 0.1).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "gpu/gpu_test.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

using test::DeviceMatrix;
using test::expect_error_naming_all;
using test::rel_error;
using test::run_op;

constexpr double kTolerance = 1e-2;

class ContextFaultsTest : public test::HopperTest {};
class ContextFaults2GpuTest : public test::MultiGpuTest<2> {
 protected:
  void SetUp() override {
    test::MultiGpuTest<2>::SetUp();
    if (IsSkipped()) return;
    if (test::compute_capability(0) != 90) GTEST_SKIP() << "needs compute capability 9.0";
  }
};

// The sequential mode's result of (a, b) into a new matrix like `like`.
std::vector<uint16_t> sequential(Context& ctx, Op op, const DeviceMatrix& a, const DeviceMatrix& b,
                                 const DeviceMatrix& like, cudaStream_t stream) {
  DeviceMatrix out(like.rows, like.cols, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), out.ref());
  run_op(ctx, op, a.ref(), b.ref(), out.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
  ctx.synchronize(stream);
  return out.read();
}

// A plan of each mode that this context runs for p (16 communication SMs).
std::vector<Plan> runnable_plans(const Context& ctx, const Problem& p) {
  std::vector<Plan> plans;
  for (Mode mode : all_modes()) {
    Plan plan = default_plan(mode, p, ctx.hardware(), 16);
    if (mode == Mode::kTileSignal) plan.gemm_sms = ctx.hardware().spec.sm_count - 16;
    if (ctx.can_run(p, plan).empty()) plans.push_back(plan);
  }
  return plans;
}

TEST_F(ContextFaultsTest, OutputsThatOverlapAnInputAreRefused) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context ctx(options);
  cudaStream_t stream = nullptr;
  // One buffer big enough for A (1024 x 256), B (768 x 256) and C (1024 x 768) at once.
  DeviceMatrix big(1024, 768, 5);
  const TensorRef a{big.ptr, 1024, 256}, b{big.ptr, 768, 256}, c{big.ptr, 1024, 768};
  // C is A (and B): accepted before, the GEMM then read what it wrote.
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a, b, c, std::nullopt, stream); },
                          {"gemm_all_reduce: C [", "overlaps A [", "must not alias an input"});
  // C overlaps only B: C's first 16 elements are B's last 16.
  DeviceMatrix a2(1024, 256, 6), bc(768 + 1024, 768, 7);
  const TensorRef b_first{bc.ptr, 768, 256};
  const TensorRef c_tail{static_cast<char*>(bc.ptr) + (768 * 256 - 16) * 2, 1024, 768};
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a2.ref(), b_first, c_tail, std::nullopt, stream); },
                          {"C [", "overlaps B [", "in 32 bytes"});
  // A and B may share memory (both are only read): the call is accepted and equals the sequential result.
  DeviceMatrix ab(1024, 256, 8), c_ok(1024, 768, 0);
  const TensorRef b_in_a{ab.ptr, 768, 256};
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, ab.ref(), b_in_a, c_ok.ref());
  EXPECT_EQ(p.n, 768);
  test::Stream s;
  ctx.gemm_all_reduce(ab.ref(), b_in_a, c_ok.ref(), default_plan(Mode::kTileSignal, p, ctx.hardware(), 16), s);
  ctx.synchronize(s);
  DeviceMatrix c_ref(1024, 768, 0);
  ctx.gemm_all_reduce(ab.ref(), b_in_a, c_ref.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), s);
  ctx.synchronize(s);
  EXPECT_LT(rel_error(c_ok.read(), c_ref.read()), kTolerance);
}

TEST_F(ContextFaultsTest, BadPointersSizesAndDtypesNameTheTensor) {
  ContextOptions options;
  options.world = World::loopback(4);
  Context ctx(options);
  cudaStream_t stream = nullptr;
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(1024, 768, 0);
  auto call = [&](TensorRef x, TensorRef y, TensorRef z) { ctx.gemm_all_reduce(x, y, z, std::nullopt, stream); };
  // Null.
  TensorRef null_b = b.ref();
  null_b.ptr = nullptr;
  expect_error_naming_all([&] { call(a.ref(), null_b, c.ref()); }, {"gemm_all_reduce: B is a null pointer"});
  // Pinned host memory and pageable host memory.
  void* pinned = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMallocHost(&pinned, 1024 * 768 * 2));
  expect_error_naming_all(
      [&] {
        call(a.ref(), b.ref(), TensorRef{pinned, 1024, 768});
      },
      {"C pointer", "is not device memory", "pinned host"});
  cudaFreeHost(pinned);
  std::vector<uint16_t> pageable(1024 * 256 + 8);
  void* host_aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(pageable.data()) + 15) / 16 * 16);
  expect_error_naming_all(
      [&] {
        call(TensorRef{host_aligned, 1024, 256}, b.ref(), c.ref());
      },
      {"A pointer", "is not device memory", "unregistered host"});
  // Freed device memory (a dangling pointer).
  void* freed = nullptr;
  ASSERT_EQ(cudaSuccess, cudaMalloc(&freed, 1024 * 768 * 2));
  ASSERT_EQ(cudaSuccess, cudaFree(freed));
  expect_error_naming_all([&] { call(a.ref(), b.ref(), TensorRef{freed, 1024, 768}); }, {"C pointer"});
  // A shape larger than the buffer: C claims 4096 rows of a 1024-row allocation (far past any rounding of it).
  expect_error_naming_all(
      [&] {
        call(a.ref(), b.ref(), TensorRef{c.ptr, 4096, 768});
      },
      {"C needs 6291456 bytes", "bytes left there"});
  // Zero, negative, over int32.
  expect_error_naming_all([&] { call(TensorRef{a.ptr, 0, 256}, b.ref(), c.ref()); }, {"A has shape 0 x 256"});
  expect_error_naming_all([&] { call(a.ref(), TensorRef{b.ptr, -768, 256}, c.ref()); }, {"B has shape -768 x 256"});
  expect_error_naming_all(
      [&] {
        call(a.ref(), b.ref(), TensorRef{c.ptr, int64_t{1} << 31, 768});
      },
      {"C has shape 2147483648 x 768", "32-bit"});
  expect_error_naming_all(
      [&] {
        call(a.ref(), b.ref(), TensorRef{c.ptr, 1024, int64_t{1} << 40});
      },
      {"C has shape 1024 x 1099511627776"});
  // Mismatched dtypes.
  TensorRef b16 = b.ref();
  b16.dtype = DType::kFP16;
  expect_error_naming_all([&] { call(a.ref(), b16, c.ref()); }, {"B dtype fp16 differs from A's dtype bf16"});
  // A plan made for another problem: its tile groups cover 2048 rows, this call has 1024.
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  Problem other = p;
  other.m = 2048;
  const Plan foreign = default_plan(Mode::kTileSignal, other, ctx.hardware(), 16);
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a.ref(), b.ref(), c.ref(), foreign, stream); },
                          {"plan field \"tile_groups\" sums to 48", "the problem has 24 tiles"});
  Plan decomposed = default_plan(Mode::kDecomposed, p, ctx.hardware(), 16);
  decomposed.chunks = 3;
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a.ref(), b.ref(), c.ref(), decomposed, stream); }, {"chunks", "3"});
  // Nothing was enqueued by the refused calls: a good call still runs and is correct.
  test::Stream s;
  const auto seq = sequential(ctx, Op::kGemmAllReduce, a, b, c, s);
  c.poison(s);
  ctx.gemm_all_reduce(a.ref(), b.ref(), c.ref(), default_plan(Mode::kTma, p, ctx.hardware(), 16), s);
  ctx.synchronize(s);
  EXPECT_LT(rel_error(c.read(), seq), kTolerance);
}

TEST_F(ContextFaults2GpuTest, PointerOnAnotherDeviceIsRefused) {
  ContextOptions options;
  options.world = World::loopback(2);
  options.device = 0;
  Context ctx(options);
  ASSERT_EQ(cudaSuccess, cudaSetDevice(1));
  DeviceMatrix b_on_1(768, 256, 2);
  ASSERT_EQ(cudaSuccess, cudaSetDevice(0));
  DeviceMatrix a(1024, 256, 1), c(1024, 768, 0);
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a.ref(), b_on_1.ref(), c.ref(), std::nullopt, nullptr); },
                          {"B pointer", "is on device 1, the context's device is 0"});
}

// wait_timeout_ms = 0.001 (1 us, the smallest the waits honour is 1 ns): most overlapped calls give up. Each call
// either completes with the sequential result or ends in an ovl::Error saying it timed out; never a hang, never a
// wrong result without an error. Then a sequential call and a decomposed one (no device-side waits) are correct.
TEST_F(ContextFaultsTest, TinyWaitTimeoutIsAnErrorOrACorrectResult) {
  for (Op op : {Op::kGemmReduceScatter, Op::kGemmAllReduce, Op::kAllGatherGemm}) {
    ContextOptions options;
    options.world = World::loopback(2);
    options.wait_timeout_ms = 0.001;
    Context ctx(options);
    const bool ag = op == Op::kAllGatherGemm;
    const int64_t m = 2048, n = 1024, k = 512;
    DeviceMatrix a(ag ? m / 2 : m, k, 11), b(n, k, 12), c(op == Op::kGemmReduceScatter ? m / 2 : m, n, 0);
    test::Stream stream;
    const auto seq = sequential(ctx, op, a, b, c, stream);
    const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
    int timeouts = 0, correct = 0;
    for (const Plan& plan : runnable_plans(ctx, p)) {
      SCOPED_TRACE(p.name() + " " + plan.summary());
      for (int i = 0; i < 3; ++i) {
        c.poison(stream);
        run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
        try {
          ctx.synchronize(stream);
          EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "completed without an error";
          ++correct;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("timed out after 0.001 ms"), std::string::npos) << e.what();
          ++timeouts;
        }
      }
    }
    EXPECT_GT(correct + timeouts, 0);
    RecordProperty(std::string(to_string(op)) + "_timeouts", timeouts);
    for (Mode mode : {Mode::kSequential, Mode::kDecomposed}) {
      c.poison(stream);
      run_op(ctx, op, a.ref(), b.ref(), c.ref(), default_plan(mode, p, ctx.hardware(), 16), stream);
      EXPECT_NO_THROW(ctx.synchronize(stream));
      EXPECT_LT(rel_error(c.read(), seq), kTolerance) << to_string(mode) << " after the timeouts";
    }
  }
}

// release_caches() from a second thread while the first enqueues and checks calls of three shapes in every mode:
// the release waits for the call being enqueued (the Context's lock) and for the device, so no call runs on freed
// buffers, and every call's result equals its sequential result.
TEST_F(ContextFaultsTest, ReleaseCachesFromAnotherThreadWaitsForTheCall) {
  ContextOptions options;
  options.world = World::loopback(4);
  Context ctx(options);
  test::Stream stream;
  struct Case {
    std::unique_ptr<DeviceMatrix> a, b, c;
    std::vector<uint16_t> seq;
    std::vector<Plan> plans;
  };
  std::vector<Case> cases;
  for (int64_t m : {512, 1024, 1536}) {
    Case x;
    x.a = std::make_unique<DeviceMatrix>(m, 256, uint64_t(m));
    x.b = std::make_unique<DeviceMatrix>(768, 256, uint64_t(m) + 1);
    x.c = std::make_unique<DeviceMatrix>(m / 4, 768, 0);
    x.seq = sequential(ctx, Op::kGemmReduceScatter, *x.a, *x.b, *x.c, stream);
    x.plans = runnable_plans(ctx, ctx.problem_for(Op::kGemmReduceScatter, x.a->ref(), x.b->ref(), x.c->ref()));
    cases.push_back(std::move(x));
  }
  std::atomic<bool> done{false};
  std::atomic<int> releases{0};
  std::thread releaser([&] {
    while (!done.load()) {
      ctx.release_caches();
      releases.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  int calls = 0;
  for (int round = 0; round < 4; ++round) {
    for (Case& x : cases) {
      for (const Plan& plan : x.plans) {
        x.c->poison(stream);
        ctx.gemm_reduce_scatter(x.a->ref(), x.b->ref(), x.c->ref(), plan, stream);
        ctx.synchronize(stream);
        EXPECT_LT(rel_error(x.c->read(), x.seq), kTolerance) << plan.summary();
        ++calls;
      }
    }
  }
  done.store(true);
  releaser.join();
  EXPECT_GT(releases.load(), 0);
  RecordProperty("calls", calls);
  RecordProperty("releases", releases.load());
}

// Calls on two streams with no host sync between them (they share the Context's counters and buffers: each call
// waits for the previous one), then from two threads with a stream each: every output equals its sequential result.
TEST_F(ContextFaultsTest, TwoStreamsAndTwoThreadsOnOneContext) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context ctx(options);
  const int64_t m = 2048, n = 1024, k = 512;
  DeviceMatrix a(m, k, 21), b0(n, k, 22), b1(n, k, 23);
  test::Stream s0, s1;
  const DeviceMatrix like(m / 2, n, 0);
  const auto seq0 = sequential(ctx, Op::kGemmReduceScatter, a, b0, like, s0);
  const auto seq1 = sequential(ctx, Op::kGemmReduceScatter, a, b1, like, s0);
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b0.ref(), like.ref());
  for (const Plan& plan : runnable_plans(ctx, p)) {
    SCOPED_TRACE(plan.summary());
    std::vector<std::unique_ptr<DeviceMatrix>> out;
    for (int i = 0; i < 6; ++i) out.push_back(std::make_unique<DeviceMatrix>(m / 2, n, 0));
    for (int i = 0; i < 6; ++i) {
      cudaStream_t s = i % 2 ? s1.get() : s0.get();
      out[size_t(i)]->poison(s);
      ctx.gemm_reduce_scatter(a.ref(), (i % 3 ? b1 : b0).ref(), out[size_t(i)]->ref(), plan, s);
    }
    ctx.synchronize(s0);
    ctx.synchronize(s1);
    for (int i = 0; i < 6; ++i) EXPECT_LT(rel_error(out[size_t(i)]->read(), i % 3 ? seq1 : seq0), kTolerance) << i;
  }
  std::atomic<int> wrong{0}, errors{0};
  auto worker = [&](int t) {
    test::Stream s;
    DeviceMatrix out(m / 2, n, 0);
    const std::vector<Plan> plans = runnable_plans(ctx, p);
    for (int i = 0; i < 8; ++i) {
      const Plan& plan = plans[size_t(i + t) % plans.size()];
      try {
        out.poison(s);
        ctx.gemm_reduce_scatter(a.ref(), (t ? b1 : b0).ref(), out.ref(), plan, s);
        ctx.synchronize(s);
        if (rel_error(out.read(), t ? seq1 : seq0) >= kTolerance) wrong.fetch_add(1);
      } catch (const Error&) {
        errors.fetch_add(1);
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

// Two Contexts on one device, each from its own thread, each checking its results. Their persistent kernels compete
// for SMs; a wait may then time out (counted, reported as an ovl::Error), but no result may be wrong.
TEST_F(ContextFaultsTest, TwoContextsOnOneDevice) {
  std::atomic<int> wrong{0}, timeouts{0};
  auto worker = [&](int t) {
    ContextOptions options;
    options.world = World::loopback(2 + 2 * t);
    options.wait_timeout_ms = 2000;
    Context ctx(options);
    const int64_t m = 2048, n = 1024, k = 512;
    DeviceMatrix a(m, k, 31 + uint64_t(t)), b(n, k, 33 + uint64_t(t));
    const DeviceMatrix like(m / ctx.world_size(), n, 0);
    test::Stream s;
    const auto seq = sequential(ctx, Op::kGemmReduceScatter, a, b, like, s);
    DeviceMatrix out(m / ctx.world_size(), n, 0);
    const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), out.ref());
    const std::vector<Plan> plans = runnable_plans(ctx, p);
    for (int i = 0; i < 10; ++i) {
      out.poison(s);
      ctx.gemm_reduce_scatter(a.ref(), b.ref(), out.ref(), plans[size_t(i) % plans.size()], s);
      try {
        ctx.synchronize(s);
        if (rel_error(out.read(), seq) >= kTolerance) wrong.fetch_add(1);
      } catch (const Error& e) {
        if (std::string(e.what()).find("timed out") == std::string::npos) ADD_FAILURE() << e.what();
        timeouts.fetch_add(1);
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(wrong.load(), 0);
  RecordProperty("timeouts", timeouts.load());
}

// Holds the legacy default stream: one thread spins until the host sets *release (or 10 s pass; *timed_out = 1).
__global__ void hold_legacy_stream(const volatile int* release, int* timed_out) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*release == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 10'000'000'000ull) {
      *timed_out = 1;
      return;
    }
  }
}

// The set-up transfers (copy_now, fill_now: range tables, counters, error records, peer buffers) never use the legacy
// default stream: with that stream held by a kernel that waits for the host, they still land and return. (cudaMemcpy
// and cudaMemset would wait behind it, or run after kernels enqueued later on ovl's non-blocking streams.)
TEST_F(ContextFaultsTest, SetUpTransfersNeverWaitForTheLegacyStream) {
  int* host = nullptr;  // [0]: release, [1]: timed out
  ASSERT_EQ(cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped), cudaSuccess);
  host[0] = host[1] = 0;
  int* dev_host = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&dev_host, host, 0), cudaSuccess);
  const size_t bytes = size_t(3) << 20;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, bytes), cudaSuccess);
  std::vector<unsigned char> up(bytes), down(bytes, 0);
  for (size_t i = 0; i < bytes; ++i) up[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
  hold_legacy_stream<<<1, 1, 0, cudaStreamLegacy>>>(dev_host, dev_host + 1);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  fill_now(buf, 0x5A, bytes);
  copy_now(down.data(), buf, bytes, cudaMemcpyDeviceToHost);
  const bool filled = std::all_of(down.begin(), down.end(), [](unsigned char c) { return c == 0x5A; });
  copy_now(buf, up.data(), bytes, cudaMemcpyHostToDevice);
  copy_now(down.data(), buf, bytes, cudaMemcpyDeviceToHost);
  const bool copied = down == up;
  const bool held = *static_cast<volatile int*>(host + 1) == 0;  // still spinning: nothing above waited for it
  *static_cast<volatile int*>(host) = 1;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(held) << "a set-up transfer waited for the legacy stream (the holder timed out first)";
  EXPECT_EQ(host[1], 0);
  EXPECT_TRUE(filled);
  EXPECT_TRUE(copied);
  (void)cudaFree(buf);
  (void)cudaFreeHost(host);
}

// Device memory in use (cudaMemGetInfo) and the process's resident memory, in MiB.
double device_used_mib() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return double(total - free) / double(1 << 20);
}
double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1 << 20);
}

// A Context holds device and host memory only while it lives: Contexts made, used (one call of one mode, or a call
// without a plan: measured tuning) and destroyed one after another leave the device and the process where they
// started, after two warm-up Contexts have paid the one-off costs (modules, cuBLAS's library state, the green
// contexts' first partition). Bound: 2 MiB per Context on average, device and host (a leak of one partition, one
// cuBLAS handle or one shape's buffers is several MiB).
class ContextLifetimeTest : public test::HopperTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ContextLifetimeTest, DestroyedContextsHoldNoMemory) {
  const std::string what = GetParam();
  const int64_t m = 1024, n = 1024, k = 512;
  DeviceMatrix a(m, k, 41), b(n, k, 43);
  test::Stream s;
  auto one_context = [&] {
    ContextOptions options;
    options.world = World::loopback(4);
    options.loopback_share = LoopbackShare::kWholeWorld;
    Context ctx(options);
    DeviceMatrix out(m / 4, n, 0);
    const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), out.ref());
    std::optional<Plan> plan;
    if (what != "auto") {
      for (const Plan& candidate : runnable_plans(ctx, p))
        if (to_string(candidate.mode) == what) plan = candidate;
      ASSERT_TRUE(plan.has_value()) << "no runnable plan of mode " << what;
    }
    for (int i = 0; i < 2; ++i) ctx.gemm_reduce_scatter(a.ref(), b.ref(), out.ref(), plan, s);
    ctx.synchronize(s);
  };
  for (int i = 0; i < 2; ++i) one_context();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double device0 = device_used_mib(), host0 = rss_mib();
  constexpr int kContexts = 12;
  for (int i = 0; i < kContexts; ++i) one_context();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const double device_growth = device_used_mib() - device0, host_growth = rss_mib() - host0;
  std::printf("%s: %d Contexts: device %+.1f MiB, host %+.1f MiB\n", what.c_str(), kContexts, device_growth,
              host_growth);
  RecordProperty("device_growth_mib", std::to_string(device_growth));
  RecordProperty("host_growth_mib", std::to_string(host_growth));
  EXPECT_LT(device_growth, 2.0 * kContexts) << what;
  EXPECT_LT(host_growth, 2.0 * kContexts) << what;
}

INSTANTIATE_TEST_SUITE_P(EveryMode, ContextLifetimeTest,
                         ::testing::Values("sequential", "decomposed", "tile-signal", "green-context", "tma", "auto"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// One Context through many shapes: release_caches() gives back what the shapes held (the device's use after each
// release stays within 8 MiB of the use after the first).
TEST_F(ContextFaultsTest, ReleaseCachesGivesBackEveryShape) {
  ContextOptions options;
  options.world = World::loopback(4);
  Context ctx(options);
  test::Stream s;
  std::vector<double> after;
  for (int round = 0; round < 4; ++round) {
    for (int64_t m : {1024, 2048, 3072}) {
      const int64_t n = 1024 + 256 * round, k = 512;
      DeviceMatrix a(m, k, 51 + uint64_t(m)), b(n, k, 53), out(m / 4, n, 0);
      const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), out.ref());
      for (const Plan& plan : runnable_plans(ctx, p)) ctx.gemm_reduce_scatter(a.ref(), b.ref(), out.ref(), plan, s);
      ctx.synchronize(s);
    }
    ctx.release_caches();
    after.push_back(device_used_mib());
  }
  for (size_t i = 1; i < after.size(); ++i) EXPECT_LT(after[i] - after[0], 8.0) << "after release " << i;
}

// The device-memory owner every folder uses: an allocation the device cannot hold is an ovl::Error naming the size
// and the caller's hint (the Context passes what frees memory), not sticky (the next CUDA call succeeds), and a
// buffer that could be made still works after it.
TEST_F(ContextFaultsTest, DeviceBufferFailureNamesTheSizeAndTheHint) {
  const size_t too_much = size_t(1) << 50;  // 1 PiB
  expect_error_naming_all([&] { DeviceBuffer b(too_much, "a hint"); },
                          {"could not allocate 1125899906842624 bytes", "1048576.00 GiB", "a hint"});
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  DeviceBuffer ok(4096);
  ASSERT_NE(ok.get(), nullptr);
  EXPECT_EQ(cudaMemset(ok.get(), 0x5A, ok.bytes()), cudaSuccess);
  DeviceBuffer moved = std::move(ok);
  EXPECT_EQ(ok.get(), nullptr);
  EXPECT_EQ(moved.bytes(), 4096u);
  unsigned char back = 0;
  EXPECT_EQ(cudaMemcpy(&back, moved.as<unsigned char>() + 4095, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, 0x5A);
  EXPECT_EQ(DeviceBuffer(0).get(), nullptr);
}

// A real World of 2 GPUs: both ranks run one tma call together (the symmetric buffers are made collectively), then
// rank 1 stops before the next call. Rank 0's collective waits for rank 1 and gives up with an ovl::Error naming it.
// Then both ranks run a sequential call (NCCL), checked against the float64-free reference: each rank's sequential
// result from before the fault.
TEST_F(ContextFaults2GpuTest, PeerThatNeverArrivesTimesOutNamingIt) {
  std::vector<World> worlds = World::threads({0, 1});
  std::barrier sync(2);
  run_per_rank(worlds, [&](World& world) {
    ContextOptions options;
    options.world = world;
    options.wait_timeout_ms = 500;
    Context ctx(options);
    const int r = ctx.rank();
    const int64_t m = 1024, n = 768, k = 256;
    DeviceMatrix a(m, k, 40 + uint64_t(r)), b(n, k, 50 + uint64_t(r)), c(m / 2, n, 0);
    test::Stream s;
    const auto seq = sequential(ctx, Op::kGemmReduceScatter, a, b, c, s);
    const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
    const Plan tma = default_plan(Mode::kTma, p, ctx.hardware(), 16);
    ASSERT_EQ(ctx.can_run(p, tma), "");
    ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), tma, s);
    ctx.synchronize(s);
    EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "rank " << r << " before the fault";
    sync.arrive_and_wait();
    if (r == 0) {
      ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), tma, s);
      expect_error_naming_all([&] { ctx.synchronize(s); },
                              {"collective wait timed out: rank 0 timed out waiting for", "rank 1"});
    }
    sync.arrive_and_wait();
    c.poison(s);
    ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), s);
    EXPECT_NO_THROW(ctx.synchronize(s));
    EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "rank " << r << " after the fault";
  });
}

}  // namespace
}  // namespace ovl
