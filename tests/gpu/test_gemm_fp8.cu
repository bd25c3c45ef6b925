// Tests of the Hopper GEMM with FP8 inputs (ovl/kernels/gemm.hpp, dtype kE4M3): e4m3 x e4m3 and e4m3 x e5m2, per-tensor
// scales, bf16 or fp16 output, through the tile orders, tail plans, epilogues and signals the bf16 kernel has.
//
// Reference: float64 of the dequantized inputs, ref[i][j] = a_scale b_scale sum_k A[i][k] B[j][k] (B is N x K), with
// A and B decoded exactly from their FP8 codes.
// Tolerance, per element: |out - ref| <= 2^-8 |ref| + 2^-9 S, S[i][j] = a_scale b_scale sum_k |A[i][k] B[j][k]|.
// - 2^-8 |ref|: the output's rounding to bf16 (8 significant bits: at most 2^-9 relative; fp16 is finer) plus the
//   fp32 multiply by the scales (2^-24 each).
// - 2^-9 S: the accumulation. A product of two FP8 values is exact in fp32 (at most 4 x 4 significant bits), so the
//   only other error is the summation on the tensor cores, whose FP8 accumulator keeps fewer bits than fp32 (about 14
//   significant bits, as publicly measured on Hopper); each of the K / 32 wgmma k-steps then adds at most 2^-14 S, so
//   K / 32 x 2^-14 S <= 2^-9 S for the K <= 1024 used here.
// What it catches: the inputs have random signs, so |ref| ~ sqrt(K) t and S ~ K t (t: a typical |product|); a missed,
// doubled or misplaced 128-element k-block moves an element by ~sqrt(128) t = 11 t, against a bound of about
// (2^-8 sqrt(K) + 2^-9 K) t <= 2.2 t for K <= 1024; an unwritten element stays NaN (the output is poisoned first).
// Besides, ||out - ref|| / ||ref|| <= 1e-2 over the whole output (a correct kernel: ~2e-3). Fp8GemmTolerance checks
// both claims on the host: the rounded reference and a 13-bit accumulator pass, a missed k-block fails.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_test.hpp"
#include "ovl/kernels/gemm.hpp"

namespace ovl::kernels {
namespace {

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

using test::fp8_value;
using test::half_value;
using test::random_fp8;

struct Case {
  std::string name;
  int m, n, k;
  DType b_dtype = DType::kE4M3;
  DType out_dtype = DType::kBF16;
  TileOrder order = TileOrder::kRowBand;
  int swizzle = 8;
  int sm_count = 0;  // 0: the device's SM count
  GemmEpilogue epilogue = GemmEpilogue::kAuto;
  int sk_tiles = 0, sk_splits = 0, sk_ctas = 0, half_tiles = 0;
  OutputLayout layout = OutputLayout::kRowMajor;
  bool full_range = false;  // every finite code (random_fp8's `full`)
  uint32_t seed = 1;
};

int device_sms() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  return sms;
}

using test::DeviceArray;

struct Outcome {
  std::vector<uint16_t> d;  // the raw output buffer
  std::vector<unsigned int> counters;
  std::vector<int> groups;
};

// Runs case c on A, B (host FP8 codes) with the given scales; one signal group per tile row of the visiting order
// (tiles_n positions each), counters zeroed before the run.
void run_case(const Case& c, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, float a_scale,
              float b_scale, Outcome& out) {
  GemmArguments args;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.dtype = DType::kE4M3;
  args.b_dtype = c.b_dtype;
  args.out_dtype = c.out_dtype;
  args.b_layout = BLayout::kNxK;
  args.output_layout = c.layout;
  args.tile_order = c.order;
  args.swizzle = c.swizzle;
  args.sm_count = c.sm_count > 0 ? c.sm_count : device_sms();
  args.epilogue = c.epilogue;
  args.stream_k_tiles = c.sk_tiles;
  args.stream_k_splits = c.sk_splits;
  args.stream_k_ctas = c.sk_ctas;
  args.half_tiles = c.half_tiles;
  const int tiles = gemm_tile_count(args);
  const int tiles_n = (c.n + gemm_tile_shape(DType::kE4M3).n - 1) / gemm_tile_shape(DType::kE4M3).n;
  args.tile_groups.assign(size_t(tiles / tiles_n), tiles_n);
  out.groups = args.tile_groups;

  DeviceArray<uint8_t> a_dev(a.size()), b_dev(b.size());
  DeviceArray<float> scales(2);
  DeviceArray<uint16_t> d(gemm_output_bytes(args) / 2);
  DeviceArray<unsigned int> counters(args.tile_groups.size());
  CUDA_OK(cudaMemcpy(a_dev.get(), a.data(), a.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b_dev.get(), b.data(), b.size(), cudaMemcpyHostToDevice));
  const float host_scales[2] = {a_scale, b_scale};
  CUDA_OK(cudaMemcpy(scales.get(), host_scales, sizeof(host_scales), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d.get(), 0xFF, d.bytes()));  // NaN in bf16 and fp16
  CUDA_OK(cudaMemset(counters.get(), 0, counters.bytes()));
  args.a = a_dev.get();
  args.b = b_dev.get();
  args.d = d.get();
  args.a_scale = scales.get();
  args.b_scale = scales.get() + 1;
  args.group_counters = counters.get();
  ASSERT_EQ("", gemm_can_implement(args));
  DeviceArray<uint8_t> workspace(gemm_workspace_bytes(args));
  // Garbage, not zeros: the arrival counters must take a word no launch wrote as no arrival.
  if (workspace.count() > 0) CUDA_OK(cudaMemset(workspace.get(), 0xA5, workspace.bytes()));
  test::Stream stream;
  CUDA_OK(test::finish_setup());
  ASSERT_NO_THROW(gemm_run(args, workspace.get(), stream.get()));
  CUDA_OK(cudaStreamSynchronize(stream.get()));
  CUDA_OK(cudaGetLastError());
  out.d.resize(d.count());
  CUDA_OK(cudaMemcpy(out.d.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  out.counters.resize(counters.count());
  CUDA_OK(cudaMemcpy(out.counters.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
}

// The float64 reference of the dequantized inputs, row-major M x N, and S (the scaled sums of |products|). For the
// tolerance's self-check: leaving out k-block `skip` (128 elements; -1: none), a wrong kernel; or with acc_bits > 0,
// a model of a low-precision accumulator: each k32 step's exact partial sum is added to an accumulator that keeps
// acc_bits significant bits, truncated.
struct Reference {
  std::vector<double> d, s;
};
double truncate_bits(double x, int bits) {
  int e = 0;
  const double m = std::frexp(x, &e);
  return std::ldexp(std::trunc(std::ldexp(m, bits)), e - bits);
}
Reference reference(const Case& c, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, double scale,
                    int skip = -1, int acc_bits = 0) {
  std::vector<double> av(a.size()), bv(b.size());
  for (size_t i = 0; i < a.size(); ++i) av[i] = fp8_value(a[i], DType::kE4M3);
  for (size_t i = 0; i < b.size(); ++i) bv[i] = fp8_value(b[i], c.b_dtype);
  const int block = gemm_tile_shape(DType::kE4M3).k;
  Reference r{std::vector<double>(size_t(c.m) * c.n), std::vector<double>(size_t(c.m) * c.n)};
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      double ref = 0, sum = 0, step = 0;
      const double* ar = &av[size_t(i) * c.k];
      const double* br = &bv[size_t(j) * c.k];
      for (int x = 0; x < c.k; ++x) {
        if (x / block == skip) continue;
        step += ar[x] * br[x];
        sum += std::fabs(ar[x] * br[x]);
        if (x % 32 == 31 || x == c.k - 1) {
          ref = acc_bits > 0 ? truncate_bits(ref + step, acc_bits) : ref + step;
          step = 0;
        }
      }
      r.d[size_t(i) * c.n + j] = ref * scale;
      r.s[size_t(i) * c.n + j] = sum * scale;
    }
  }
  return r;
}

// The output against the reference, with the tolerance at the top of the file: the elements out of it (the first few
// described in `first`) and ||out - ref|| / ||ref||. `out` is the raw output buffer in c.layout.
struct Comparison {
  size_t bad = 0;
  double rel = 0;
  std::string first;
};
Comparison compare(const Case& c, const Reference& ref, const std::vector<uint16_t>& out) {
  const GemmTileShape t = gemm_tile_shape(DType::kE4M3);
  const int tiles_n = (c.n + t.n - 1) / t.n;
  Comparison r;
  double num = 0, den = 0;
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      const size_t index = c.layout == OutputLayout::kRowMajor
                               ? size_t(i) * c.n + j
                               : size_t((i / t.m) * tiles_n + j / t.n) * t.m * t.n + size_t(i % t.m) * t.n + j % t.n;
      const double v = half_value(out[index], c.out_dtype);
      const double want = ref.d[size_t(i) * c.n + j], s = ref.s[size_t(i) * c.n + j];
      if (!(std::fabs(v - want) <= std::ldexp(std::fabs(want), -8) + std::ldexp(s, -9)) && ++r.bad <= 3) {
        r.first += "D[" + std::to_string(i) + "][" + std::to_string(j) + "] = " + std::to_string(v) + ", reference " +
                   std::to_string(want) + " (S " + std::to_string(s) + "); ";
      }
      num += (v - want) * (v - want);
      den += want * want;
    }
  }
  r.rel = std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-300)) : INFINITY;
  return r;
}

// The scales of case c: random, non-unit; the full-range codes get small ones, as a quantizer would give them.
std::pair<float, float> scales_of(const Case& c) {
  std::mt19937 rng(c.seed * 7919u);
  std::uniform_real_distribution<float> dist(0.05f, 3.f);
  const float a_scale = dist(rng) * (c.full_range ? 1e-3f : 1.f);
  return {a_scale, dist(rng) * (c.full_range ? 1e-4f : 1.f)};
}

// Runs case c on fresh random inputs and checks it against the float64 reference (the tolerance at the top).
void check_case(const Case& c) {
  SCOPED_TRACE(c.name);
  ASSERT_LE(c.k, 1024) << "the accumulation bound assumes K <= 1024";
  const auto [a_scale, b_scale] = scales_of(c);
  const std::vector<uint8_t> a = random_fp8(size_t(c.m) * c.k, DType::kE4M3, c.seed, c.full_range);
  const std::vector<uint8_t> b = random_fp8(size_t(c.n) * c.k, c.b_dtype, c.seed + 1, c.full_range);
  Outcome out;
  run_case(c, a, b, a_scale, b_scale, out);
  if (::testing::Test::HasFatalFailure()) return;

  for (size_t g = 0; g < out.groups.size(); ++g) {
    ASSERT_EQ(out.counters[g], unsigned(out.groups[g])) << "group " << g << " counter";
  }
  const Comparison r = compare(c, reference(c, a, b, double(a_scale) * double(b_scale)), out.d);
  EXPECT_EQ(r.bad, 0u) << "elements out of tolerance: " << r.first;
  EXPECT_LE(r.rel, 1e-2) << "||out - ref|| / ||ref||";
  if (c.layout == OutputLayout::kTileMajor) {  // the slots' parts outside M x N are zeros
    const GemmTileShape t = gemm_tile_shape(DType::kE4M3);
    const int tiles_n = (c.n + t.n - 1) / t.n;
    for (size_t index = 0; index < out.d.size(); ++index) {
      const int tile = int(index / (size_t(t.m) * t.n)), inside = int(index % (size_t(t.m) * t.n));
      const int i = (tile / tiles_n) * t.m + inside / t.n, j = (tile % tiles_n) * t.n + inside % t.n;
      if (i >= c.m || j >= c.n) ASSERT_EQ(out.d[index], 0u) << "tile-major slot element " << index;
    }
  }
}

// The tolerance separates right from wrong (no GPU needed): the reference rounded to bf16 passes, so does an
// accumulator of 13 significant bits (a bit less than the tensor cores' FP8 accumulation is reported to keep), and an
// output that misses one 128-element k-block fails at most elements and in the norm.
TEST(Fp8GemmTolerance, PassesTheRoundedReferenceAndFailsAMissedKBlock) {
  for (const bool full : {false, true}) {
    Case c{"tolerance", 64, 96, 1024, DType::kE5M2};
    c.full_range = full;
    SCOPED_TRACE(full ? "full-range codes" : "moderate codes");
    const auto [a_scale, b_scale] = scales_of(c);
    const std::vector<uint8_t> a = random_fp8(size_t(c.m) * c.k, DType::kE4M3, 31, full);
    const std::vector<uint8_t> b = random_fp8(size_t(c.n) * c.k, c.b_dtype, 32, full);
    const double scale = double(a_scale) * double(b_scale);
    const Reference right = reference(c, a, b, scale);
    const auto rounded = [](const std::vector<double>& d) {
      std::vector<uint16_t> out(d.size());
      for (size_t i = 0; i < d.size(); ++i) out[i] = test::to_bf16(float(d[i]));
      return out;
    };
    const Comparison pass = compare(c, right, rounded(right.d));
    EXPECT_EQ(pass.bad, 0u) << pass.first;
    EXPECT_LT(pass.rel, 3e-3);
    const Comparison coarse = compare(c, right, rounded(reference(c, a, b, scale, -1, 13).d));
    EXPECT_EQ(coarse.bad, 0u) << coarse.first;
    EXPECT_LT(coarse.rel, 1e-2);
    const Comparison fail = compare(c, right, rounded(reference(c, a, b, scale, 3).d));
    // Moderate codes: nearly every element; full-range codes (a few products dominate each sum): still most.
    EXPECT_GT(fail.bad, size_t(c.m) * c.n * (full ? 5 : 9) / 10);
    EXPECT_GT(fail.rel, 1e-2);
  }
}

class Fp8GemmTest : public test::HopperTest {};

TEST_F(Fp8GemmTest, MatchesFloat64Reference) {
  using O = TileOrder;
  using E = GemmEpilogue;
  const DType e4 = DType::kE4M3, e5 = DType::kE5M2, bf = DType::kBF16, fp = DType::kFP16;
  // M, N not multiples of the 128 x 256 tile; K a multiple of 128 (whole k-blocks) or of 16 only (a zero-filled tail).
  const std::vector<Case> cases = {
      {"e4m3xe4m3/bf16/row-band/whole device", 1000, 1800, 512, e4, bf, O::kRowBand, 8, 0, E::kAuto},
      {"e4m3xe5m2/bf16/swizzle 3/split stream-K/20 SMs/deferred", 1000, 1800, 528, e5, bf, O::kSwizzle, 3, 20,
       E::kTmaStoreDeferred, 8, 3, 0, 0, OutputLayout::kRowMajor, false, 3},
      {"e4m3xe5m2/fp16/swizzle 2/half tiles/7 SMs/split epilogue", 520, 1032, 1008, e5, fp, O::kSwizzle, 2, 7,
       E::kTmaStoreSplit, 0, 0, 0, 4, OutputLayout::kRowMajor, false, 5},
      {"e4m3xe4m3/fp16/row-band/contiguous stream-K/5 SMs", 300, 776, 1024, e4, fp, O::kRowBand, 8, 5, E::kTmaStore, 3,
       0, 5, 0, OutputLayout::kRowMajor, false, 7},
      {"e4m3xe4m3/bf16/swizzle 2/tile-major/split stream-K/16 SMs", 400, 600, 272, e4, bf, O::kSwizzle, 2, 16,
       E::kTmaStore, 6, 2, 0, 0, OutputLayout::kTileMajor, false, 9},
      {"e4m3xe5m2/bf16/full-range codes/12 SMs", 256, 520, 384, e5, bf, O::kRowBand, 8, 12, E::kTmaStoreDeferred, 0, 0,
       0, 0, OutputLayout::kRowMajor, true, 11},
      {"e4m3xe4m3/bf16/full-range codes/32 SMs/split epilogue", 130, 264, 256, e4, bf, O::kSwizzle, 4, 32,
       E::kTmaStoreSplit, 0, 0, 0, 0, OutputLayout::kRowMajor, true, 13},
  };
  for (const Case& c : cases) {
    check_case(c);
    if (HasFatalFailure()) return;
  }
}

// Whole tiles give the same bits on any grid (each tile's sum runs in one CTA in one order), FP8 as bf16.
TEST_F(Fp8GemmTest, SmCountsGiveIdenticalBits) {
  Case c{"e4m3xe5m2/bf16", 700, 1304, 640, DType::kE5M2, DType::kBF16, TileOrder::kSwizzle, 2};
  const std::vector<uint8_t> a = random_fp8(size_t(c.m) * c.k, DType::kE4M3, 21, false);
  const std::vector<uint8_t> b = random_fp8(size_t(c.n) * c.k, c.b_dtype, 22, false);
  Outcome whole, few;
  run_case(c, a, b, 0.75f, 1.5f, whole);
  if (HasFatalFailure()) return;
  c.sm_count = 9;
  c.epilogue = GemmEpilogue::kTmaStoreDeferred;
  run_case(c, a, b, 0.75f, 1.5f, few);
  if (HasFatalFailure()) return;
  ASSERT_EQ(whole.d.size(), few.d.size());
  EXPECT_EQ(0, std::memcmp(whole.d.data(), few.d.data(), whole.d.size() * 2)) << "bits differ between 132 and 9 SMs";
}

}  // namespace
}  // namespace ovl::kernels
