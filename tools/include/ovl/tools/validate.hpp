// Predicted versus measured: `ovl validate` as a library call.
//
// Every benchmark case the model knows (ovl/tools/bench_names.hpp) is predicted by the closed-form model and, for
// overlap cases, by the simulator, and compared with its measured time. Reported: the count, MAPE, P90 and
// maximum absolute percentage error per predictor; and, for each problem measured under several modes or comm
// SM counts, whether the predicted best is the measured best (top-1) and the regret
// (measured time of the predicted best - measured best) / measured best.
//
// Loopback: a file whose context says "world_backend": "loopback" (or, without that key, fewer GPUs (`gpu_count`)
// than a case's world) was measured with virtual ranks on one GPU; its collective and overlap cases are predicted on
// loopback_hardware(hw, world, share), with the share the file's context records ("loopback_share", bench_overlap)
// or every rank's (bench_collectives). "threads" / "mpi" are real ranks on distinct GPUs. Loopback and real cases
// are never ranked together.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ovl/tools/bench_names.hpp"
#include "ovl/model/hardware.hpp"

namespace ovl::sim {

struct CaseResult {
  std::string name;
  BenchKind kind = BenchKind::kGemm;
  std::string problem;  // the choice group: cases with the same problem differ only by mode / comm SMs
  bool loopback = false;
  double measured_us = 0;
  std::optional<double> model_us;
  std::optional<double> sim_us;  // overlap cases only
};

struct ErrorStats {
  int cases = 0;
  double mape = 0, p90_ape = 0, max_ape = 0;  // percent
};

struct RankingStats {
  int problems = 0;         // problems with at least two measured choices
  double top1 = 0;          // fraction of problems whose predicted best is the measured best
  double regret_mean = 0;   // fraction (0.03 = 3%)
  double regret_max = 0;
};

struct ValidationResult {
  std::string hardware;  // the profile's name
  std::vector<CaseResult> cases;
  ErrorStats model;       // every case the model predicted
  ErrorStats simulator;   // overlap cases
  ErrorStats model_overlap;  // the model on the same cases as the simulator, for a fair comparison
  RankingStats ranking_simulator;
  RankingStats ranking_model;
  std::vector<std::string> notes;
  std::string summary() const;
};

// `profile`: the hardware to predict with; without one, the built-in profile of the GPU named in the first
// file's context ("gpu"). Throws ovl::Error when no case is usable or the GPU has no built-in profile.
ValidationResult validate(const std::vector<nlohmann::json>& benchmark_files, const std::optional<Hardware>& profile);

ErrorStats error_stats(const std::vector<double>& abs_percent_errors);

// {"cases", "mape", "p90_ape", "max_ape", "top1", "regret_mean", "regret_max" (the headline: model MAPE over all
// cases, ranking by the simulator), "model": {...}, "simulator": {...}, "ranking_model": {...}, "rows": [...]}
void to_json(nlohmann::json& j, const ValidationResult& r);

}  // namespace ovl::sim
