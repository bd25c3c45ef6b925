// PlanCache: the plans chosen for problems, kept across processes in one JSON file, so that a shape tuned once
// (measured tuning, `ovl tune`) costs nothing the next time.
//
// An entry is found by problem (Problem::name(): op, shape, dtype, layout, world size), world kind ("real",
// "loopback:rank0", "loopback:whole-world"), GPU name, SM count and library version. Entries of another GPU, SM
// count or version stay in the file (another machine may share it) but are never returned.
//
// The file: {"format": "ovl-plan-cache", "entries": [{"problem", "world", "gpu", "sm_count", "version", "plan",
// "chosen_by", "predicted_us", "measured_us", "sequential_us", "tuning_ms", "candidates": [{"plan", "predicted_us",
// "measured_us"}]}]}.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ovl/model/plan.hpp"

namespace ovl {

// The library's version ("0.1.0"): a plan chosen by another version may not be what this one would run.
std::string_view library_version();

// How a plan was chosen: by the planner's prediction alone, or by timing candidates on the GPU.
enum class ChosenBy { kPredicted, kMeasured };
inline constexpr Named<ChosenBy> kChosenByNames[] = {{ChosenBy::kPredicted, "predicted"},
                                                     {ChosenBy::kMeasured, "measured"}};
std::string_view to_string(ChosenBy by);  // "predicted", "measured"
ChosenBy parse_chosen_by(std::string_view text);

struct TunedCandidate {
  Plan plan;
  double predicted_us = 0;  // the planner's prediction (0: not predicted)
  double measured_us = 0;   // the median of the timed runs (0: not measured)
  // Measured tuning's confirmation (tuning_finalists): the median of the second timing of a finalist and of the best
  // sequential plan it was timed against; 0: not timed again.
  double confirmed_us = 0;
};

// One choice: the plan, how it was chosen and what it cost to choose.
struct PlanChoice {
  Plan plan;
  ChosenBy chosen_by = ChosenBy::kPredicted;
  double predicted_us = 0;   // the planner's prediction for `plan`
  double measured_us = 0;    // kMeasured: the plan's measured time
  // kPredicted: the best sequential candidate's predicted time (the baseline); kMeasured: the fastest plan of mode
  // sequential timed (the baseline, or in loopback ovl's TMA collective after the GEMM), which an overlapped plan
  // must beat by tuning_min_gain.
  double sequential_us = 0;
  double tuning_ms = 0;      // wall time of the choice: planning, and timing the candidates (kMeasured)
  bool from_cache = false;   // read from a plan cache file rather than chosen in this process
  std::vector<TunedCandidate> candidates;  // kMeasured: every plan timed, in the order they were tried
};

// Measured tuning's confirmation (Context::plan_for): after every candidate is timed once, the overlapped plans that
// won are timed again beside the best sequential plan.
// The finalists: indices into `candidates` of the overlapped plans (mode not sequential) that beat the fastest
// sequential candidate by min_gain, fastest first (ties in candidate order), at most 3. Empty when none does; throws
// ovl::Error when no candidate is sequential. Not only the plans near the fastest: a plan timed too fast once (an
// outlier the confirmation then rejects) leaves the next ones to be confirmed instead of the sequential plan.
std::vector<size_t> tuning_finalists(const std::vector<TunedCandidate>& candidates, double min_gain);
// The finalist kept, as an index into `finalists`: among those whose second timing (confirmed_us) is faster than
// that of the best sequential plan candidates[sequential] (timed in the same rounds) by min_gain / 2, the lowest sum
// of its two times (measured_us + confirmed_us; ties keep the earlier finalist); -1 when none is (keep the
// sequential plan). Throws ovl::Error when an index is out of range, candidates[sequential] is not sequential, or one
// of them was not timed again (confirmed_us 0).
int tuning_pick(const std::vector<TunedCandidate>& candidates, const std::vector<size_t>& finalists, size_t sequential,
                double min_gain);

struct PlanCacheKey {
  std::string problem;  // Problem::name()
  std::string world;    // "real", "loopback:rank0", "loopback:whole-world"
  std::string gpu;      // the device's name ("NVIDIA H200")
  int sm_count = 0;
  std::string version = std::string(library_version());
  bool operator==(const PlanCacheKey&) const = default;
};

class PlanCache {
 public:
  // Reads `path`. A missing file is an empty cache. A file that is not a plan cache, or any malformed entry, is an
  // ovl::Error naming the file, the entry and the field.
  static PlanCache load(const std::string& path);

  // The choice stored under `key`; nullptr when none.
  const PlanChoice* find(const PlanCacheKey& key) const;
  // How many entries `find` can never return for this GPU, SM count and version (another machine's or version's).
  int foreign_entries(const PlanCacheKey& mine) const;
  // Adds or replaces the entry of `key`.
  void put(const PlanCacheKey& key, const PlanChoice& choice);
  size_t size() const { return entries_.size(); }

  // Writes the whole cache to `path` atomically (a temporary file beside it, then a rename); an ovl::Error naming
  // the path when it cannot.
  void save(const std::string& path) const;

  nlohmann::json to_json() const;
  // `source` names the file in errors.
  static PlanCache from_json(const nlohmann::json& j, const std::string& source);

 private:
  std::vector<std::pair<PlanCacheKey, PlanChoice>> entries_;
};

}  // namespace ovl
