// Tests of the Hopper GEMM that signals finished tiles (ovl/kernels/gemm.hpp).
//
// Tolerance: inputs are bf16 (or fp16), products are summed in fp32 and the output is rounded to bf16 (8 bits of
// mantissa, relative rounding error up to 2^-9 = 0.002 per element). Against a float64 (or cuBLAS fp32) reference
// the relative error norm ||out - ref|| / ||ref|| of a correct kernel is therefore ~1e-3; a wrong index, a missed
// k-block or an unwritten element gives O(1). 1e-2 separates the two with margin. Every output is poisoned with NaN
// (0xFFFF) before the run, so an unwritten element fails the NaN check.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpu/gpu_test.hpp"
#include "ovl/core/sm_partition.hpp"
#include "ovl/error.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/kernels/wait.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl::kernels {
namespace {

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call
#define CUBLAS_OK(call) ASSERT_EQ(CUBLAS_STATUS_SUCCESS, (call)) << #call

uint16_t float_to_half_bits(float f, DType dtype) {
  if (dtype == DType::kBF16) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even (inputs are finite)
    return uint16_t(u >> 16);
  }
  // fp16, round to nearest even, for |f| in the normal range (our inputs are in [-1, 1] and not tiny).
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int exp = int((u >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = u & 0x7FFFFF;
  if (exp <= 0) return uint16_t(sign);
  uint32_t h = (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

double half_bits_to_double(uint16_t h, DType dtype) {
  if (dtype == DType::kBF16) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(double(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(double(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

// Random inputs in [-1, 1], away from 0 so that no input is zero.
std::vector<uint16_t> random_matrix(size_t count, uint32_t seed, DType dtype) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  std::vector<uint16_t> out(count);
  for (auto& x : out) x = float_to_half_bits((rng() & 1) ? mag(rng) : -mag(rng), dtype);
  return out;
}

using test::DeviceArray;

struct Problem {
  int m, n, k;
  DType dtype = DType::kBF16;
  BLayout b_layout = BLayout::kNxK;
};

std::string describe(const Problem& p) {
  return std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k) +
         (p.b_layout == BLayout::kKxN ? "/nn" : "/nt") + (p.dtype == DType::kBF16 ? "/bf16" : "/fp16");
}

// Inputs of one problem on host and device.
struct Inputs {
  Problem problem;
  std::vector<uint16_t> a, b;  // A: M x K; B: K x N or N x K, row-major
  DeviceArray<uint16_t> a_dev, b_dev;
  Inputs(const Problem& p, uint32_t seed)
      : problem(p),
        a(random_matrix(size_t(p.m) * p.k, seed, p.dtype)),
        b(random_matrix(size_t(p.k) * p.n, seed + 1, p.dtype)),
        a_dev(a.size()),
        b_dev(b.size()) {
    if (a_dev.get()) cudaMemcpy(a_dev.get(), a.data(), a_dev.bytes(), cudaMemcpyHostToDevice);
    if (b_dev.get()) cudaMemcpy(b_dev.get(), b.data(), b_dev.bytes(), cudaMemcpyHostToDevice);
    (void)test::finish_setup();  // checked by run()'s own finish_setup, before the GEMM
  }
  double b_at(int kk, int nn) const {
    const size_t i = problem.b_layout == BLayout::kKxN ? size_t(kk) * problem.n + nn : size_t(nn) * problem.k + kk;
    return half_bits_to_double(b[i], problem.dtype);
  }
};

// float64 reference, row-major M x N.
std::vector<double> cpu_reference(const Inputs& in) {
  const Problem& p = in.problem;
  std::vector<double> a(in.a.size()), bt(size_t(p.n) * p.k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = half_bits_to_double(in.a[i], p.dtype);
  for (int nn = 0; nn < p.n; ++nn) {
    for (int kk = 0; kk < p.k; ++kk) bt[size_t(nn) * p.k + kk] = in.b_at(kk, nn);
  }
  std::vector<double> ref(size_t(p.m) * p.n);
  for (int mm = 0; mm < p.m; ++mm) {
    for (int nn = 0; nn < p.n; ++nn) {
      double s = 0;
      const double* ar = &a[size_t(mm) * p.k];
      const double* br = &bt[size_t(nn) * p.k];
      for (int kk = 0; kk < p.k; ++kk) s += ar[kk] * br[kk];
      ref[size_t(mm) * p.n + nn] = s;
    }
  }
  return ref;
}

// cuBLAS reference (fp32 compute, fp32 output), row-major M x N. Row-major C = A B is column-major C^T = B^T A^T.
void cublas_reference(const Inputs& in, std::vector<double>& ref) {
  const Problem& p = in.problem;
  DeviceArray<float> c(size_t(p.m) * p.n);
  cublasHandle_t handle;
  CUBLAS_OK(cublasCreate(&handle));
  const float alpha = 1.f, beta = 0.f;
  const cudaDataType t = p.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const bool kxn = p.b_layout == BLayout::kKxN;
  CUBLAS_OK(cublasGemmEx(handle, kxn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, p.n, p.m, p.k, &alpha, in.b_dev.get(), t,
                         kxn ? p.n : p.k, in.a_dev.get(), t, p.k, &beta, c.get(), CUDA_R_32F, p.n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
  CUDA_OK(cudaDeviceSynchronize());
  CUBLAS_OK(cublasDestroy(handle));
  std::vector<float> host(c.count());
  CUDA_OK(cudaMemcpy(host.data(), c.get(), c.bytes(), cudaMemcpyDeviceToHost));
  ref.assign(host.begin(), host.end());
}

struct RunOptions {
  OutputLayout output_layout = OutputLayout::kRowMajor;
  TileOrder tile_order = TileOrder::kRowBand;
  int swizzle = 8;
  std::vector<int> explicit_order;  // host copy; uploaded by run()
  std::vector<int> tile_groups;
  bool timestamps = false;
  int sm_count = 132;
  GemmEpilogue epilogue = GemmEpilogue::kAuto;
  // Stream-K plan (off unless a test sets one; the tests that compare bits across grids or epilogues rely on that:
  // stream-K changes the fp32 summation order).
  int stream_k_tiles = 0, stream_k_splits = 0, stream_k_ctas = 0;
  int half_tiles = 0;
  cudaStream_t stream = nullptr;  // null: a fresh stream on the whole device
  // What run() does not set up, from buffers the test owns (the wait tests: a poisoned A, wait counters).
  // adjust_arguments: the last changes to the arguments, before gemm_can_implement; after_launch: runs right after
  // the launch, while the GEMM may still be running (it releases the waits), before run() waits for the GEMM.
  std::function<void(GemmArguments&)> adjust_arguments;
  std::function<void()> after_launch;
};

constexpr GemmEpilogue kEpilogues[] = {GemmEpilogue::kTmaStore, GemmEpilogue::kTmaStoreSplit,
                                       GemmEpilogue::kTmaStoreDeferred};
const char* epilogue_name(GemmEpilogue e) {
  return e == GemmEpilogue::kTmaStoreSplit      ? "/tma-store-split"
         : e == GemmEpilogue::kTmaStoreDeferred ? "/tma-store-deferred"
                                                : "/tma-store";
}

struct RunResult {
  std::vector<uint16_t> d;  // raw output buffer (row-major M x N, or tile-major slots)
  std::vector<unsigned int> counters;
  std::vector<unsigned long long> timestamps;
  std::vector<unsigned long long> cta_timestamps;  // with timestamps: one per CTA (sm_count entries; 0: no CTA)
};

// The arguments of problem p under opt (no buffers yet: can_implement and the plan functions look at the values).
GemmArguments arguments_of(const Problem& p, const RunOptions& opt) {
  GemmArguments args;
  args.m = p.m;
  args.n = p.n;
  args.k = p.k;
  args.dtype = p.dtype;
  args.b_layout = p.b_layout;
  args.output_layout = opt.output_layout;
  args.tile_order = opt.tile_order;
  args.swizzle = opt.swizzle;
  args.tile_groups = opt.tile_groups;
  args.sm_count = opt.sm_count;
  args.epilogue = opt.epilogue;
  args.stream_k_tiles = opt.stream_k_tiles;
  args.stream_k_splits = opt.stream_k_splits;
  args.stream_k_ctas = opt.stream_k_ctas;
  args.half_tiles = opt.half_tiles;
  return args;
}

void run(const Inputs& in, const RunOptions& opt, RunResult& out) {
  const Problem& p = in.problem;
  GemmArguments args = arguments_of(p, opt);
  args.a = in.a_dev.get();
  args.b = in.b_dev.get();
  const int tiles = gemm_tile_count(args);

  DeviceArray<uint16_t> d(gemm_output_bytes(args) / 2);
  DeviceArray<int> order(opt.explicit_order.size());
  DeviceArray<unsigned int> counters(opt.tile_groups.size());
  DeviceArray<unsigned long long> stamps(opt.timestamps ? tiles : 0);
  DeviceArray<unsigned long long> cta_stamps(opt.timestamps ? opt.sm_count : 0);
  CUDA_OK(cudaMemset(d.get(), 0xFF, d.bytes()));  // NaN in bf16 and fp16
  args.d = d.get();
  if (!opt.explicit_order.empty()) {
    CUDA_OK(cudaMemcpy(order.get(), opt.explicit_order.data(), order.bytes(), cudaMemcpyHostToDevice));
    args.explicit_order = order.get();
  }
  if (!opt.tile_groups.empty()) {
    CUDA_OK(cudaMemset(counters.get(), 0, counters.bytes()));
    args.group_counters = counters.get();
  }
  if (opt.timestamps) {
    CUDA_OK(cudaMemset(stamps.get(), 0, stamps.bytes()));
    args.tile_timestamps = stamps.get();
    CUDA_OK(cudaMemset(cta_stamps.get(), 0, cta_stamps.bytes()));
    args.cta_timestamps = cta_stamps.get();
  }
  if (opt.adjust_arguments) opt.adjust_arguments(args);
  ASSERT_EQ("", gemm_can_implement(args));
  DeviceArray<uint8_t> workspace(gemm_workspace_bytes(args));
  // Garbage, not zeros: the arrival counters must count a word no launch of this process wrote as no arrival.
  if (workspace.bytes() > 0) CUDA_OK(cudaMemset(workspace.get(), 0xA5, workspace.bytes()));
  std::optional<test::Stream> own;  // a fresh stream on the whole device unless opt names one
  if (opt.stream == nullptr) own.emplace();
  const cudaStream_t stream = opt.stream != nullptr ? opt.stream : own->get();
  CUDA_OK(test::finish_setup());  // the poison, memsets and uploads above, before the GEMM
  ASSERT_NO_THROW(gemm_run(args, workspace.get(), stream));
  if (opt.after_launch) opt.after_launch();
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaGetLastError());

  out.d.resize(d.count());
  CUDA_OK(cudaMemcpy(out.d.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  out.counters.resize(counters.count());
  if (counters.count())
    CUDA_OK(cudaMemcpy(out.counters.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
  out.timestamps.resize(stamps.count());
  if (stamps.count()) CUDA_OK(cudaMemcpy(out.timestamps.data(), stamps.get(), stamps.bytes(), cudaMemcpyDeviceToHost));
  out.cta_timestamps.resize(cta_stamps.count());
  if (cta_stamps.count()) {
    CUDA_OK(cudaMemcpy(out.cta_timestamps.data(), cta_stamps.get(), cta_stamps.bytes(), cudaMemcpyDeviceToHost));
  }
}

// Element (r, c) of the output buffer.
size_t output_index(const Problem& p, OutputLayout layout, int r, int c) {
  if (layout == OutputLayout::kRowMajor) return size_t(r) * p.n + c;
  const GemmTileShape t = gemm_tile_shape();
  const int tiles_n = (p.n + t.n - 1) / t.n;
  const size_t tile = size_t(r / t.m) * tiles_n + c / t.n;
  return tile * t.m * t.n + size_t(r % t.m) * t.n + c % t.n;
}

// Relative error norm over M x N; counts NaN (unwritten or broken) elements.
void expect_close(const Problem& p, OutputLayout layout, const std::vector<uint16_t>& d,
                  const std::vector<double>& ref, const std::string& what) {
  // A run that failed an assertion leaves no output: say so instead of reading past the end.
  ASSERT_GT(d.size(), output_index(p, layout, p.m - 1, p.n - 1)) << what << ": no output (the run failed)";
  double diff2 = 0, ref2 = 0;
  size_t nans = 0;
  for (int r = 0; r < p.m; ++r) {
    for (int c = 0; c < p.n; ++c) {
      const double v = half_bits_to_double(d[output_index(p, layout, r, c)], p.dtype);
      const double x = ref[size_t(r) * p.n + c];
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      diff2 += (v - x) * (v - x);
      ref2 += x * x;
    }
  }
  EXPECT_EQ(nans, 0u) << what << ": NaN (unwritten) elements";
  const double rel = std::sqrt(diff2 / ref2);
  EXPECT_LT(rel, 1e-2) << what << ": relative error norm " << rel;
  std::printf("  %-40s relative error norm %.3g\n", what.c_str(), rel);
  if (layout == OutputLayout::kTileMajor) {
    // The slot padding outside M x N is written with zeros.
    size_t bad = 0;
    for (size_t i = 0; i < d.size(); ++i) {
      if (std::isnan(half_bits_to_double(d[i], p.dtype))) ++bad;
    }
    EXPECT_EQ(bad, 0u) << what << ": NaN in tile-major slots (padding not written)";
  }
}

// The visiting order of the tile orders, computed on the host (position -> tile id).
std::vector<int> host_order(const Problem& p, const RunOptions& opt) {
  const GemmTileShape t = gemm_tile_shape();
  const int tiles_m = (p.m + t.m - 1) / t.m, tiles_n = (p.n + t.n - 1) / t.n;
  std::vector<int> order(size_t(tiles_m) * tiles_n);
  if (opt.tile_order == TileOrder::kExplicit) return opt.explicit_order;
  if (opt.tile_order == TileOrder::kRowBand) {
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  size_t pos = 0;
  for (int band = 0; band * opt.swizzle < tiles_m; ++band) {
    const int rows = std::min(opt.swizzle, tiles_m - band * opt.swizzle);
    for (int c = 0; c < tiles_n; ++c) {
      for (int r = 0; r < rows; ++r) order[pos++] = (band * opt.swizzle + r) * tiles_n + c;
    }
  }
  return order;
}

// Signal groups for a tail plan over the last `last` of `tiles` tiles: the whole tiles, then the tail (one group when
// the tail is every tile), so a group's counter depends on the tail's pieces or halves signalling right.
std::vector<int> groups_with_tail(int tiles, int last) {
  return last == tiles || last == 0 ? std::vector<int>{tiles} : std::vector<int>{tiles - last, last};
}

// Every group counter ended at its group's size, and every tile has a timestamp when opt asked for them.
void expect_signalled(const RunOptions& opt, const RunResult& r, const std::string& what) {
  ASSERT_EQ(r.counters.size(), opt.tile_groups.size()) << what;
  for (size_t g = 0; g < opt.tile_groups.size(); ++g) {
    EXPECT_EQ(r.counters[g], unsigned(opt.tile_groups[g])) << what << ": counter " << g;
  }
  for (size_t t = 0; t < r.timestamps.size(); ++t) EXPECT_NE(r.timestamps[t], 0u) << what << ": tile " << t;
}

// The same output buffer, bit for bit (a variant that must not change the arithmetic: another grid, epilogue,
// or partition).
void expect_same_bits(const std::vector<uint16_t>& want, const std::vector<uint16_t>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 2)) << what << ": bits differ";
}
void expect_same_bits(const RunResult& want, const RunResult& got, const std::string& what) {
  expect_same_bits(want.d, got.d, what);
}

// `opt` again with the epilogues that stage a unit during the CTA's next one (GemmEpilogue::kTmaStoreSplit: a tile's
// right half, a half tile's or a storeless stream-K piece's second phase empty; kTmaStoreDeferred: the whole unit,
// a storeless piece's phase empty): `want`'s bits, every tile signalled.
void expect_deferred_epilogues_same(const Inputs& in, const RunOptions& opt, const RunResult& want,
                                    const std::string& what) {
  for (GemmEpilogue e : {GemmEpilogue::kTmaStoreSplit, GemmEpilogue::kTmaStoreDeferred}) {
    RunOptions other = opt;
    other.epilogue = e;
    RunResult got;
    run(in, other, got);
    expect_signalled(other, got, what + epilogue_name(e));
    expect_same_bits(want, got, what + epilogue_name(e));
  }
}

class GemmTest : public test::HopperTest {};

// Small and odd shapes (edge tiles in M and N, K tails, M = 1, N and K below one box), both B layouts, both output
// layouts, every epilogue, against float64; the epilogues round the same way, so their bits must agree.
TEST_F(GemmTest, SmallShapesMatchCpuReference) {
  const int shapes[][3] = {{128, 256, 64}, {200, 264, 72}, {1000, 520, 136}, {1, 256, 64},
                           {1, 8, 8},      {33, 40, 24},   {130, 512, 200}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
      Inputs in(Problem{s[0], s[1], s[2], DType::kBF16, bl}, seed += 2);
      const std::vector<double> ref = cpu_reference(in);
      for (OutputLayout ol : {OutputLayout::kRowMajor, OutputLayout::kTileMajor}) {
        std::vector<uint16_t> first;
        for (GemmEpilogue e : kEpilogues) {
          RunOptions opt;
          opt.output_layout = ol;
          opt.sm_count = 5;
          opt.epilogue = e;
          RunResult r;
          run(in, opt, r);
          const std::string what = describe(in.problem) +
                                   (ol == OutputLayout::kRowMajor ? "/row-major" : "/tile-major") +
                                   epilogue_name(e);
          expect_close(in.problem, ol, r.d, ref, what);
          if (first.empty()) {
            first = r.d;
          } else {
            expect_same_bits(first, r.d, what);
          }
        }
      }
    }
  }
}

// fp16 with every epilogue, on a CTA per tile and on 3 CTAs (so the epilogues that stage a unit during the next one
// run that path in the fp16 instantiations too).
TEST_F(GemmTest, Fp16MatchesCpuReference) {
  for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
    Inputs in(Problem{200, 520, 136, DType::kFP16, bl}, 77);  // 2 x 3 tiles
    const std::vector<double> ref = cpu_reference(in);
    for (int sms : {132, 3}) {
      for (GemmEpilogue e : kEpilogues) {
        RunOptions opt;
        opt.epilogue = e;
        opt.sm_count = sms;
        RunResult r;
        run(in, opt, r);
        expect_close(in.problem, OutputLayout::kRowMajor, r.d, ref,
                     describe(in.problem) + " sms " + std::to_string(sms) + epilogue_name(e));
      }
    }
  }
}

// Large shapes against cuBLAS (fp32 compute).
TEST_F(GemmTest, LargeShapesMatchCublas) {
  const int shapes[][3] = {{4096, 4096, 4096}, {2048, 8192, 1024}, {1000, 3000, 2056}};
  uint32_t seed = 100;
  for (const auto& s : shapes) {
    for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
      Inputs in(Problem{s[0], s[1], s[2], DType::kBF16, bl}, seed += 2);
      std::vector<double> ref;
      cublas_reference(in, ref);
      RunOptions opt;
      opt.tile_order = TileOrder::kSwizzle;
      RunResult r;
      run(in, opt, r);
      expect_close(in.problem, OutputLayout::kRowMajor, r.d, ref, describe(in.problem) + " vs cuBLAS");
      // The deferred epilogue (what ovl::tune_gemm picks for most shapes) on many tiles per CTA: the same bits.
      opt.epilogue = GemmEpilogue::kTmaStoreDeferred;
      RunResult deferred;
      run(in, opt, deferred);
      expect_same_bits(r, deferred, describe(in.problem) + epilogue_name(opt.epilogue));
    }
  }
}

// All tile orders give the same bits; group counters end at their tile counts; timestamps are nonzero and increase
// along each CTA's visiting order (CTA b visits positions b, b + grid, ...).
TEST_F(GemmTest, TileOrdersSignalsAndTimestamps) {
  const Problem p{1000, 1800, 200, DType::kBF16, BLayout::kNxK};  // 8 x 8 = 64 tiles, edge tiles in M and N
  Inputs in(p, 9);
  const std::vector<double> ref = cpu_reference(in);
  const int tiles = 64;
  std::vector<int> permutation(tiles);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), std::mt19937(3));

  std::vector<uint16_t> first;
  for (TileOrder order : {TileOrder::kRowBand, TileOrder::kSwizzle, TileOrder::kExplicit}) {
    for (OutputLayout ol : {OutputLayout::kRowMajor, OutputLayout::kTileMajor}) {
      for (GemmEpilogue e : kEpilogues) {
        RunOptions opt;
        opt.epilogue = e;
        opt.tile_order = order;
        opt.swizzle = 3;  // a partial last band
        opt.output_layout = ol;
        if (order == TileOrder::kExplicit) opt.explicit_order = permutation;
        opt.tile_groups = {5, 11, 1, 47};
        opt.timestamps = true;
        opt.sm_count = 7;  // whole tiles (no stream-K): the per-CTA timestamp order below assumes them
        RunResult r;
        run(in, opt, r);
        const std::string what =
            "order " + std::to_string(int(order)) + " layout " + std::to_string(int(ol)) + epilogue_name(e);
        expect_close(p, ol, r.d, ref, what);
        if (ol == OutputLayout::kRowMajor) {
          if (first.empty()) {
            first = r.d;
          } else {
            expect_same_bits(first, r.d, what);
          }
        }
        expect_signalled(opt, r, what);  // and below: the stamps in each CTA's visiting order are monotone, after
                                         // the CTA's start stamp
        const std::vector<int> visit = host_order(p, opt);
        ASSERT_EQ(r.cta_timestamps.size(), size_t(opt.sm_count)) << what;
        for (int cta = 0; cta < opt.sm_count; ++cta) {
          unsigned long long last = r.cta_timestamps[cta];
          EXPECT_NE(last, 0u) << what << ": CTA " << cta << " has no start stamp";
          for (int pos = cta; pos < tiles; pos += opt.sm_count) {
            const unsigned long long t = r.timestamps[visit[pos]];
            EXPECT_NE(t, 0u) << what << ": tile " << visit[pos] << " has no timestamp";
            EXPECT_GE(t, last) << what << ": CTA " << cta << " position " << pos;
            last = t;
          }
        }
      }
    }
  }
}

// More groups than travel in the kernel's parameters: the position -> group map goes through the workspace.
TEST_F(GemmTest, ManyGroupsUseWorkspace) {
  const Problem p{4096, 8192, 64, DType::kBF16, BLayout::kKxN};  // 32 x 32 = 1024 tiles
  Inputs in(p, 21);
  RunOptions opt;
  opt.tile_order = TileOrder::kSwizzle;
  opt.tile_groups.assign(512, 2);
  GemmArguments probe;
  probe.tile_groups = opt.tile_groups;
  probe.m = p.m;
  probe.n = p.n;
  EXPECT_EQ(gemm_workspace_bytes(probe), 1024 * sizeof(int));
  RunResult r;
  run(in, opt, r);
  for (size_t g = 0; g < r.counters.size(); ++g) ASSERT_EQ(r.counters[g], 2u) << "counter " << g;
  std::vector<double> ref;
  cublas_reference(in, ref);
  expect_close(p, OutputLayout::kRowMajor, r.d, ref, "many groups");
}

// The grid size changes which CTA computes a tile, never the tile's arithmetic: bitwise identical results (with
// stream-K off; see StreamK* for what it changes), with the default epilogue and the deferred one.
TEST_F(GemmTest, SmCountsGiveIdenticalBits) {
  for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
    const Problem p{2000, 4096, 520, DType::kBF16, bl};
    Inputs in(p, 31);
    std::vector<uint16_t> first;
    for (int sms : {8, 64, 124, 132}) {
      for (GemmEpilogue e : {GemmEpilogue::kAuto, GemmEpilogue::kTmaStoreDeferred}) {
        RunOptions opt;
        opt.sm_count = sms;
        opt.epilogue = e;
        opt.tile_order = TileOrder::kSwizzle;
        opt.tile_groups = {100, 156};  // 16 x 16 tiles
        RunResult r;
        run(in, opt, r);
        const std::string what = describe(p) + " sms " + std::to_string(sms) + epilogue_name(e);
        ASSERT_EQ(r.counters.size(), 2u) << what;
        EXPECT_EQ(r.counters[0], 100u) << what;
        EXPECT_EQ(r.counters[1], 156u) << what;
        if (first.empty()) {
          first = r.d;
          std::vector<double> ref;
          cublas_reference(in, ref);
          expect_close(p, OutputLayout::kRowMajor, r.d, ref, what);
        } else {
          expect_same_bits(first, r.d, what);
        }
      }
    }
  }
}

// The same GEMM confined to green-context partitions of 8, 64 and 124 SMs (grid = the partition's SM count, the
// stream the partition's) gives the same bits as on the whole device: the result never depends on the grid.
TEST_F(GemmTest, GreenContextPartitionsGiveIdenticalBits) {
  const Problem p{1000, 2048, 776, DType::kBF16, BLayout::kNxK};
  Inputs in(p, 47);
  RunOptions whole;
  whole.tile_groups = {32, 32};  // 8 x 8 tiles
  RunResult reference;
  run(in, whole, reference);
  for (int sms : {8, 64, 124}) {
    std::unique_ptr<SmPartition> partition;
    try {
      partition = SmPartition::confine(0, sms);
    } catch (const Error& e) {
      GTEST_SKIP() << "no green contexts here: " << e.what();
    }
    ASSERT_EQ(partition->gemm_sms(), sms);
    RunOptions opt = whole;
    opt.sm_count = partition->gemm_sms();
    opt.stream = partition->gemm_stream();
    RunResult r;
    run(in, opt, r);
    EXPECT_EQ(r.counters, reference.counters) << "partition of " << sms << " SMs";
    expect_same_bits(reference, r, "partition of " + std::to_string(sms) + " SMs");
  }
}

// Stream-K plans forced onto small and odd shapes (K tails, edge tiles, pieces of 1 k-block, tiles cut into many
// pieces, every tile stream-K, more pieces than CTAs, both schedules, both B and output layouts): against float64;
// every group counter ends at its tile count and every tile has a timestamp; the same plan on a grid 5 CTAs larger
// gives the same bits (whichever piece is last sums the partials in piece order).
TEST_F(GemmTest, StreamKMatchesCpuReference) {
  struct Case {
    int m, n, k, sms, tiles, splits, ctas;
  };
  const Case cases[] = {
      // Contiguous schedule (splits 0).
      {1000, 1800, 200, 7, 8, 0, 7},   // 64 tiles, 4 k-blocks (last one partial); the last 8 tiles over 7 CTAs,
                                       // ranges of 4 or 5 iterations: pieces of 1 k-block
      {1000, 1800, 200, 7, 64, 0, 7},  // every tile stream-K
      {200, 264, 1032, 3, 4, 0, 3},    // 4 tiles, 17 k-blocks, over 3 CTAs
      {130, 512, 200, 8, 4, 0, 8},     // 4 tiles x 4 k-blocks over 8 CTAs: pieces of 2 k-blocks
      {640, 768, 512, 16, 15, 0, 16},  // 15 tiles, 8 k-blocks each, 16 CTAs: ranges of 7 or 8 across tile ends
      {256, 256, 1024, 5, 2, 0, 5},    // 2 tiles x 16 k-blocks over 5 CTAs: a tile in 3 pieces
      {128, 256, 2048, 8, 1, 0, 8},    // 1 tile x 32 k-blocks over 8 CTAs: 8 pieces
      {1000, 1800, 200, 16, 8, 0, 5},  // grid 16 > 5 CTAs: CTAs 5..15 take whole tiles only
      // Split schedule.
      {1000, 1800, 200, 7, 8, 2, 0},   // the last 8 of 64 tiles in 2 pieces (2 k-blocks each, the last partial)
      {1000, 1800, 200, 7, 64, 4, 0},  // every tile in 4 pieces of 1 k-block: 256 pieces over 7 CTAs
      {200, 264, 1032, 3, 4, 5, 0},    // 17 k-blocks in 5 pieces of 3 or 4
      {128, 256, 2048, 8, 1, 16, 0},   // 1 tile in 16 pieces over 8 CTAs
      {256, 512, 1024, 132, 4, 2, 0},  // every tile, fewer pieces (8) than SMs: a grid of 8
      {1000, 1800, 256, 8, 8, 4, 0},   // grid 8 = stream-K tiles: each CTA takes all 4 pieces of one tile
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
      Inputs in(Problem{c.m, c.n, c.k, DType::kBF16, bl}, seed += 2);
      const std::vector<double> ref = cpu_reference(in);
      for (OutputLayout ol : {OutputLayout::kRowMajor, OutputLayout::kTileMajor}) {
        RunOptions opt;
        opt.output_layout = ol;
        opt.sm_count = c.sms;
        opt.stream_k_tiles = c.tiles;
        opt.stream_k_splits = c.splits;
        opt.stream_k_ctas = c.ctas;
        opt.timestamps = true;
        const GemmArguments probe = arguments_of(in.problem, opt);
        const int tiles = gemm_tile_count(probe);
        opt.tile_groups = groups_with_tail(tiles, c.tiles);
        const GemmStreamKPlan plan = gemm_stream_k_plan(probe);
        const std::string what = describe(in.problem) + " sms " + std::to_string(c.sms) + " stream-K " +
                                 std::to_string(c.tiles) + " tiles, splits " + std::to_string(c.splits) + ", ctas " +
                                 std::to_string(c.ctas) + " (" + std::to_string(plan.max_pieces) + " pieces at most)" +
                                 (ol == OutputLayout::kRowMajor ? "/row-major" : "/tile-major");
        ASSERT_EQ(plan.tiles, c.tiles) << what;
        ASSERT_GE(plan.max_pieces, 2) << what << ": the case does not cut any tile";
        RunResult first, second;
        run(in, opt, first);
        expect_close(in.problem, ol, first.d, ref, what);
        expect_signalled(opt, first, what);
        // The same plan on a larger grid: other CTAs run the pieces, at other times, so another piece is likely
        // the last; the sum's order, and so the bits, must not change.
        RunOptions wider = opt;
        wider.sm_count = c.sms + 5;
        run(in, wider, second);
        expect_same_bits(first, second, what + " on " + std::to_string(wider.sm_count) + " SMs");
        expect_deferred_epilogues_same(in, opt, first, what);
      }
    }
  }
}

// Stream-K with fp16, an explicit (shuffled) tile order and signals: the pieces follow positions, not tile ids.
TEST_F(GemmTest, StreamKFp16ExplicitOrder) {
  const Problem p{1000, 1800, 520, DType::kFP16, BLayout::kKxN};  // 8 x 8 = 64 tiles, 9 k-blocks
  Inputs in(p, 71);
  const std::vector<double> ref = cpu_reference(in);
  std::vector<int> permutation(64);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), std::mt19937(5));
  for (int splits : {0, 3}) {
    RunOptions opt;
    opt.sm_count = 12;
    opt.tile_order = TileOrder::kExplicit;
    opt.explicit_order = permutation;
    opt.tile_groups = {40, 24};
    opt.stream_k_tiles = 24;
    opt.stream_k_splits = splits;
    opt.stream_k_ctas = splits == 0 ? 10 : 0;
    RunResult r;
    run(in, opt, r);
    const std::string what = describe(p) + " explicit order, stream-K 24 tiles, splits " + std::to_string(splits);
    expect_close(p, OutputLayout::kRowMajor, r.d, ref, what);
    EXPECT_EQ(r.counters, (std::vector<unsigned int>{40, 24})) << what;
  }
}

// The model's plan (ovl::choose_stream_k) on a shape whose last round is sparse (2048 x 8192 x 4096: 512 tiles,
// 4.13 rounds of 124), on green-context partitions (a plain grid of that size where there are none), against
// cuBLAS; and no plan where the rounds are whole.
TEST_F(GemmTest, StreamKModelPlanMatchesCublas) {
  for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
    const Problem p{2048, 8192, 4096, DType::kBF16, bl};
    Inputs in(p, 61);
    std::vector<double> ref;
    cublas_reference(in, ref);
    for (int sms : {124, 116, 100, 128}) {
      const TailPlan choice = choose_stream_k(512, 64, sms);
      if (sms == 128) {
        EXPECT_EQ(choice.tiles, 0) << "512 tiles are 4 whole rounds of 128";
      } else {
        EXPECT_GT(choice.tiles, 0) << "sms " << sms;
      }
      std::unique_ptr<SmPartition> partition;
      RunOptions opt;
      opt.sm_count = sms;
      opt.stream_k_tiles = choice.tiles;
      opt.stream_k_splits = choice.splits;
      const GemmStreamKPlan plan = gemm_stream_k_plan(arguments_of(p, opt));
      EXPECT_EQ(plan.tiles, choice.tiles);
      opt.tile_order = TileOrder::kSwizzle;
      opt.tile_groups.assign(16, 32);  // 16 groups of 32 consecutive positions of the swizzle order
      try {
        partition = SmPartition::confine(0, sms);
        opt.sm_count = partition->gemm_sms();
        opt.stream = partition->gemm_stream();
      } catch (const Error& e) {
        std::printf("  no green contexts (%s): a grid of %d on the whole device\n", e.what(), sms);
      }
      RunResult r;
      run(in, opt, r);
      for (size_t g = 0; g < r.counters.size(); ++g) EXPECT_EQ(r.counters[g], 32u) << "sms " << sms << " group " << g;
      expect_close(p, OutputLayout::kRowMajor, r.d, ref,
                   describe(p) + " sms " + std::to_string(sms) + " stream-K tiles " + std::to_string(plan.tiles) +
                       " splits " + std::to_string(plan.splits));
    }
  }
}

// Half tiles: the last tiles of the order as two 128 x 128 units each, on odd shapes (edge tiles whose right half is
// wholly outside N, K tails), both B and output layouts, with signals and timestamps, against float64; the halves
// accumulate each element in the same order as a whole tile, so the bits must equal the whole-tile run's.
TEST_F(GemmTest, HalfTilesMatchCpuReference) {
  struct Case {
    int m, n, k, sms, half;
  };
  const Case cases[] = {
      {1000, 1800, 200, 7, 8},    // 64 tiles (8 x 8; the last tile column holds 8 columns: its right half is empty)
      {1000, 1800, 200, 7, 64},   // every tile in halves: 128 units over 7 CTAs
      {200, 264, 1032, 3, 4},     // 2 x 2 tiles, 17 k-blocks (the last partial), all in halves
      {130, 520, 136, 16, 3},     // 2 x 3 tiles, the last 3 in halves: 9 units, a grid of 9
      {256, 512, 1024, 132, 2},   // 2 x 2 tiles, 16 k-blocks, 2 in halves
      {1000, 1800, 256, 60, 4},   // 60 whole tiles in one round, then the 8 halves on CTAs 0 .. 7
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
      Inputs in(Problem{c.m, c.n, c.k, DType::kBF16, bl}, seed += 2);
      const std::vector<double> ref = cpu_reference(in);
      for (OutputLayout ol : {OutputLayout::kRowMajor, OutputLayout::kTileMajor}) {
        RunOptions opt;
        opt.output_layout = ol;
        opt.sm_count = c.sms;
        opt.tile_order = TileOrder::kSwizzle;
        opt.swizzle = 3;
        opt.timestamps = true;
        const int tiles = gemm_tile_count(arguments_of(in.problem, opt));
        opt.tile_groups = groups_with_tail(tiles, c.half);
        RunOptions whole = opt;
        opt.half_tiles = c.half;
        const std::string what = describe(in.problem) + " sms " + std::to_string(c.sms) + " half tiles " +
                                 std::to_string(c.half) +
                                 (ol == OutputLayout::kRowMajor ? "/row-major" : "/tile-major");
        RunResult halves, reference_bits;
        run(in, opt, halves);
        expect_close(in.problem, ol, halves.d, ref, what);
        expect_signalled(opt, halves, what);
        run(in, whole, reference_bits);
        expect_same_bits(reference_bits, halves, what + " (against the whole-tile run)");
        expect_deferred_epilogues_same(in, opt, halves, what);
      }
    }
  }
}

// Half tiles with fp16, an explicit (shuffled) order and more groups than travel inline (the position -> group map
// and the half counters share the workspace): the halves follow positions, not tile ids.
TEST_F(GemmTest, HalfTilesFp16ExplicitOrderManyGroups) {
  const Problem p{4200, 1800, 264, DType::kFP16, BLayout::kNxK};  // 33 x 8 = 264 tiles, 5 k-blocks
  Inputs in(p, 91);
  const std::vector<double> ref = cpu_reference(in);
  std::vector<int> permutation(264);
  std::iota(permutation.begin(), permutation.end(), 0);
  std::shuffle(permutation.begin(), permutation.end(), std::mt19937(9));
  RunOptions opt;
  opt.sm_count = 40;
  opt.tile_order = TileOrder::kExplicit;
  opt.explicit_order = permutation;
  opt.tile_groups.assign(264, 1);  // more than kGemmMaxInlineGroups
  opt.half_tiles = 17;
  opt.timestamps = true;
  RunResult r;
  run(in, opt, r);
  const std::string what = describe(p) + " explicit order, 264 groups, 17 half tiles";
  expect_close(p, OutputLayout::kRowMajor, r.d, ref, what);
  expect_signalled(opt, r, what);
}

// Half tiles with neither signals nor timestamps (the halves then count nothing): float64 and the whole-tile bits.
TEST_F(GemmTest, HalfTilesWithoutSignals) {
  for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
    Inputs in(Problem{1000, 1800, 200, DType::kBF16, bl}, 551);
    const std::vector<double> ref = cpu_reference(in);
    RunOptions whole;
    whole.sm_count = 7;
    RunOptions halves = whole;
    halves.half_tiles = 8;
    RunResult h, w;
    run(in, halves, h);
    run(in, whole, w);
    const std::string what = describe(in.problem) + " 8 half tiles, no signals";
    expect_close(in.problem, OutputLayout::kRowMajor, h.d, ref, what);
    expect_same_bits(w, h, what + " (against whole tiles)");
    halves.epilogue = GemmEpilogue::kTmaStoreDeferred;
    RunResult d;
    run(in, halves, d);
    expect_same_bits(w, d, what + epilogue_name(halves.epilogue));
  }
}

// MN-major B with N % 64 == 0: whole tiles load a stage's B as one 3-D box of four 64-column chunks, half tiles as
// two 2-D boxes (no argument forces 2-D boxes on whole tiles, so halves are the 2-D side of the comparison). On
// N = 320 (an edge tile column of one chunk: the other three read as zeros), N = 1024 and N = 64 (one chunk), with
// edge rows, a K tail and K = 40 (one k-block, shorter than the box), bf16 and fp16, for every staged epilogue:
// float64, and whole tiles, one half tile (both kinds in one launch) and every tile in halves give the same bits.
TEST_F(GemmTest, ChunkedMnMajorBMatchesTwoDBoxes) {
  const Problem problems[] = {{1000, 320, 200, DType::kBF16, BLayout::kKxN},
                              {1000, 1024, 200, DType::kBF16, BLayout::kKxN},
                              {300, 64, 40, DType::kBF16, BLayout::kKxN},
                              {1000, 320, 200, DType::kFP16, BLayout::kKxN}};
  for (const Problem& problem : problems) {
    Inputs in(problem, 8100 + problem.n + problem.k);
    const std::vector<double> ref = cpu_reference(in);
    for (GemmEpilogue e : {GemmEpilogue::kTmaStore, GemmEpilogue::kTmaStoreSplit, GemmEpilogue::kTmaStoreDeferred}) {
      RunOptions whole;
      whole.sm_count = 5;
      whole.epilogue = e;
      GemmArguments args = arguments_of(in.problem, whole);
      args.a = in.a_dev.get();  // gemm_launch_plan checks the arguments as gemm_run would; it touches no memory
      args.b = in.b_dev.get();
      args.d = in.a_dev.get();
      const int tiles = gemm_tile_count(args);
      EXPECT_TRUE(gemm_launch_plan(args).b_single_box) << describe(in.problem);  // whole tiles run the 3-D box
      args.half_tiles = tiles;
      EXPECT_FALSE(gemm_launch_plan(args).b_single_box) << describe(in.problem);  // no whole tile left
      whole.tile_groups = {tiles};
      RunResult w;
      run(in, whole, w);
      const std::string what = describe(in.problem) + epilogue_name(e);
      expect_close(in.problem, whole.output_layout, w.d, ref, what + " whole tiles");
      expect_signalled(whole, w, what + " whole tiles");
      for (int half_tiles : {1, tiles}) {
        RunOptions halves = whole;
        halves.half_tiles = half_tiles;
        RunResult h;
        run(in, halves, h);
        const std::string with = what + " " + std::to_string(half_tiles) + " half tiles";
        expect_close(in.problem, halves.output_layout, h.d, ref, with);
        expect_signalled(halves, h, with);
        expect_same_bits(w, h, with + " (against whole tiles)");
      }
    }
  }
}

// CUDA-graph replays: gemm_run captured once (tensor maps, plan and epoch baked into the graph) and replayed three
// times on a workspace poisoned once. Each replay must give the direct run's bits and add each group's tiles to its
// counter: the arrival counters start from zero again because the last arrival of a launch clears its word.
TEST_F(GemmTest, GraphReplaysCountArrivalsFromZero) {
  const Problem p{1000, 1800, 200, DType::kBF16, BLayout::kKxN};  // 64 tiles, 4 k-blocks
  Inputs in(p, 77);
  struct TailPlan {
    const char* name;
    int half, sk_tiles, sk_splits, sk_ctas;
  };
  const TailPlan plans[] = {{"8 half tiles", 8, 0, 0, 0},
                            {"split stream-K 8 x 2", 0, 8, 2, 0},
                            {"contiguous stream-K 8 over 7", 0, 8, 0, 7}};
  for (const TailPlan& plan : plans) {
    RunOptions opt;
    opt.sm_count = 7;
    opt.tile_groups = {56, 8};
    opt.half_tiles = plan.half;
    opt.stream_k_tiles = plan.sk_tiles;
    opt.stream_k_splits = plan.sk_splits;
    opt.stream_k_ctas = plan.sk_ctas;
    RunResult direct;
    run(in, opt, direct);  // also does the shared-memory opt-in outside the capture

    GemmArguments args = arguments_of(p, opt);
    args.a = in.a_dev.get();
    args.b = in.b_dev.get();
    DeviceArray<uint16_t> d(gemm_output_bytes(args) / 2);
    DeviceArray<unsigned int> counters(2);
    args.d = d.get();
    args.group_counters = counters.get();  // before sizing the workspace: half tiles count only when signalled
    DeviceArray<uint8_t> workspace(gemm_workspace_bytes(args));
    ASSERT_GT(workspace.bytes(), 0u) << plan.name;
    CUDA_OK(cudaMemset(counters.get(), 0, counters.bytes()));
    CUDA_OK(cudaMemset(workspace.get(), 0xA5, workspace.bytes()));
    test::Stream stream;
    CUDA_OK(test::finish_setup());
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ASSERT_NO_THROW(gemm_run(args, workspace.get(), stream));
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<uint16_t> out(d.count());
    std::vector<unsigned int> counts(2);
    for (unsigned int replay = 1; replay <= 3; ++replay) {
      CUDA_OK(cudaMemsetAsync(d.get(), 0xFF, d.bytes(), stream));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      CUDA_OK(cudaMemcpy(out.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(counts.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
      expect_same_bits(direct.d, out,
                       std::string(plan.name) + ": replay " + std::to_string(replay) + " against the direct run");
      EXPECT_EQ(counts, (std::vector<unsigned int>{56 * replay, 8 * replay})) << plan.name << ": replay " << replay;
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
  }
}

// Programmatic dependent launch: three GEMMs back to back on one stream, GEMM 2 reading GEMM 1's output (A2 = D1,
// poisoned with NaN before each chain) and GEMM 3 reading GEMM 2's (A3 = D2) and overwriting GEMM 2's B. GEMM 1 runs on
// 16 CTAs, so GEMM 2's CTAs find free SMs once GEMM 1's producers have issued their last loads: with the wait
// removed from the kernel, D2 differed in every programmatic run on the H200 (a reviewer's check, 2026-12-03). The
// write after read (D3 over B2) is ordered by the same wait, but this test cannot catch its absence: GEMM 3 stores
// only after a whole main loop. Against the same chain launched plainly with a host synchronization after each GEMM:
// the same bits (the plans are equal), in every epilogue, five times over; captured once into a CUDA graph (programmatic edges) and replayed, and on a stream of a 64-SM green
// context. That PDL is in force is checked too: in some run GEMM 2 has a CTA that started before GEMM 1's last tile
// was stored (CTA and tile stamps).
TEST_F(GemmTest, ProgrammaticLaunchChainsSeeEachOthersWrites) {
  const int m = 1024, k1 = 4096, n1 = 1024, n2 = 512, n3 = 512;
  const std::vector<uint16_t> a1 = random_matrix(size_t(m) * k1, 501, DType::kBF16);
  const std::vector<uint16_t> b1 = random_matrix(size_t(n1) * k1, 502, DType::kBF16);  // N x K
  const std::vector<uint16_t> b2 = random_matrix(size_t(n2) * n1, 503, DType::kBF16);
  const std::vector<uint16_t> b3 = random_matrix(size_t(n3) * n2, 504, DType::kBF16);
  DeviceArray<uint16_t> a1_dev(a1.size()), b1_dev(b1.size()), b2_dev(b2.size()), b3_dev(b3.size());
  DeviceArray<uint16_t> d1(size_t(m) * n1), d2(size_t(m) * n2);
  const int tiles1 = gemm_tile_count(arguments_of(Problem{m, n1, k1}, RunOptions{}));
  DeviceArray<unsigned long long> tile_stamps1(tiles1), cta_stamps2(132);
  ASSERT_EQ(size_t(m) * n3, b2.size());  // D3 overwrites B2
  CUDA_OK(cudaMemcpy(a1_dev.get(), a1.data(), a1_dev.bytes(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b1_dev.get(), b1.data(), b1_dev.bytes(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b3_dev.get(), b3.data(), b3_dev.bytes(), cudaMemcpyHostToDevice));
  const auto gemm = [](int m_, int n_, int k_, const void* a, const void* b, void* d, int sms, GemmEpilogue e,
                       bool pdl) {
    RunOptions opt;
    opt.sm_count = sms;
    opt.epilogue = e;
    GemmArguments args = arguments_of(Problem{m_, n_, k_}, opt);  // bf16, B as N x K
    args.a = a;
    args.b = b;
    args.d = d;
    args.programmatic_launch = pdl;
    return args;
  };
  test::Stream stream;
  struct Variant {
    const char* name;
    bool graph;
    int green_sms;  // 0: the whole device
  };
  int overlapped = 0;  // programmatic runs in which a CTA of GEMM 2 started before GEMM 1's last tile was stored
  for (const Variant& variant :
       {Variant{"chain", false, 0}, Variant{"chain/graph", true, 0}, Variant{"chain/green64", false, 64}}) {
    std::unique_ptr<SmPartition> partition;
    if (variant.green_sms > 0) {
      try {
        partition = SmPartition::confine(0, variant.green_sms);
      } catch (const Error& e) {
        std::printf("%s skipped: no green contexts here: %s\n", variant.name, e.what());
        continue;
      }
      ASSERT_EQ(partition->gemm_sms(), variant.green_sms);
    }
    const cudaStream_t on = partition ? partition->gemm_stream() : stream;
    const int sms = partition ? partition->gemm_sms() : 132;
    for (GemmEpilogue e : kEpilogues) {
      const std::string what = variant.name + std::string(epilogue_name(e));
      std::vector<GemmArguments> chain[2];  // [pdl]
      for (int pdl = 0; pdl < 2; ++pdl) {
        chain[pdl] = {gemm(m, n1, k1, a1_dev.get(), b1_dev.get(), d1.get(), 16, e, pdl == 1),
                      gemm(m, n2, n1, d1.get(), b2_dev.get(), d2.get(), sms, e, pdl == 1),
                      gemm(m, n3, n2, d2.get(), b3_dev.get(), b2_dev.get(), sms, e, pdl == 1)};
        chain[pdl][0].tile_timestamps = tile_stamps1.get();
        chain[pdl][1].cta_timestamps = cta_stamps2.get();
        for (const GemmArguments& g : chain[pdl]) ASSERT_EQ("", gemm_can_implement(g)) << what;
      }
      cudaGraphExec_t exec = nullptr;
      if (variant.graph) {
        for (const GemmArguments& g : chain[1]) gemm_run(g, nullptr, on);  // the opt-in, outside the capture
        CUDA_OK(cudaStreamSynchronize(on));
        cudaGraph_t graph;
        CUDA_OK(cudaStreamBeginCapture(on, cudaStreamCaptureModeThreadLocal));
        for (const GemmArguments& g : chain[1]) ASSERT_NO_THROW(gemm_run(g, nullptr, on)) << what;
        CUDA_OK(cudaStreamEndCapture(on, &graph));
        CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_OK(cudaGraphDestroy(graph));
      }
      std::vector<uint16_t> want1, want2, want3;
      for (int run = 0; run < 6; ++run) {
        const bool pdl = run > 0;  // run 0: plain launches, each finished before the next starts
        CUDA_OK(cudaMemcpy(b2_dev.get(), b2.data(), b2_dev.bytes(), cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(d1.get(), 0xFF, d1.bytes()));  // NaN: a read before GEMM 1's store shows
        CUDA_OK(cudaMemset(d2.get(), 0xFF, d2.bytes()));
        CUDA_OK(cudaMemset(tile_stamps1.get(), 0, tile_stamps1.bytes()));
        CUDA_OK(cudaMemset(cta_stamps2.get(), 0, cta_stamps2.bytes()));
        CUDA_OK(test::finish_setup());
        if (pdl && exec != nullptr) {
          CUDA_OK(cudaGraphLaunch(exec, on));
        } else {
          for (const GemmArguments& g : chain[pdl ? 1 : 0]) {
            ASSERT_NO_THROW(gemm_run(g, nullptr, on)) << what;
            if (!pdl) CUDA_OK(cudaStreamSynchronize(on));
          }
        }
        CUDA_OK(cudaStreamSynchronize(on));
        std::vector<uint16_t> got1(d1.count()), got2(d2.count()), got3(b2.size());
        CUDA_OK(cudaMemcpy(got1.data(), d1.get(), d1.bytes(), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(got2.data(), d2.get(), d2.bytes(), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(got3.data(), b2_dev.get(), b2_dev.bytes(), cudaMemcpyDeviceToHost));
        std::vector<unsigned long long> stamps1(tile_stamps1.count()), starts2(cta_stamps2.count());
        CUDA_OK(cudaMemcpy(stamps1.data(), tile_stamps1.get(), tile_stamps1.bytes(), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(starts2.data(), cta_stamps2.get(), cta_stamps2.bytes(), cudaMemcpyDeviceToHost));
        unsigned long long first_start2 = ~0ull;
        for (unsigned long long t : starts2) {
          if (t != 0) first_start2 = std::min(first_start2, t);
        }
        const unsigned long long last_tile1 = *std::max_element(stamps1.begin(), stamps1.end());
        if (!pdl) {
          EXPECT_GT(first_start2, last_tile1) << what << ": a plain launch started before the previous GEMM ended";
          // The plain chain against float64 on a sample of D3's entries (D2 as our GEMM 2 wrote it, B3):
          // relative error norm under 1e-2 over the sample, so the reference chain itself computes what it should.
          double err = 0, norm = 0;
          for (int i = 0; i < 64; ++i) {
            const int r = (i * 97) % m, c = (i * 37) % n3;
            double want = 0;
            for (int kk = 0; kk < n2; ++kk) {
              want += half_bits_to_double(got2[size_t(r) * n2 + kk], DType::kBF16) *
                      half_bits_to_double(b3[size_t(c) * n2 + kk], DType::kBF16);
            }
            const double d = half_bits_to_double(got3[size_t(r) * n3 + c], DType::kBF16) - want;
            err += d * d;
            norm += want * want;
          }
          EXPECT_LT(std::sqrt(err / norm), 1e-2) << what << ": plain GEMM 3 against float64";
          want1 = std::move(got1);
          want2 = std::move(got2);
          want3 = std::move(got3);
          continue;
        }
        if (first_start2 < last_tile1) ++overlapped;
        const std::string rep = what + ", programmatic run " + std::to_string(run);
        expect_same_bits(want1, got1, rep + ": D1");
        expect_same_bits(want2, got2, rep + ": D2 (reads D1)");
        expect_same_bits(want3, got3, rep + ": D3 (reads D2, overwrites GEMM 2's B)");
      }
      if (exec != nullptr) CUDA_OK(cudaGraphExecDestroy(exec));
    }
  }
  // Not a speed claim: whether the driver launched GEMM 2 early at all, so that the bits above test the wait.
  // compute-sanitizer runs one kernel at a time, so under it nothing can start early: scripts/device-run.sh sets
  // OVL_UNDER_SANITIZER for its sanitizer runs, and there only the bits above are checked.
  const char* sanitizer = std::getenv("OVL_UNDER_SANITIZER");
  if (sanitizer == nullptr || std::strcmp(sanitizer, "1") != 0) {
    EXPECT_GT(overlapped, 0) << "no programmatic run started GEMM 2 before GEMM 1's last tile was stored";
  } else {
    RecordProperty("overlap_check", "skipped: OVL_UNDER_SANITIZER=1");
    std::printf("  under a sanitizer: %d programmatic runs overlapped (not checked)\n", overlapped);
  }
}

// Waits (AllGather before the GEMM): the GEMM's A starts as NaN and its rows arrive group by group while the GEMM
// runs: on another stream, after a 2 ms sleep, each group's rows are copied in (copy engine, no SMs needed) and then
// the group's counter is released (launch_add_counters). The groups are released out of order (3, 1, 0, 2), so a
// CTA that waited for the wrong counter, or not at all, reads NaN rows and the output has NaN. Odd shape: M = 1000
// (the last band of 104 rows), N = 776 (the last tile column of 8), K = 264 (a K tail); 8 x 4 tiles in 4 groups of
// two bands. Every epilogue and both B layouts on 100 CTAs (a tile each); then 6 CTAs (5-6 tiles each, so a CTA
// waits for several groups in turn), in row-band order and in swizzle order with bands of 2 tile rows (a group is
// one swizzle band, its tiles visited column by column). With signal counters as well. Against float64 and bit for
// bit against the same plan run without waits on the final A.
TEST_F(GemmTest, WaitCountersGateTheLoadsOfA) {
  struct Config {
    int sm_count;
    TileOrder order;
    bool every_epilogue;
  };
  const Config configs[] = {
      {100, TileOrder::kRowBand, true}, {6, TileOrder::kRowBand, false}, {6, TileOrder::kSwizzle, false}};
  for (BLayout bl : {BLayout::kNxK, BLayout::kKxN}) {
    const Problem p{1000, 776, 264, DType::kBF16, bl};
    Inputs in(p, 91);
    const std::vector<double> ref = cpu_reference(in);
    const int groups = 4;
    const int band_rows = gemm_tile_shape().m, rows_per_group = 2 * band_rows;
    for (const Config& cfg : configs) {
      for (GemmEpilogue e : kEpilogues) {
        if (!cfg.every_epilogue && e != GemmEpilogue::kTmaStoreDeferred) continue;
        const std::string what = describe(p) + epilogue_name(e) + " on " + std::to_string(cfg.sm_count) + " CTAs" +
                                 (cfg.order == TileOrder::kSwizzle ? ", swizzle 2" : "");
        RunOptions opt;
        opt.sm_count = cfg.sm_count;
        opt.tile_order = cfg.order;
        opt.swizzle = 2;
        opt.epilogue = e;
        opt.tile_groups.assign(groups, 8);
        RunResult plain;
        run(in, opt, plain);

        DeviceArray<uint16_t> a(in.a.size());
        DeviceArray<unsigned int> waits(groups), sleeper(1);
        DeviceArray<DeviceError> error(1);
        CUDA_OK(cudaMemset(a.get(), 0xFF, a.bytes()));
        CUDA_OK(cudaMemset(waits.get(), 0, waits.bytes()));
        CUDA_OK(cudaMemset(error.get(), 0, error.bytes()));
        test::Stream copy_stream;
        // Lazy module loading would load the counter kernels at their first launch, after the running GEMM.
        preload_wait_kernels();
        RunOptions gated = opt;
        bool adjusted = false, released = false;  // run() took the gated arguments and released the waits
        gated.adjust_arguments = [&](GemmArguments& args) {
          args.a = a.get();
          args.wait_counters = waits.get();
          args.wait_error = error.get();
          adjusted = true;
        };
        gated.after_launch = [&] {
          released = true;
          launch_add_counters_after(sleeper.get(), 1, 1, 2'000'000, copy_stream);
          for (int g : {3, 1, 0, 2}) {
            const int r0 = g * rows_per_group, r1 = std::min(p.m, r0 + rows_per_group);
            const size_t offset = size_t(r0) * p.k, bytes = size_t(r1 - r0) * p.k * 2;
            CUDA_OK(cudaMemcpyAsync(a.get() + offset, in.a_dev.get() + offset, bytes, cudaMemcpyDeviceToDevice,
                                    copy_stream));
            launch_add_counters(waits.get() + g, 1, 1, copy_stream);
          }
          CUDA_OK(cudaStreamSynchronize(copy_stream));
        };
        RunResult got;
        run(in, gated, got);
        ASSERT_TRUE(adjusted && released) << what << ": run() skipped a hook, so nothing was gated";
        DeviceError err{};
        CUDA_OK(cudaMemcpy(&err, error.get(), sizeof(err), cudaMemcpyDeviceToHost));
        EXPECT_EQ(err.code, 0u) << what << ": " << describe(err);
        expect_close(p, OutputLayout::kRowMajor, got.d, ref, what + " gated");
        expect_signalled(opt, got, what + " gated");
        expect_same_bits(plain, got, what + " gated against ungated");
      }
    }
  }
}

// A wait that is never released gives up after wait_timeout_ns and reports itself; the GEMM finishes (no hang).
// The other CTAs, waiting on other groups, give up too once the first timeout is recorded.
TEST_F(GemmTest, WaitTimesOutAndReports) {
  const Problem p{1024, 1024, 128, DType::kBF16, BLayout::kNxK};  // 8 x 4 tiles
  Inputs in(p, 93);
  DeviceArray<unsigned int> waits(4);
  DeviceArray<DeviceError> error(1);
  CUDA_OK(cudaMemset(waits.get(), 0, waits.bytes()));
  CUDA_OK(cudaMemset(error.get(), 0, error.bytes()));
  RunOptions opt;
  opt.sm_count = 16;
  opt.tile_groups = {8, 8, 8, 8};
  opt.adjust_arguments = [&](GemmArguments& args) {
    args.group_counters = nullptr;  // waits only, no signals
    args.wait_counters = waits.get();
    args.wait_value = 3;
    args.wait_timeout_ns = 20'000'000;  // 20 ms
    args.wait_error = error.get();
  };
  RunResult r;
  run(in, opt, r);
  DeviceError err{};
  CUDA_OK(cudaMemcpy(&err, error.get(), sizeof(err), cudaMemcpyDeviceToHost));
  EXPECT_EQ(err.code, 1u);
  EXPECT_EQ(WaitKind(err.wait), WaitKind::kGatheredRows);
  EXPECT_LT(err.group, 4u);
  EXPECT_LT(err.cta, 16u);
  EXPECT_EQ(err.observed, 0u);
  EXPECT_EQ(err.expected, 3u);
}

GemmArguments valid_arguments() {
  GemmArguments args;
  args.m = 256;
  args.n = 512;
  args.k = 128;
  // Never dereferenced: can_implement only looks at the values.
  args.a = reinterpret_cast<const void*>(uintptr_t{0x10000});
  args.b = reinterpret_cast<const void*>(uintptr_t{0x20000});
  args.d = reinterpret_cast<void*>(uintptr_t{0x30000});
  args.sm_count = 132;
  return args;
}

// can_implement touches no device: these run (and pass) on machines without a GPU.

// gemm_can_implement refuses `args` with a message that names `needle` (the bad value).
void refuses(const GemmArguments& args, const std::string& needle) {
  const std::string why = gemm_can_implement(args);
  EXPECT_NE(why.find(needle), std::string::npos) << "message '" << why << "' does not name '" << needle << "'";
}

TEST(GemmArgumentsTest, CanImplementNamesTheBadValue) {
  EXPECT_EQ("", gemm_can_implement(valid_arguments()));
  GemmArguments a = valid_arguments();
  a.k = 12;
  refuses(a, "K = 12");
  a = valid_arguments();
  a.n = 4;
  refuses(a, "N = 4");
  a = valid_arguments();
  a.m = 0;
  refuses(a, "M = 0");
  a = valid_arguments();
  a.a = nullptr;
  refuses(a, "a is a null pointer");
  a = valid_arguments();
  a.b = nullptr;
  refuses(a, "b is a null pointer");
  a = valid_arguments();
  a.d = nullptr;
  refuses(a, "d is a null pointer");
  a = valid_arguments();
  a.epilogue = static_cast<GemmEpilogue>(7);
  refuses(a, "epilogue = 7");
  a.epilogue = GemmEpilogue::kTmaStoreDeferred;
  EXPECT_EQ("", gemm_can_implement(a));
  a = valid_arguments();
  a.sm_count = 0;
  refuses(a, "sm_count = 0");
  a = valid_arguments();
  a.tile_groups = {2, 2, 1};  // the GEMM has 2 x 2 = 4 tiles
  a.group_counters = reinterpret_cast<unsigned int*>(uintptr_t{0x40000});
  refuses(a, "sum to 5");
  a.tile_groups = {2, 2};
  a.group_counters = nullptr;
  refuses(a, "group_counters and wait_counters are both null");
  a.wait_counters = reinterpret_cast<const unsigned int*>(uintptr_t{0x50000});
  refuses(a, "wait_error is a null pointer");
  a.wait_error = reinterpret_cast<DeviceError*>(uintptr_t{0x60000});
  EXPECT_EQ("", gemm_can_implement(a));
  a.wait_timeout_ns = 0;
  refuses(a, "wait_timeout_ns = 0");
  a.wait_timeout_ns = 1000;
  a.wait_value = 0;
  refuses(a, "wait_value = 0");
  a.wait_value = 1;
  a.tile_groups.clear();
  refuses(a, "wait_counters is set but tile_groups is empty");
  a = valid_arguments();
  a.tile_order = TileOrder::kExplicit;
  refuses(a, "explicit_order");
  a = valid_arguments();
  a.a = reinterpret_cast<const void*>(uintptr_t{0x10008});
  refuses(a, "not 16-byte aligned");
}

TEST(GemmArgumentsTest, StreamKArgumentsNameTheBadValue) {
  GemmArguments a = valid_arguments();  // 2 x 2 tiles, 2 k-blocks, 132 SMs
  a.stream_k_tiles = -1;
  refuses(a, "stream_k_tiles = -1");
  a.stream_k_tiles = 5;
  a.stream_k_ctas = 2;
  refuses(a, "stream_k_tiles = 5");
  a.stream_k_tiles = 4;
  a.stream_k_ctas = 0;
  refuses(a, "stream_k_ctas = 0");
  a.stream_k_ctas = 133;
  refuses(a, "stream_k_ctas = 133");
  a.stream_k_ctas = 5;  // 4 tiles x 2 k-blocks = 8 iterations: at most 4 CTAs
  refuses(a, "more than half the 8 k-block iterations");
  a.stream_k_ctas = 4;
  EXPECT_EQ("", gemm_can_implement(a));
  a.stream_k_splits = 3;  // 2 k-blocks
  refuses(a, "stream_k_splits = 3");
  a.stream_k_splits = 1;
  refuses(a, "stream_k_splits = 1");
  a.stream_k_splits = -2;
  refuses(a, "stream_k_splits = -2");
  a.stream_k_splits = 2;
  a.stream_k_ctas = 133;  // ignored by the split schedule
  EXPECT_EQ("", gemm_can_implement(a));
  GemmArguments big = valid_arguments();  // 256 x 32 = 8192 tiles, 2^20 k-blocks (never launched)
  big.m = 32768;
  big.n = 8192;
  big.k = 1 << 26;
  big.stream_k_tiles = 8192;
  big.stream_k_splits = 1 << 18;
  refuses(big, "more than 2^30");
  big.stream_k_tiles = 1;  // 1 x 2^18 pieces, but 2^18 x 2^20 k-block bounds
  refuses(big, "stream_k_splits x k-blocks");
}

// A split plan of the model's (ovl::choose_stream_k; tests/model checks its choices) in the kernel's arguments: its
// workspace holds the counters and `splits` slots per stream-K tile; no plan, no workspace.
TEST(GemmArgumentsTest, StreamKPlanAndWorkspace) {
  const TailPlan choice = choose_stream_k(512, 64, 124);  // 2048 x 8192 x 4096 at 124 SMs: 4 rounds + 16 tiles
  ASSERT_GT(choice.tiles, 0);
  GemmArguments a = valid_arguments();
  a.m = 2048;
  a.n = 8192;
  a.k = 4096;
  a.sm_count = 124;
  EXPECT_EQ(gemm_stream_k_plan(a).tiles, 0);
  EXPECT_EQ(gemm_workspace_bytes(a), 0u);
  a.stream_k_tiles = choice.tiles;
  a.stream_k_splits = choice.splits;
  EXPECT_EQ("", gemm_can_implement(a));
  const GemmStreamKPlan plan = gemm_stream_k_plan(a);
  EXPECT_EQ(plan.tiles, choice.tiles);
  EXPECT_EQ(plan.splits, choice.splits);
  EXPECT_EQ(plan.max_pieces, plan.splits);
  EXPECT_GE(gemm_workspace_bytes(a), size_t(plan.tiles) * plan.max_pieces * 128 * 256 * 4);
  a.stream_k_splits = 1;  // refused by can_implement; no plan
  EXPECT_EQ(gemm_stream_k_plan(a).tiles, 0);
  // A forced plan: 2 tiles x 6 k-blocks over 5 CTAs (ranges start at 0, 2, 4, 7, 9): each tile in 3 pieces.
  a = valid_arguments();
  a.k = 384;
  a.stream_k_tiles = 2;
  a.stream_k_ctas = 5;
  const GemmStreamKPlan forced = gemm_stream_k_plan(a);
  EXPECT_EQ(forced.tiles, 2);
  EXPECT_EQ(forced.ctas, 5);
  EXPECT_EQ(forced.max_pieces, 3);
  EXPECT_EQ(gemm_workspace_bytes(a), 256 + size_t(2) * 3 * 128 * 256 * 4);  // counters, then 256-aligned slots
  // Null workspace refused by name before any device call.
  try {
    gemm_run(a, nullptr, nullptr);
    FAIL() << "gemm_run accepted a null workspace";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("null"), std::string::npos) << e.what();
  }
}

// Half tiles: the arguments gemm_can_implement refuses name the value; the workspace holds one 8-byte counter per
// half-split tile, signalled or not (so its size does not change when the counters' pointer is set later), after the
// group map when there is one.
TEST(GemmArgumentsTest, HalfTilesArgumentsAndWorkspace) {
  GemmArguments a = valid_arguments();  // 2 x 2 tiles
  a.half_tiles = -1;
  refuses(a, "half_tiles = -1");
  a.half_tiles = 5;
  refuses(a, "half_tiles = 5 is not in 1 .. 4");
  a.half_tiles = 4;
  EXPECT_EQ("", gemm_can_implement(a));
  EXPECT_EQ(gemm_workspace_bytes(a), 4 * sizeof(unsigned long long));  // no signals, no timestamps: the same size
  a.stream_k_tiles = 2;
  a.stream_k_splits = 2;
  refuses(a, "at most one of them");
  a.stream_k_tiles = a.stream_k_splits = 0;
  unsigned long long stamps = 0;
  a.tile_timestamps = &stamps;  // never dereferenced: only whether it is set matters here
  EXPECT_EQ(gemm_workspace_bytes(a), 4 * sizeof(unsigned long long));
  a.tile_timestamps = nullptr;
  a.m = 128 * 300;  // 600 tiles, one group each: the map (600 ints), then the counters 256-byte aligned
  a.tile_groups.assign(600, 1);
  unsigned int counters = 0;
  a.group_counters = &counters;
  a.half_tiles = 3;
  EXPECT_EQ("", gemm_can_implement(a));
  EXPECT_EQ(gemm_workspace_bytes(a), (600 * sizeof(int) + 255) / 256 * 256 + 3 * sizeof(unsigned long long));
  EXPECT_EQ(gemm_stream_k_plan(a).tiles, 0);
}

TEST(GemmArgumentsTest, RunThrowsBeforeTouchingTheDevice) {
  GemmArguments a = valid_arguments();
  a.k = 12;
  try {
    gemm_run(a, nullptr, nullptr);
    FAIL() << "gemm_run accepted K = 12";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K = 12"), std::string::npos) << e.what();
  }
}

// gemm_launch_plan, from which gemm_run launches: the instantiation, grid and shared memory for each kind of
// argument, and the can_implement refusal by name.
TEST(GemmArgumentsTest, LaunchPlanNamesWhatRuns) {
  GemmArguments a = valid_arguments();  // 2 x 2 tiles, K-major B
  GemmLaunchPlan plan = gemm_launch_plan(a);
  EXPECT_EQ(plan.epilogue, GemmEpilogue::kTmaStore);  // kAuto resolved
  EXPECT_EQ(plan.grid, 4);  // min(sm_count, tiles)
  EXPECT_EQ(plan.threads, 384);
  EXPECT_EQ(plan.stages, 3);
  EXPECT_EQ(plan.smem_bytes, 3 * (16384 + 32768) + 65536 + 8 * 8 + 1024);
  EXPECT_FALSE(plan.b_single_box);
  EXPECT_EQ(plan.stream_k.tiles, 0);

  a.epilogue = GemmEpilogue::kTmaStoreSplit;
  plan = gemm_launch_plan(a);
  EXPECT_EQ(plan.stages, 4);
  EXPECT_EQ(plan.smem_bytes, 4 * (16384 + 32768) + 32768 + 10 * 8 + 1024);
  a.epilogue = GemmEpilogue::kTmaStoreDeferred;
  plan = gemm_launch_plan(a);
  EXPECT_EQ(plan.epilogue, GemmEpilogue::kTmaStoreDeferred);
  EXPECT_EQ(plan.stages, 3);

  // MN-major B: one 3-D box per stage when N % 64 == 0; N = 520 keeps four 2-D boxes.
  a.b_layout = BLayout::kKxN;
  EXPECT_TRUE(gemm_launch_plan(a).b_single_box);
  a.n = 520;
  EXPECT_FALSE(gemm_launch_plan(a).b_single_box);
  a.n = 512;
  a.epilogue = GemmEpilogue::kTmaStore;

  // Tails: half tiles add a CTA per half; split stream-K deals its pieces over the grid; the grid never passes
  // sm_count.
  a.m = 128 * 10;  // 10 x 2 tiles
  a.sm_count = 8;
  a.half_tiles = 4;
  EXPECT_EQ(gemm_launch_plan(a).grid, 8);  // min(8, 16 whole + 8 halves)
  a.sm_count = 32;
  EXPECT_EQ(gemm_launch_plan(a).grid, 24);  // 16 whole tiles + 2 x 4 halves
  a.half_tiles = 0;
  a.stream_k_tiles = 4;
  a.stream_k_splits = 2;
  plan = gemm_launch_plan(a);
  EXPECT_EQ(plan.stream_k.tiles, 4);
  EXPECT_EQ(plan.stream_k.splits, 2);
  EXPECT_EQ(plan.grid, 24);  // 16 whole tiles + 4 x 2 pieces

  a.stream_k_splits = 0;  // contiguous: the grid holds the whole tiles' CTAs and the `ctas` that share the last tiles
  a.stream_k_ctas = 4;                      // of the 4 tiles' 8 k-block iterations
  EXPECT_EQ(gemm_launch_plan(a).grid, 16);  // 16 whole tiles on 32 SMs; the 4 sharing CTAs are among them
  a.stream_k_tiles = 18;
  a.stream_k_ctas = 6;
  EXPECT_EQ(gemm_launch_plan(a).grid, 6);  // 2 whole tiles: the 6 sharing CTAs set the grid
  a.stream_k_tiles = a.stream_k_ctas = 0;
  a.sm_count = 132;
  a.m = 128 * 3;  // 3 x 2 tiles
  a.n = 256 * 3 - 64;
  EXPECT_EQ(gemm_launch_plan(a).grid, 9);  // 9 tiles

  a.k = 12;
  test::expect_error_naming([&] { gemm_launch_plan(a); }, "K = 12");
}

TEST(GemmArgumentsTest, TileShapeAndCounts) {
  const GemmTileShape t = gemm_tile_shape();
  EXPECT_EQ(t.m, 128);
  EXPECT_EQ(t.n, 256);
  EXPECT_EQ(t.k, 64);
  GemmArguments a = valid_arguments();
  a.m = 1000;
  a.n = 520;
  EXPECT_EQ(gemm_tile_count(a), 8 * 3);
  EXPECT_EQ(gemm_output_bytes(a), size_t(1000) * 520 * 2);
  a.output_layout = OutputLayout::kTileMajor;
  EXPECT_EQ(gemm_output_bytes(a), size_t(24) * 128 * 256 * 2);
  EXPECT_EQ(gemm_workspace_bytes(a), 0u);
}

// valid_arguments() with FP8 inputs (e4m3 x e5m2, bf16 out) and K = 256: 2 x 2 tiles, 2 k-blocks of 128 elements.
GemmArguments fp8_arguments() {
  GemmArguments a = valid_arguments();
  a.k = 256;
  a.dtype = DType::kE4M3;
  a.b_dtype = DType::kE5M2;
  a.out_dtype = DType::kBF16;
  a.a_scale = reinterpret_cast<const float*>(uintptr_t{0x40000});
  a.b_scale = reinterpret_cast<const float*>(uintptr_t{0x40004});
  return a;
}

TEST(GemmArgumentsTest, Fp8CanImplementNamesTheBadValue) {
  EXPECT_EQ("", gemm_can_implement(fp8_arguments()));
  struct Bad {
    std::function<void(GemmArguments&)> change;
    std::string needle;
  };
  const Bad bad[] = {
      {[](GemmArguments& a) { a.b_layout = BLayout::kKxN; }, "b_layout = kKxN"},
      {[](GemmArguments& a) { a.k = 264; }, "K = 264 is not a multiple of 16"},  // a multiple of 8, not of 16
      {[](GemmArguments& a) { a.a_scale = nullptr; }, "a_scale is a null pointer"},
      {[](GemmArguments& a) { a.b_scale = nullptr; }, "b_scale is a null pointer"},
      {[](GemmArguments& a) { a.b_scale = reinterpret_cast<const float*>(uintptr_t{0x40002}); }, "not 4-byte aligned"},
      {[](GemmArguments& a) { a.dtype = DType::kE5M2; }, "dtype = e5m2"},
      {[](GemmArguments& a) { a.b_dtype = DType::kBF16; }, "b_dtype = bf16"},
      {[](GemmArguments& a) { a.out_dtype = DType::kE4M3; }, "out_dtype = e4m3"},
      // Scales on bf16 inputs would be ignored: refused instead.
      {[](GemmArguments& a) { a.dtype = DType::kBF16; }, "scales are for FP8 inputs only"},
  };
  for (const Bad& b : bad) {
    GemmArguments a = fp8_arguments();
    b.change(a);
    refuses(a, b.needle);
  }
  GemmArguments a = fp8_arguments();
  a.k = 272;  // a multiple of 16, not of the 128-element k-block: accepted (the tail reads zeros)
  EXPECT_EQ("", gemm_can_implement(a));
  for (GemmEpilogue e : {GemmEpilogue::kTmaStore, GemmEpilogue::kTmaStoreSplit, GemmEpilogue::kTmaStoreDeferred}) {
    a = fp8_arguments();
    a.epilogue = e;
    EXPECT_EQ("", gemm_can_implement(a));
  }
}

TEST(GemmArgumentsTest, Fp8KBlocksAre128Elements) {
  EXPECT_EQ(gemm_tile_shape(DType::kE4M3).k, 128);
  EXPECT_EQ(gemm_tile_shape(DType::kBF16).k, 64);
  EXPECT_EQ(gemm_tile_shape().k, 64);
  EXPECT_EQ(dtype_bytes(DType::kE5M2), 1);
  EXPECT_EQ(std::string(to_string(DType::kE4M3)), "e4m3");
  GemmArguments a = fp8_arguments();  // K = 256: 2 FP8 k-blocks (4 for bf16)
  a.stream_k_tiles = 2;
  a.stream_k_splits = 2;
  EXPECT_EQ("", gemm_can_implement(a));
  EXPECT_EQ(gemm_stream_k_plan(a).splits, 2);
  a.stream_k_splits = 3;
  refuses(a, "stream_k_splits = 3 is not 0 (contiguous) or in 2 .. 2");
  // D is bf16 or fp16: 2 bytes an element whatever the inputs.
  EXPECT_EQ(gemm_output_bytes(a), size_t(256) * 512 * 2);
  const GemmLaunchPlan plan = gemm_launch_plan(fp8_arguments());
  EXPECT_EQ(plan.epilogue, GemmEpilogue::kTmaStore);
  EXPECT_EQ(plan.stages, 3);
  EXPECT_FALSE(plan.b_single_box);
}

}  // namespace
}  // namespace ovl::kernels
