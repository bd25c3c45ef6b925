// Calibration: fit a Hardware profile's model parameters (its `fit`) to Google Benchmark JSON by least squares, and
// validation: predict each measured case and report the error. `ovl calibrate` and `ovl validate` are built on these.
// docs/model.md lists the benchmark names and counters read and which parameters each subset fits.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ovl/tools/bench_names.hpp"
#include "ovl/model/hardware.hpp"

namespace ovl {

// One measured case from a benchmark file: the time per iteration in microseconds (`real_time` in `time_unit`;
// for overlap cases the "us" counter when present), the median over repetitions when there are several.
struct Measurement {
  BenchCase bench;
  std::string name;  // the benchmark's own name
  double us = 0;
  std::map<std::string, double> counters;  // the numeric user counters (tflops, algbw_GBps, busbw_GBps, us, ...)
  // Set for a collective or overlap case of more than one rank measured with virtual ranks on one GPU: the file's
  // context says "world_backend": "loopback" or, without that key, has fewer GPUs ("gpu_count") than the case's
  // world. The value is the share of the collective the benchmark played ("loopback_share" in the context; every
  // rank's when absent). "world_backend": "threads" or "mpi" marks real ranks on distinct GPUs.
  std::optional<LoopbackShare> loopback;
  // The link its world ran over, where the file's context has "link_profile" (the LinkProfile's JSON, as
  // bench_overlap records OVL_LINK_PROFILE): for an overlap case of rank 0's loopback share, the link its peers'
  // traffic was paced to; for a collective or overlap case of real ranks, the link as measured on that machine.
  std::optional<LinkProfile> link;
};

// The profile a measurement ran on: `hw`, loopback_hardware(hw, world, share, link) for a loopback measurement, or
// with_link(hw, link) for real ranks over a measured link.
Hardware measurement_hardware(const Measurement& m, const Hardware& hw);

// Reads every benchmark whose name parse_bench_name() knows, from any number of Google Benchmark JSON documents
// (each {"benchmarks": [...]}). Errored runs, spread aggregates and unknown names are skipped (with a note in
// `notes` when given). Throws ovl::Error for a document without a "benchmarks" array or an entry with a bad
// time, naming the benchmark.
std::vector<Measurement> read_measurements(const std::vector<nlohmann::json>& benchmark_files,
                                           std::vector<std::string>* notes = nullptr);

// The GPU the files' contexts name ("gpu"; "" when none names one). A fit or a validation is of one GPU: throws
// ovl::Error when two files name different GPUs, naming the files by `names` (else "benchmark file N").
std::string benchmark_files_gpu(const std::vector<nlohmann::json>& benchmark_files,
                                const std::vector<std::string>& names = {});
// The profile a fit of these files starts from when none is given: the built-in profile of the GPU they name
// (benchmark_files_gpu), the H200's when none names one. Throws ovl::Error naming the GPU when it has no built-in
// profile: a fit from another GPU's parameters would be silently wrong.
Hardware calibration_base(const std::vector<nlohmann::json>& benchmark_files,
                          const std::vector<std::string>& names = {});

// The model's prediction of one case, in microseconds; nullopt when the model cannot run it on `hw` (e.g. more
// SMs than the profile has), and then *why (when given) says what it refused. GEMM cases use our default tile
// (128x256) in swizzled order; overlap cases use default_plan(mode, problem, hw, comm_sms) (bf16, B as N x K, one
// node).
std::optional<double> predict_us(const BenchCase& bench, const Hardware& hw, std::string* why = nullptr);

struct FittedParameter {
  std::string name;          // the ModelParams field
  double value = 0;          // fitted
  double base_value = 0;     // before the fit
  int points = 0;            // measurements that informed it
  double rms_rel_error = 0;  // RMS relative error of the fitted model over the subset that fit it
  std::string subset;        // "gemm/ovl", "gemm/cublas", "gemm" (both), "comm", "overlap"
};

struct CalibrationResult {
  Hardware hardware;                        // `base` with fitted parameters replaced (its spec is base's)
  std::vector<FittedParameter> parameters;  // only the parameters some data informed
  std::vector<std::string> notes;           // skipped cases, parameters held at the base value, clamps
  int measurements = 0;                     // cases read
  std::string summary() const;              // a table: parameter, base, fitted, points, RMS rel. error, subset
};

// Fits what each subset of the measurements can inform (see docs/model.md), in the profile's `fit` only: the
// device's spec (HBM and link bandwidth among it) is the base's and holds in every fit.
//   gemm/ovl*  : gemm_efficiency, tile_epilogue_us                  (time = launch + waves x (flops_per_tile x
//                                                                    clock / (rate x eff) + epilogue))
//   gemm/cublas: cublas_efficiency, cublas_tile_epilogue_us, cublas_partition_penalty
//   gemm (both): launch_us, clock_knee_sms, clock_exponent           (one joint linear fit inside a grid search
//                                                                    over the clock curve)
//   coll, copy : nccl_launch_us, tma_launch_us, link_latency_us, per_cta_copy_GBps (copies),
//                tma_push_per_cta_GBps, tma_pull_per_cta_GBps, simt_per_cta_GBps (each impl's coll cases),
//                link_efficiency, nccl_efficiency, nccl_per_cta_GBps
//                                                                    (time = launch + latency x steps + bytes x
//                                                                    factor / bandwidth of the binding resource;
//                                                                    loopback cases on their scaled profile)
//   overlap    : operator_gemm_factor                              (the cases' t_gemm_us counter against the
//                                                                    plan's gemm_alone_us, least squares)
//                then hbm_contention, shared_sm_penalty, overlap_tma_rate_factor (the tma mode's mover),
//                overlap_nccl_rate_factor, beside_gemm_rate_factor, tma_group_us, nccl_group_us
//                                                                    (Gauss-Newton on the mode estimates)
// Throws ovl::Error when no measurement is usable.
CalibrationResult calibrate(const std::vector<nlohmann::json>& benchmark_files, const Hardware& base);
CalibrationResult calibrate_measurements(const std::vector<Measurement>& measurements, const Hardware& base);

struct ValidationCase {
  std::string name;
  BenchKind kind = BenchKind::kGemm;
  double measured_us = 0;
  double predicted_us = 0;
  double rel_error = 0;  // (predicted - measured) / measured
};

struct ValidationReport {
  std::vector<ValidationCase> cases;
  double mape = 0;                             // mean |rel_error| over all cases, in percent
  std::map<std::string, double> mape_by_kind;  // "gemm", "coll", "copy", "overlap" -> percent
  std::vector<std::string> notes;              // cases the model could not predict
  std::string summary() const;                 // a table of the cases, then the MAPE lines
};

// Predicts every measured case (only those of `kind` when given) with `hw` and reports the errors: the held-out
// check is calibrate() on one set of files, then validate_benchmarks() on another.
ValidationReport validate_benchmarks(const std::vector<nlohmann::json>& benchmark_files, const Hardware& hw,
                                     std::optional<BenchKind> kind = std::nullopt);
ValidationReport validate_measurements(const std::vector<Measurement>& measurements, const Hardware& hw,
                                       std::optional<BenchKind> kind = std::nullopt);
// The GEMM cases only (bench_gemm JSON).
inline ValidationReport validate_gemm(const std::vector<nlohmann::json>& benchmark_files, const Hardware& hw) {
  return validate_benchmarks(benchmark_files, hw, BenchKind::kGemm);
}

}  // namespace ovl
