// The benchmark names bench_gemm / bench_collectives / bench_overlap write, parsed into cases the model can predict.
// `ovl calibrate` and `ovl validate` read Google Benchmark JSON through these; docs/model.md lists the names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ovl/model/estimate.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"

namespace ovl {

enum class BenchKind { kGemm, kCollective, kCopy, kOverlap };
inline constexpr Named<BenchKind> kBenchKindNames[] = {
    {BenchKind::kGemm, "gemm"}, {BenchKind::kCollective, "coll"}, {BenchKind::kCopy, "copy"}, {BenchKind::kOverlap, "overlap"}};
std::string_view to_string(BenchKind kind);  // "gemm", "coll", "copy", "overlap"

// One benchmark case. Names (Google Benchmark may append "/manual_time", "/iterations:N", "/repeats:N",
// "/threads:N", "/min_time:X" and "_mean" / "_median"; those are stripped):
//   gemm/<impl>/<M>x<N>x<K>/<layout>/sms:<n>                impl ovl | ovl-nosignal | ovl-nosk | cublas; layout nn | nt
//   coll/<impl>/<op>/<bytes>/world:<W>/ctas:<c>             impl nccl | nccl-nvls | tma-push | tma-pull | simt;
//                                                           op allreduce | reducescatter | allgather
//   copy/<impl>/<bytes>/ctas:<c>                            impl: any word (simt, tma, ...)
//   overlap/<mode>/<op>/<M>x<N>x<K>/world:<W>/comm_sms:<c>  mode as to_string(Mode); op allreduce | reducescatter
//                                                           | allgather or the Problem op names
//   overlap/<mode>/<op>/<M>x<N>x<K>/world:<W>/comm_sms:<c>/groups:<g>   mode tile-signal | green-context | tma:
//                                                           g tile groups of whole row bands (see plan())
//   either overlap form ending in /dtype:<t>                the inputs' type t (e4m3: FP8 A and B, bf16 C); absent:
//                                                           bf16
struct BenchCase {
  BenchKind kind = BenchKind::kGemm;
  std::string impl;                                // gemm/coll/copy implementation; overlap: the mode's name
  int64_t m = 0, n = 0, k = 0;                     // gemm, overlap
  BLayout b_layout = BLayout::kNxK;                // gemm
  int sms = 0;                                     // gemm
  Collective collective = Collective::kAllReduce;  // coll; overlap: the op's collective
  Op op = Op::kGemmAllReduce;                      // overlap
  Mode mode = Mode::kSequential;                   // overlap
  int64_t bytes = 0;                               // coll, copy
  int world = 1;                                   // coll, overlap
  int ctas = 0;                                    // coll, copy
  int comm_sms = 0;                                // overlap
  int groups = 0;                                  // overlap, tile-signal / green-context / tma: 0 = default_plan's
  DType dtype = DType::kBF16;                      // overlap: the inputs' type (Problem::dtype)
  // overlap with groups: the GEMM's tile order (/order:swizzle: groups of whole swizzle bands, swizzle_band_groups).
  TileOrder order = TileOrder::kRowBand;
  // gemm, ours: the stream-K plan the run used (bench_gemm's counters sk_tiles, sk_splits; read_measurements sets
  // it); not part of the name.
  TailPlan stream_k;

  // ovl, ovl-nosignal, ovl-nosk and ovl-fp16 -> kOvl; cublas and cublas-fp16 -> kCublas. The model has one rate for
  // bf16 and fp16 (the same tensor-core rate and element size), so an fp16 case is timed like its bf16 twin.
  GemmImpl gemm_impl() const;
  CommAlgo comm_algo() const;  // coll: the CommAlgo named by impl (nccl, nccl-nvls, tma-push, tma-pull, simt)
  std::string name() const;  // the canonical name (parse_bench_name(name()) gives the case back)
  // Overlap cases: the problem and the plan the benchmark ran. bench_overlap records both in the case's label (JSON
  // {"problem", "plan", ...}; read_measurements sets `ran`), and they are taken from there. A file without them
  // (written before bench_overlap recorded them) gets them from the name: `dtype` (C bf16), B as N x K, all ranks on
  // one node, default_plan(mode, problem(), hw, comm_sms); with groups = g > 0 its tile groups are band_groups(g) (g
  // groups of whole row bands, as even as the bands allow) and a tile-signal GEMM runs on sm_count - comm_ctas SMs,
  // leaving the collective its CTAs' SMs while the GEMM runs (FlashOverlap's configuration). Throws when g exceeds the
  // bands.
  struct Ran {
    Problem problem;
    Plan plan;
  };
  std::optional<Ran> ran;
  // An overlap case of this problem and plan (kind, op, shape, world, mode, comm_sms and groups from them; `ran` set).
  static BenchCase of_run(const Problem& problem, const Plan& plan);
  Problem problem() const;
  Plan plan(const Hardware& hw) const;
};

// Nullopt when `name` is not one of the forms above (other benchmarks in the same file are simply not ours);
// also nullopt for the "_stddev" / "_cv" aggregates.
std::optional<BenchCase> parse_bench_name(std::string_view name);

}  // namespace ovl
