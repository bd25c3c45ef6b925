// Benchmark names, reading Google Benchmark JSON, and calibration: fitting known parameters back from synthetic
// benchmark files that the model itself generated (with noise), and held-out validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/tools/bench_names.hpp"
#include "ovl/tools/calibrate.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

// Deterministic noise in [-amplitude, +amplitude] (relative).
struct Noise {
  uint64_t state = 12345;
  double amplitude;
  double operator()() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return amplitude * (2.0 * double(state >> 11) / double(uint64_t(1) << 53) - 1.0);
  }
};

// A Google Benchmark JSON document with one manual-time run per case, times from `truth` x (1 + noise).
nlohmann::json synthetic(const std::vector<BenchCase>& cases, const Hardware& truth, double noise_amplitude) {
  Noise noise{12345, noise_amplitude};
  nlohmann::json doc{{"context", {{"library_build_type", "release"}}}, {"benchmarks", nlohmann::json::array()}};
  for (const auto& c : cases) {
    const auto us = predict_us(c, truth);
    if (!us) continue;
    const double t = *us * (1 + noise());
    nlohmann::json b{{"name", c.name() + "/manual_time"},
                     {"run_type", "iteration"},
                     {"iterations", 10},
                     {"real_time", t * 1e3},
                     {"cpu_time", 5.0},
                     {"time_unit", "ns"}};
    if (c.kind == BenchKind::kGemm) b["tflops"] = 2.0 * c.m * c.n * c.k / t / 1e6;
    if (c.kind == BenchKind::kCollective) b["algbw_GBps"] = c.bytes / t / 1e3;
    doc["benchmarks"].push_back(b);
  }
  return doc;
}

// Every overlap case of world 8 over modes x ops x shapes x comm SMs 8, 16, 24, 32 (default plans).
std::vector<BenchCase> overlap_cases(std::initializer_list<const char*> modes, std::initializer_list<const char*> ops,
                                     std::initializer_list<const char*> shapes) {
  std::vector<BenchCase> cases;
  for (const char* mode : modes)
    for (const char* op : ops)
      for (const char* shape : shapes)
        for (int comm : {8, 16, 24, 32})
          cases.push_back(
              *parse_bench_name(fmt::format("overlap/{}/{}/{}/world:8/comm_sms:{}", mode, op, shape, comm)));
  return cases;
}

BenchCase gemm_case(const char* impl, int64_t m, int64_t n, int64_t k, int sms) {
  return *parse_bench_name(fmt::format("gemm/{}/{}x{}x{}/nt/sms:{}", impl, m, n, k, sms));
}

const FittedParameter* find(const CalibrationResult& r, const std::string& name) {
  for (const auto& p : r.parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// `name` was fitted on the overlap cases to `value` within `tol` (absolute).
void expect_overlap_fit(const CalibrationResult& r, double ModelParams::*field, const char* name, double value,
                        double tol) {
  EXPECT_NEAR(r.hardware.fit.*field, value, tol) << name;
  const FittedParameter* p = find(r, name);
  ASSERT_TRUE(p) << name;
  EXPECT_EQ(p->subset, "overlap") << name;
}

TEST(BenchNames, Parse) {
  auto g = parse_bench_name("gemm/cublas/8192x4096x1024/nn/sms:124/manual_time");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->kind, BenchKind::kGemm);
  EXPECT_EQ(g->gemm_impl(), GemmImpl::kCublas);
  EXPECT_EQ(g->m, 8192);
  EXPECT_EQ(g->n, 4096);
  EXPECT_EQ(g->k, 1024);
  EXPECT_EQ(g->b_layout, BLayout::kKxN);
  EXPECT_EQ(g->sms, 124);
  EXPECT_EQ(parse_bench_name(g->name())->name(), "gemm/cublas/8192x4096x1024/nn/sms:124");
  EXPECT_FALSE(parse_bench_name("gemm/ovl/99999999999x8x8/nt/sms:132/manual_time"));  // past the 32-bit sizes
  // fp16 cases: timed like their bf16 twins (one rate for both), under their own names.
  EXPECT_EQ(parse_bench_name("gemm/cublas-fp16/8192x4096x1024/nn/sms:124/manual_time")->gemm_impl(), GemmImpl::kCublas);
  auto h = parse_bench_name("gemm/ovl-fp16/8192x4096x1024/nt/sms:132/manual_time");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->gemm_impl(), GemmImpl::kOvl);
  EXPECT_EQ(h->name(), "gemm/ovl-fp16/8192x4096x1024/nt/sms:132");
  auto c = parse_bench_name("coll/tma-pull/reducescatter/67108864/world:8/ctas:16/manual_time/repeats:5_median");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, BenchKind::kCollective);
  EXPECT_EQ(c->comm_algo(), CommAlgo::kTmaPull);
  EXPECT_EQ(c->collective, Collective::kReduceScatter);
  EXPECT_EQ(c->bytes, 67108864);
  EXPECT_EQ(c->world, 8);
  EXPECT_EQ(c->ctas, 16);
  EXPECT_EQ(parse_bench_name("coll/simt/allgather/1024/world:2/ctas:4")->comm_algo(), CommAlgo::kSimt);
  EXPECT_FALSE(parse_bench_name("coll/ce/allgather/1024/world:2/ctas:4"));  // not a bench_collectives case
  auto cp = parse_bench_name("copy/tma/1073741824/ctas:32/iterations:20");
  ASSERT_TRUE(cp);
  EXPECT_EQ(cp->kind, BenchKind::kCopy);
  EXPECT_EQ(cp->ctas, 32);
  auto o = parse_bench_name("overlap/green-context/allgather/8192x8192x8192/world:4/comm_sms:16");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->mode, Mode::kGreenContext);
  EXPECT_EQ(o->op, Op::kAllGatherGemm);
  EXPECT_EQ(o->comm_sms, 16);
  EXPECT_EQ(parse_bench_name("overlap/tma/gemm-reducescatter/1024x1024x1024/world:2/comm_sms:8")->op,
            Op::kGemmReduceScatter);
  // groups:<g>: the plan's tile groups are g groups of whole row bands; a tile-signal GEMM leaves comm_ctas SMs.
  auto og = parse_bench_name("overlap/tile-signal/allreduce/8192x8192x4096/world:2/comm_sms:16/groups:4/manual_time");
  ASSERT_TRUE(og);
  EXPECT_EQ(og->groups, 4);
  EXPECT_EQ(og->name(), "overlap/tile-signal/allreduce/8192x8192x4096/world:2/comm_sms:16/groups:4");
  const Hardware h200 = builtin_hardware("h200");
  const Plan gp = og->plan(h200);
  ASSERT_EQ(gp.tile_groups.size(), 4u);
  EXPECT_EQ(gp.tile_groups[0], gp.tile_groups[3]);                            // 64 bands of 32 tiles: 16 each
  EXPECT_EQ(gp.tile_groups[0] % gp.tiles_n(og->problem()), 0);                // whole bands
  EXPECT_EQ(gp.gemm_sms, h200.spec.sm_count - 16);
  EXPECT_NO_THROW(gp.validate(og->problem(), h200));
  const Plan gc = parse_bench_name("overlap/green-context/reducescatter/8192x8192x4096/world:2/comm_sms:16/groups:3")
                      ->plan(h200);
  EXPECT_EQ(gc.tile_groups.size(), 3u);  // 64 bands: 22, 21, 21
  EXPECT_EQ(gc.gemm_sms, h200.spec.sm_count - 16);  // the partition's, as default_plan
  EXPECT_THROW(parse_bench_name("overlap/tma/allreduce/256x256x256/world:2/comm_sms:8/groups:9")->plan(h200), Error);
  // order:swizzle (after groups:<g>): g groups of whole swizzle bands, in swizzle order; 64 tile rows = 8 swizzle
  // bands, so at most 8 groups.
  auto os = parse_bench_name(
      "overlap/green-context/allreduce/8192x8192x4096/world:2/comm_sms:16/groups:4/order:swizzle/manual_time");
  ASSERT_TRUE(os);
  EXPECT_EQ(os->order, TileOrder::kSwizzle);
  EXPECT_EQ(os->name(), "overlap/green-context/allreduce/8192x8192x4096/world:2/comm_sms:16/groups:4/order:swizzle");
  const Plan sp = os->plan(h200);
  EXPECT_EQ(sp.tile_order, TileOrder::kSwizzle);
  EXPECT_EQ(sp.tile_groups, (std::vector<int>(4, 2 * 8 * 32)));
  EXPECT_NO_THROW(sp.validate(os->problem(), h200));
  EXPECT_THROW(
      parse_bench_name("overlap/green-context/allreduce/8192x8192x4096/world:2/comm_sms:16/groups:9/order:swizzle")
          ->plan(h200),
      Error);
  // dtype:<t>, the last part (bench_overlap's FP8 cases): the problem's input type; bf16 is left out of the name.
  auto fp8 = parse_bench_name("overlap/tma/allreduce/8192x8192x4096/world:8/comm_sms:16/groups:4/dtype:e4m3/manual_time");
  ASSERT_TRUE(fp8);
  EXPECT_EQ(fp8->dtype, DType::kE4M3);
  EXPECT_EQ(fp8->groups, 4);
  EXPECT_EQ(fp8->problem().dtype, DType::kE4M3);
  EXPECT_EQ(fp8->name(), "overlap/tma/allreduce/8192x8192x4096/world:8/comm_sms:16/groups:4/dtype:e4m3");
  EXPECT_EQ(parse_bench_name("overlap/sequential/allgather/4096x8192x8192/world:8/comm_sms:132/dtype:e4m3")->dtype,
            DType::kE4M3);
  EXPECT_EQ(parse_bench_name("overlap/sequential/allgather/4096x8192x8192/world:8/comm_sms:132/dtype:bf16")->name(),
            "overlap/sequential/allgather/4096x8192x8192/world:8/comm_sms:132");
  for (const char* bad : {"overlap/tma/allreduce/8x8x8/world:2/comm_sms:8/order:swizzle",
                          "overlap/tma/allreduce/8x8x8/world:2/comm_sms:8/groups:2/order:zigzag",
                          "overlap/decomposed/allreduce/8x8x8/world:2/comm_sms:8/groups:2/order:swizzle",
                          "overlap/tma/allreduce/8x8x8/world:2/comm_sms:8/dtype:int8",
                          "overlap/tma/allreduce/8x8x8/world:2/comm_sms:8/dtype:e4m3/groups:2"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
  for (const char* bad :
       {"overlap/sequential/allreduce/8x8x8/world:2/comm_sms:8/groups:2",
        "overlap/decomposed/allreduce/8x8x8/world:2/comm_sms:8/groups:2",
        "overlap/tma/allreduce/8x8x8/world:2/comm_sms:8/groups:0",
        "overlap/sequential/allreduce/8x8x8/world:2/comm_sms:132/algo:tma-push",
        "gemm/ovl/8192x8192/nt/sms:132", "gemm/mkl/8x8x8/nt/sms:1", "gemm/ovl-registers/8x8x8/nt/sms:1", "gemm/ovl/8x8x8/tt/sms:1", "gemm/ovl/8x8x8/nt/sm:1",
        "coll/nccl/broadcast/8/world:2/ctas:1", "coll/nccl/allreduce/-8/world:2/ctas:1",
        "overlap/magic/allreduce/8x8x8/world:2/comm_sms:8", "BM_Other/16", "", "gemm/ovl/8x8x8/nt/sms:132_stddev"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
}

TEST(Calibrate, ReadMeasurements) {
  nlohmann::json doc{{"benchmarks",
                      {{{"name", "gemm/ovl/1024x1024x1024/nt/sms:8/manual_time"},
                        {"run_type", "iteration"},
                        {"real_time", 2.5},
                        {"time_unit", "ms"},
                        {"tflops", 0.86}},
                       {{"name", "copy/simt/1048576/ctas:4/manual_time"}, {"real_time", 10.0}, {"time_unit", "us"}},
                       {{"name", "copy/simt/1048576/ctas:4/manual_time"}, {"real_time", 30.0}, {"time_unit", "us"}},
                       {{"name", "copy/simt/1048576/ctas:4/manual_time"}, {"real_time", 12.0}, {"time_unit", "us"}},
                       {{"name", "copy/simt/2048/ctas:4/manual_time"},
                        {"real_time", 99.0},
                        {"time_unit", "us"},
                        {"error_occurred", true},
                        {"error_message", "no GPU"}},
                       {{"name", "coll/nccl/allreduce/1024/world:2/ctas:2/manual_time_median"},
                        {"run_type", "aggregate"},
                        {"aggregate_name", "median"},
                        {"real_time", 20000.0},
                        {"time_unit", "ns"}},
                       {{"name", "coll/nccl/allreduce/1024/world:2/ctas:2/manual_time_stddev"},
                        {"run_type", "aggregate"},
                        {"aggregate_name", "stddev"},
                        {"real_time", 5.0},
                        {"time_unit", "ns"}},
                       {{"name", "coll/nccl/allreduce/1024/world:2/ctas:2/manual_time"},
                        {"run_type", "iteration"},
                        {"real_time", 90000.0},
                        {"time_unit", "ns"}},
                       {{"name", "overlap/tma/allreduce/1024x1024x1024/world:2/comm_sms:8"},
                        {"real_time", 1.0},
                        {"time_unit", "s"},
                        {"us", 123.0}},
                       {{"name", "BM_Unrelated"}, {"real_time", 1.0}},
                       // A split stream-K plan is read with its plan; a contiguous one is left out.
                       {{"name", "gemm/ovl/2048x8192x4096/nn/sms:124/manual_time"},
                        {"real_time", 230.0},
                        {"time_unit", "us"},
                        {"sk_tiles", 16.0},
                        {"sk_splits", 4.0}},
                       {{"name", "gemm/ovl/2048x8192x4096/nt/sms:124/manual_time"},
                        {"real_time", 230.0},
                        {"time_unit", "us"},
                        {"sk_tiles", 16.0},
                        {"sk_splits", 0.0}},
                       {{"name", "gemm/ovl-nosk/2048x8192x4096/nn/sms:124/manual_time"},
                        {"real_time", 240.0},
                        {"time_unit", "us"},
                        {"sk_tiles", 0.0}}}}};
  std::vector<std::string> notes;
  const auto ms = read_measurements({doc}, &notes);
  ASSERT_EQ(ms.size(), 6u);
  EXPECT_EQ(ms[4].name, "gemm/ovl/2048x8192x4096/nn/sms:124/manual_time");
  EXPECT_EQ(ms[4].bench.stream_k.tiles, 16);
  EXPECT_EQ(ms[4].bench.stream_k.splits, 4);
  EXPECT_EQ(ms[5].name, "gemm/ovl-nosk/2048x8192x4096/nn/sms:124/manual_time");
  EXPECT_EQ(ms[5].bench.gemm_impl(), GemmImpl::kOvl);
  EXPECT_EQ(ms[5].bench.stream_k.tiles, 0);
  EXPECT_DOUBLE_EQ(ms[0].us, 2500.0);
  EXPECT_DOUBLE_EQ(ms[0].counters.at("tflops"), 0.86);
  EXPECT_DOUBLE_EQ(ms[1].us, 12.0);   // the median of 10, 30, 12
  EXPECT_DOUBLE_EQ(ms[2].us, 20.0);   // the median aggregate wins over the single iterations
  EXPECT_DOUBLE_EQ(ms[3].us, 123.0);  // overlap cases: the "us" counter
  EXPECT_EQ(notes.size(), 3u);        // the errored run, the unrelated name and the contiguous stream-K row
  // Two GPUs' files are never pooled: the medians would mix their times.
  nlohmann::json on_h100 = doc, on_h200 = doc;
  on_h100["context"] = {{"gpu", "NVIDIA H100 80GB HBM3"}};
  on_h200["context"] = {{"gpu", "NVIDIA H200"}};
  test::expect_error_naming_all(
      [&] {
        read_measurements({on_h100, on_h200});
      },
      {"benchmark file 0 ran on \"NVIDIA H100 80GB HBM3\"", "benchmark file 1 on \"NVIDIA H200\""});
  EXPECT_EQ(benchmark_files_gpu({on_h200, doc, on_h200}), "NVIDIA H200");
  test::expect_error_naming(
      [&] {
        (void)benchmark_files_gpu({on_h200, on_h100}, {"a.json", "b.json"});
      },
      "\"b.json\" on \"NVIDIA H100 80GB HBM3\"");
  EXPECT_THROW(read_measurements({nlohmann::json{{"context", 1}}}), Error);
  nlohmann::json huge_count = doc;  // a count cast to int out of range was undefined behaviour
  huge_count["benchmarks"][0]["sk_tiles"] = 1e20;
  test::expect_error_naming([&] { read_measurements({huge_count}); }, "counter \"sk_tiles\" = 1e+20");
  test::expect_error_naming([] { (void)validate_gemm({}, builtin_hardware("h200")); }, "no measurement files");
  nlohmann::json bad_unit{{"benchmarks", {{{"name", "copy/simt/1/ctas:1"}, {"real_time", 1.0}, {"time_unit", "h"}}}}};
  EXPECT_THROW(read_measurements({bad_unit}), Error);
  nlohmann::json tiny{{"benchmarks", {{{"name", "copy/simt/1/ctas:1"}, {"real_time", 1e-300}, {"time_unit", "us"}}}}};
  test::expect_error_naming([&] { read_measurements({tiny}); }, "time 1e-300 us must be at least 0.001");
  EXPECT_THROW(calibrate(std::vector<nlohmann::json>{nlohmann::json{{"benchmarks", nlohmann::json::array()}}},
                         builtin_hardware("h200")),
               Error);
}

// bench_overlap records the problem and the plan a case ran in its label: they are read from there (a plan the name
// cannot say: 3 groups, fp16, K x N), and a label holding a malformed plan is an error naming the case.
TEST(Calibrate, OverlapCasesTakeTheRecordedProblemAndPlan) {
  const Hardware hw = builtin_hardware("h200");
  Problem p = make_problem(Op::kGemmReduceScatter, 4096, 2048, 1024, 4);
  p.dtype = DType::kFP16;
  p.b_layout = BLayout::kKxN;
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 16);
  plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), 3);
  Plan seq = default_plan(Mode::kSequential, p, hw, 132);
  seq.comm_algo = CommAlgo::kTmaPush;
  const std::string name = "overlap/tile-signal/gemm-reducescatter/4096x2048x1024/world:4/comm_sms:16";
  nlohmann::json label = {{"problem", p}, {"plan", plan}, {"share", "rank0"}};
  nlohmann::json doc{{"benchmarks",
                      {{{"name", name}, {"real_time", 1.0}, {"time_unit", "ms"}, {"us", 900.0}, {"label", label.dump()}},
                       {{"name", name + "/groups:2"}, {"real_time", 1.0}, {"time_unit", "ms"}, {"label", "free text"}},
                       // A name the parser does not know, read from its label alone.
                       {{"name", "overlap/sequential/gemm-reducescatter/4096x2048x1024/world:4/comm_sms:132/algo:tma-push"},
                        {"real_time", 1.0},
                        {"time_unit", "ms"},
                        {"label", nlohmann::json{{"problem", p}, {"plan", seq}}.dump()}}}}};
  const auto ms = read_measurements({doc});
  ASSERT_EQ(ms.size(), 3u);
  EXPECT_EQ(ms[2].bench.mode, Mode::kSequential);
  EXPECT_EQ(ms[2].bench.plan(hw).comm_algo, CommAlgo::kTmaPush);
  EXPECT_EQ(ms[2].bench.problem().name(), p.name());
  ASSERT_TRUE(ms[0].bench.ran.has_value());
  EXPECT_EQ(ms[0].bench.problem().name(), p.name());
  EXPECT_EQ(ms[0].bench.plan(hw).summary(), plan.summary());
  EXPECT_EQ(ms[0].bench.plan(hw).tile_groups.size(), 3u);
  EXPECT_FALSE(ms[1].bench.ran.has_value());  // a file without the record: the plan the name says
  EXPECT_EQ(ms[1].bench.plan(hw).tile_groups.size(), 2u);
  nlohmann::json bad_plan = label;
  bad_plan["plan"]["mode"] = "warp-drive";
  doc["benchmarks"][0]["label"] = bad_plan.dump();
  test::expect_error_naming([&] { read_measurements({doc}); }, name);
}

TEST(Calibrate, RecoversGemmParameters) {
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.gemm_efficiency = 0.72;
  truth.fit.tile_epilogue_us = 0.8;
  truth.fit.launch_us = 6.0;
  truth.fit.cublas_efficiency = 0.83;
  truth.fit.cublas_partition_penalty = 0.09;
  truth.fit.cublas_tile_epilogue_us = 1.2;
  truth.fit.clock_knee_sms = 60;
  truth.fit.clock_exponent = 0.4;
  std::vector<BenchCase> cases;
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {4096, 4096, 4096},  {2048, 8192, 4096},  {8192, 2048, 16384},
                               {1024, 1024, 8192}, {4096, 14336, 4096}, {16384, 4096, 2048}, {1024, 4096, 512}};
  for (const auto& s : shapes) {
    for (int sms : {8, 16, 32, 64, 96, 116, 124, 128, 132}) {
      for (const char* impl : {"ovl", "cublas"}) cases.push_back(gemm_case(impl, s[0], s[1], s[2], sms));
    }
  }
  const CalibrationResult r = calibrate({synthetic(cases, truth, 0.005)}, base);
  const auto* eff = find(r, "gemm_efficiency");
  ASSERT_TRUE(eff);
  EXPECT_NEAR(eff->value, 0.72, 0.72 * 0.015);
  EXPECT_GT(eff->points, 50);
  EXPECT_LT(eff->rms_rel_error, 0.01);  // 0.5% noise
  EXPECT_NEAR(r.hardware.fit.cublas_efficiency, 0.83, 0.83 * 0.015);
  EXPECT_NEAR(r.hardware.fit.cublas_partition_penalty, 0.09, 0.015);
  EXPECT_NEAR(r.hardware.fit.launch_us, 6.0, 3.0);
  EXPECT_NEAR(r.hardware.fit.tile_epilogue_us, 0.8, 0.6);
  EXPECT_NEAR(r.hardware.fit.cublas_tile_epilogue_us, 1.2, 0.6);
  EXPECT_NEAR(r.hardware.fit.clock_knee_sms, 60, 6);
  EXPECT_NEAR(r.hardware.fit.clock_exponent, 0.4, 0.04);
  EXPECT_NE(r.summary().find("cublas_partition_penalty"), std::string::npos);
  ASSERT_TRUE(find(r, "clock_exponent"));
  // The same data without a partition penalty in the truth: the fit finds ~0 (not the base value) and says so
  // when it is pushed below 0.
  Hardware no_penalty = truth;
  no_penalty.fit.cublas_partition_penalty = 0;
  const CalibrationResult r0 = calibrate({synthetic(cases, no_penalty, 0.005)}, base);
  EXPECT_NEAR(r0.hardware.fit.cublas_partition_penalty, 0.0, 0.015);
  ASSERT_TRUE(find(r0, "cublas_partition_penalty"));
  // Parameters no GEMM case informs are left alone.
  EXPECT_DOUBLE_EQ(r.hardware.fit.link_efficiency, base.fit.link_efficiency);
  EXPECT_EQ(find(r, "link_efficiency"), nullptr);
}

TEST(Calibrate, RecoversCommParameters) {
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.link_efficiency = 400.0 / 450;  // our kernels reach 400 of the H200's 450 GB/s
  truth.fit.nccl_efficiency = 0.85;
  truth.fit.nccl_per_cta_GBps = 25;
  truth.fit.per_cta_copy_GBps = 90;
  truth.fit.link_latency_us = 1.0;
  truth.fit.nccl_launch_us = 12;
  truth.fit.tma_launch_us = 3;
  std::vector<BenchCase> cases;
  for (const char* op : {"allreduce", "reducescatter", "allgather"}) {
    for (int64_t bytes = 1024; bytes <= (int64_t(1) << 30); bytes *= 4) {
      for (int ctas : {4, 8, 16, 32}) {
        cases.push_back(*parse_bench_name(fmt::format("coll/nccl/{}/{}/world:8/ctas:{}", op, bytes, ctas)));
      }
      for (const char* impl : {"tma-push", "tma-pull"}) {
        for (int ctas : {1, 2, 4, 8, 16, 32, 64}) {
          cases.push_back(*parse_bench_name(fmt::format("coll/{}/{}/{}/world:8/ctas:{}", impl, op, bytes, ctas)));
        }
      }
    }
  }
  for (int64_t bytes = int64_t(1) << 20; bytes <= (int64_t(1) << 30); bytes *= 4) {
    for (int ctas : {1, 4, 16, 32, 64, 132})
      cases.push_back(*parse_bench_name(fmt::format("copy/simt/{}/ctas:{}", bytes, ctas)));
  }
  const CalibrationResult r = calibrate({synthetic(cases, truth, 0.01)}, base);
  const Hardware& h = r.hardware;
  EXPECT_NEAR(h.effective_link_GBps(), 400, 400 * 0.03);
  EXPECT_NEAR(h.fit.nccl_efficiency, 0.85, 0.85 * 0.03);
  EXPECT_NEAR(h.fit.nccl_per_cta_GBps, 25, 25 * 0.03);
  EXPECT_NEAR(h.fit.per_cta_copy_GBps, 90, 90 * 0.03);
  EXPECT_NEAR(h.fit.link_latency_us, 1.0, 0.2);
  EXPECT_NEAR(h.fit.nccl_launch_us, 12, 1.0);
  EXPECT_NEAR(h.fit.tma_launch_us, 3, 0.5);
  // Only the model's parameters are fitted: the device's spec (its HBM and link bandwidth) stays the base's.
  EXPECT_EQ(nlohmann::json(h)["spec"], nlohmann::json(base)["spec"]);
  for (const auto& p : r.parameters) {
    EXPECT_EQ(p.subset, "comm");
    EXPECT_GT(p.points, 0) << p.name;
    EXPECT_LT(p.rms_rel_error, 0.02) << p.name;  // 1% noise
  }
  // The fitted profile predicts the cases within the noise.
  EXPECT_LT(validate_benchmarks({synthetic(cases, truth, 0.01)}, h).mape, 1.5);
}

TEST(Calibrate, RecoversContentionWeights) {
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.hbm_contention = 2.0;
  truth.fit.shared_sm_penalty = 0.5;
  const std::vector<BenchCase> cases =
      overlap_cases({"tile-signal", "green-context", "tma", "decomposed"}, {"allreduce", "reducescatter"},
                    {"8192x8192x8192", "4096x8192x8192", "8192x8192x2048"});
  const CalibrationResult r = calibrate({synthetic(cases, truth, 0.002)}, base);
  EXPECT_NEAR(r.hardware.fit.hbm_contention, 2.0, 0.2);
  EXPECT_NEAR(r.hardware.fit.shared_sm_penalty, 0.5, 0.05);
  ASSERT_TRUE(find(r, "shared_sm_penalty"));
  EXPECT_LT(find(r, "shared_sm_penalty")->rms_rel_error, 0.005);
}

// The overlap fit puts a collective's slower per-CTA rate inside the overlapped modes into
// overlap_nccl_rate_factor and leaves the standalone rate where the collectives put it: a truth whose NCCL channels
// move 25 GB/s alone and 0.6 of that beside a GEMM, measured as collectives alone and as overlap cases (comm-heavy
// shapes, 8-32 comm SMs, tile-signal / green-context / decomposed). Before the factor existed the overlap fit
// re-fitted nccl_per_cta_GBps itself, and a collective alone was then predicted at the overlap rate.
TEST(Calibrate, OverlapFitLeavesTheStandaloneRates) {
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.nccl_per_cta_GBps = 25;
  truth.fit.overlap_nccl_rate_factor = 0.6;
  std::vector<BenchCase> cases = overlap_cases({"tile-signal", "green-context", "decomposed"},
                                               {"allreduce", "reducescatter"}, {"8192x8192x1024", "8192x8192x2048"});
  for (const char* op : {"allreduce", "reducescatter"})
    for (int64_t bytes = int64_t(1) << 22; bytes <= (int64_t(1) << 30); bytes *= 4)
      for (int ctas : {4, 8, 16, 32})
        cases.push_back(*parse_bench_name(fmt::format("coll/nccl/{}/{}/world:8/ctas:{}", op, bytes, ctas)));
  const CalibrationResult r = calibrate({synthetic(cases, truth, 0.002)}, base);
  EXPECT_NEAR(r.hardware.fit.nccl_per_cta_GBps, 25, 25 * 0.03);
  expect_overlap_fit(r, &ModelParams::overlap_nccl_rate_factor, "overlap_nccl_rate_factor", 0.6, 0.6 * 0.05);
}

// The overlap fit tells a collective slowed only beside the GEMM (beside_gemm_rate_factor) from one slowed throughout
// the overlapped modes (overlap_nccl_rate_factor): a truth whose NCCL channels move 0.4 of their rate while the GEMM
// runs and their full rate after it, on shapes whose collective runs partly beside and partly after the GEMM.
TEST(Calibrate, OverlapFitRecoversTheRateBesideTheGemm) {
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.beside_gemm_rate_factor = 0.4;
  const std::vector<BenchCase> cases =
      overlap_cases({"tile-signal", "green-context", "decomposed"}, {"allreduce", "reducescatter"},
                    {"8192x8192x1024", "8192x8192x4096", "8192x8192x8192"});
  const CalibrationResult r = calibrate({synthetic(cases, truth, 0.002)}, base);
  expect_overlap_fit(r, &ModelParams::beside_gemm_rate_factor, "beside_gemm_rate_factor", 0.4, 0.4 * 0.05);
  expect_overlap_fit(r, &ModelParams::overlap_nccl_rate_factor, "overlap_nccl_rate_factor", 1.0, 0.05);
}

TEST(Calibrate, RecoversTheOperatorGemmFactor) {
  // Synthetic bench_overlap files: every case's operator time ("us") and its GEMM-alone time ("t_gemm_us", the
  // counter bench_overlap records) from a truth whose GEMMs run at 0.88 of their sustained compute time inside the
  // operator, with 0.2% noise. The fit (on the GEMM-alone times, least squares in the relative error) recovers 0.88
  // to within 0.5%, whatever the base factor; the contention weights are then fitted on top of it.
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.operator_gemm_factor = 0.88;
  truth.fit.hbm_contention = 2.0;
  truth.fit.shared_sm_penalty = 0.5;
  Noise noise{777, 0.002};
  auto overlap_file = [&](bool with_t_gemm, int sustain_ms = 0) {
    nlohmann::json doc{{"benchmarks", nlohmann::json::array()}};
    for (const char* mode : {"sequential", "decomposed", "tile-signal", "green-context", "tma"}) {
      for (const char* shape : {"8192x8192x8192", "4096x8192x8192", "8192x8192x2048"}) {
        for (int comm : {8, 16, 24, 32}) {
          const std::string name = fmt::format("overlap/{}/allreduce/{}/world:8/comm_sms:{}", mode, shape,
                                               std::string(mode) == "sequential" ? 132 : comm);
          const BenchCase c = *parse_bench_name(name);
          const ModeEstimate e = estimate(c.problem(), c.plan(truth), truth);
          nlohmann::json b{
              {"name", name + "/manual_time"}, {"run_type", "iteration"}, {"iterations", 5},
              {"real_time", e.total_us},       {"time_unit", "us"},       {"us", e.total_us * (1 + noise())}};
          if (with_t_gemm) b["t_gemm_us"] = e.gemm_alone_us * (1 + noise());
          if (sustain_ms > 0) b["sustain_ms"] = sustain_ms;
          doc["benchmarks"].push_back(b);
          if (std::string(mode) == "sequential") break;
        }
      }
    }
    return doc;
  };
  for (double start : {1.0, 0.7, 1.3}) {
    Hardware b = base;
    b.fit.operator_gemm_factor = start;
    const CalibrationResult r = calibrate({overlap_file(true)}, b);
    const auto* f = find(r, "operator_gemm_factor");
    ASSERT_TRUE(f) << start;
    EXPECT_NEAR(f->value, 0.88, 0.88 * 0.005) << start;
    EXPECT_DOUBLE_EQ(r.hardware.fit.operator_gemm_factor, f->value);
    EXPECT_EQ(f->points, 3 + 4 * 3 * 4);  // 3 sequential cases, 48 others
    EXPECT_LT(f->rms_rel_error, 0.004);
    EXPECT_NEAR(r.hardware.fit.hbm_contention, 2.0, 0.2) << start;
    EXPECT_NEAR(r.hardware.fit.shared_sm_penalty, 0.5, 0.05) << start;
  }
  // Without the counter nothing informs it: the base value stays, and a note says so.
  const CalibrationResult none = calibrate({overlap_file(false)}, base);
  EXPECT_EQ(find(none, "operator_gemm_factor"), nullptr);
  EXPECT_EQ(none.hardware.fit.operator_gemm_factor, 1.0);
  EXPECT_NE(none.summary().find("operator_gemm_factor held at the base value"), std::string::npos);
  // Cases timed in bench_overlap's sustained regime (counter sustain_ms > 0) time their GEMM back to back, not in
  // the operator's regime: they are left out, with a note.
  const CalibrationResult sustained = calibrate({overlap_file(true, 20)}, base);
  EXPECT_EQ(find(sustained, "operator_gemm_factor"), nullptr);
  EXPECT_EQ(sustained.hardware.fit.operator_gemm_factor, 1.0);
  EXPECT_NE(sustained.summary().find("51 overlap cases timed in the sustained regime"), std::string::npos)
      << sustained.summary();
}

TEST(Calibrate, HeldOutGemmValidation) {
  // The held-out check `ovl validate` runs on real data: fit on the full device for a few shapes, predict other
  // shapes on partitions of 8 to 128 SMs. Here the "measurements" come from a model with other parameters.
  const Hardware base = builtin_hardware("h200");
  Hardware truth = base;
  truth.fit.gemm_efficiency = 0.75;
  truth.fit.tile_epilogue_us = 0.3;
  truth.fit.launch_us = 5;
  std::vector<BenchCase> fit, held_out;
  for (const auto& s : {std::array<int64_t, 3>{8192, 8192, 8192},
                        {4096, 4096, 4096},
                        {2048, 2048, 8192},
                        {1024, 8192, 1024},
                        {8192, 8192, 1024}}) {
    fit.push_back(gemm_case("ovl", s[0], s[1], s[2], 132));
  }
  for (const auto& s : {std::array<int64_t, 3>{6144, 6144, 6144}, {4096, 14336, 4096}, {16384, 4096, 2048}}) {
    for (int sms = 8; sms <= 128; sms += 8) held_out.push_back(gemm_case("ovl", s[0], s[1], s[2], sms));
  }
  const CalibrationResult r = calibrate({synthetic(fit, truth, 0.003)}, base);
  const ValidationReport before = validate_gemm({synthetic(held_out, truth, 0.003)}, base);
  const ValidationReport after = validate_gemm({synthetic(held_out, truth, 0.003)}, r.hardware);
  EXPECT_EQ(after.cases.size(), held_out.size());
  EXPECT_GT(before.mape, 4.0);
  EXPECT_LT(after.mape, 1.5);
  EXPECT_NEAR(after.mape_by_kind.at("gemm"), after.mape, 1e-9);
  EXPECT_NE(after.summary().find("MAPE all"), std::string::npos);
}

}  // namespace
}  // namespace ovl
