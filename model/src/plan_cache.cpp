#include "ovl/model/plan_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "json_fields.hpp"
#include "ovl/error.hpp"

#ifndef OVL_VERSION_STRING
#error "OVL_VERSION_STRING must be defined by the build (model/CMakeLists.txt)"
#endif

namespace ovl {

namespace {

constexpr const char* kFormat = "ovl-plan-cache";

nlohmann::json candidate_json(const TunedCandidate& c) {
  return {{"plan", c.plan},
          {"predicted_us", c.predicted_us},
          {"measured_us", c.measured_us},
          {"confirmed_us", c.confirmed_us}};
}

double read_time(const nlohmann::json& j, const char* field, const char* what) {
  const double v = detail::read_number(j, field, what);
  OVL_CHECK(v >= 0, "{} field \"{}\" = {} is negative", what, field, v);
  return v;
}

}  // namespace

std::string_view library_version() { return OVL_VERSION_STRING; }

std::string_view to_string(ChosenBy by) { return name_in(kChosenByNames, by); }
ChosenBy parse_chosen_by(std::string_view text) { return parse_name(kChosenByNames, text, "chosen_by"); }

const PlanChoice* PlanCache::find(const PlanCacheKey& key) const {
  for (const auto& [k, choice] : entries_)
    if (k == key) return &choice;
  return nullptr;
}

int PlanCache::foreign_entries(const PlanCacheKey& mine) const {
  int n = 0;
  for (const auto& e : entries_) {
    const PlanCacheKey& k = e.first;
    if (k.gpu != mine.gpu || k.sm_count != mine.sm_count || k.version != mine.version) ++n;
  }
  return n;
}

void PlanCache::put(const PlanCacheKey& key, const PlanChoice& choice) {
  PlanChoice stored = choice;
  stored.from_cache = false;
  // What load() refuses is refused here, by the same reader: a saved cache always loads (one bad entry written made
  // the whole file unreadable, every other entry with it).
  PlanCache one;
  one.entries_.emplace_back(key, stored);
  (void)from_json(one.to_json(), "a new entry");
  for (auto& [k, c] : entries_) {
    if (k == key) {
      c = std::move(stored);
      return;
    }
  }
  entries_.emplace_back(key, std::move(stored));
}

nlohmann::json PlanCache::to_json() const {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [k, c] : entries_) {
    nlohmann::json candidates = nlohmann::json::array();
    for (const TunedCandidate& t : c.candidates) candidates.push_back(candidate_json(t));
    entries.push_back({{"problem", k.problem},
                       {"world", k.world},
                       {"gpu", k.gpu},
                       {"sm_count", k.sm_count},
                       {"version", k.version},
                       {"plan", c.plan},
                       {"chosen_by", to_string(c.chosen_by)},
                       {"predicted_us", c.predicted_us},
                       {"measured_us", c.measured_us},
                       {"sequential_us", c.sequential_us},
                       {"tuning_ms", c.tuning_ms},
                       {"candidates", std::move(candidates)}});
  }
  return {{"format", kFormat}, {"entries", std::move(entries)}};
}

PlanCache PlanCache::from_json(const nlohmann::json& j, const std::string& source) {
  PlanCache cache;
  try {
    OVL_CHECK(j.is_object() && j.contains("format") && j["format"] == kFormat,
              "not a plan cache (its \"format\" must be \"{}\")", kFormat);
    const nlohmann::json& entries = detail::require_field(j, "entries", "plan cache");
    OVL_CHECK(entries.is_array(), "plan cache field \"entries\" = {} is not an array", json_excerpt(entries));
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string what = fmt::format("plan cache entry {}", i);
      const char* w = what.c_str();
      const nlohmann::json& e = entries[i];
      PlanCacheKey k;
      k.problem = detail::read_string(e, "problem", w);
      k.world = detail::read_string(e, "world", w);
      k.gpu = detail::read_string(e, "gpu", w);
      k.sm_count = detail::read_int32(e, "sm_count", w);
      OVL_CHECK(k.sm_count > 0, "{} field \"sm_count\" = {} must be positive", what, k.sm_count);
      k.version = detail::read_string(e, "version", w);
      PlanChoice c;
      try {
        c.plan = detail::require_field(e, "plan", w).get<Plan>();
      } catch (const Error& err) {
        OVL_FAIL("{} field \"plan\": {}", what, err.message());
      }
      try {
        c.chosen_by = parse_chosen_by(detail::read_string(e, "chosen_by", w));
      } catch (const Error& err) {
        OVL_FAIL("{}: {}", what, err.message());
      }
      c.predicted_us = read_time(e, "predicted_us", w);
      c.measured_us = read_time(e, "measured_us", w);
      c.sequential_us = read_time(e, "sequential_us", w);
      c.tuning_ms = read_time(e, "tuning_ms", w);
      const nlohmann::json& cands = detail::require_field(e, "candidates", w);
      OVL_CHECK(cands.is_array(), "{} field \"candidates\" = {} is not an array", what, json_excerpt(cands));
      for (size_t ci = 0; ci < cands.size(); ++ci) {
        const std::string cw = fmt::format("{} candidate {}", what, ci);
        TunedCandidate t;
        try {
          t.plan = detail::require_field(cands[ci], "plan", cw.c_str()).get<Plan>();
        } catch (const Error& err) {
          OVL_FAIL("{} field \"plan\": {}", cw, err.message());
        }
        t.predicted_us = read_time(cands[ci], "predicted_us", cw.c_str());
        t.measured_us = read_time(cands[ci], "measured_us", cw.c_str());
        // Absent in caches written before the confirmation was kept: not timed again, as far as the file knows.
        if (cands[ci].contains("confirmed_us")) t.confirmed_us = read_time(cands[ci], "confirmed_us", cw.c_str());
        c.candidates.push_back(std::move(t));
      }
      c.from_cache = true;
      OVL_CHECK(cache.find(k) == nullptr, "{} repeats the key of an earlier entry ({} on {})", what, k.problem, k.gpu);
      cache.entries_.emplace_back(std::move(k), std::move(c));
    }
  } catch (const Error& e) {
    OVL_FAIL("plan cache \"{}\": {}", source, e.message());
  } catch (const nlohmann::json::exception& e) {
    OVL_FAIL("plan cache \"{}\": {}", source, e.what());
  }
  return cache;
}

PlanCache PlanCache::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};  // no file yet: an empty cache
  // Behind the loaders' depth limit; trailing text after the document (two caches run together) is an error too.
  const nlohmann::json j =
      parse_json_document(read_file_text(path, "plan cache"), fmt::format("plan cache \"{}\"", path));
  return from_json(j, path);
}

void PlanCache::save(const std::string& path) const {
  // A temporary file of this writer's own (two processes saving one cache each rename a whole file into place).
  static std::atomic<unsigned> saves{0};
  const std::string tmp = fmt::format("{}.tmp.{}.{}.{}", path, ::getpid(),
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()), saves.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::trunc);
    OVL_CHECK(out.good(), "plan cache \"{}\": cannot write \"{}\"", path, tmp);
    out << to_json().dump(1) << "\n";
    OVL_CHECK(out.good(), "plan cache \"{}\": writing \"{}\" failed", path, tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    OVL_FAIL("plan cache \"{}\": cannot replace it with \"{}\"", path, tmp);
  }
}

std::vector<size_t> tuning_finalists(const std::vector<TunedCandidate>& candidates, double min_gain) {
  OVL_CHECK(std::isfinite(min_gain) && min_gain >= 0 && min_gain < 1, "tuning_finalists: min_gain = {}", min_gain);
  // measured_us = 0: not measured, neither the fastest sequential plan nor a finalist.
  const auto measured = [](const TunedCandidate& t) { return std::isfinite(t.measured_us) && t.measured_us > 0; };
  double sequential_us = INFINITY;
  for (const TunedCandidate& t : candidates)
    if (t.plan.mode == Mode::kSequential && measured(t)) sequential_us = std::min(sequential_us, t.measured_us);
  OVL_CHECK(std::isfinite(sequential_us), "tuning_finalists: none of the {} candidates is a measured sequential plan",
            candidates.size());
  std::vector<size_t> out;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].plan.mode != Mode::kSequential && measured(candidates[i]) &&
        candidates[i].measured_us <= sequential_us * (1 - min_gain))
      out.push_back(i);
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t x, size_t y) { return candidates[x].measured_us < candidates[y].measured_us; });
  if (out.size() > 3) out.resize(3);
  return out;
}

int tuning_pick(const std::vector<TunedCandidate>& candidates, const std::vector<size_t>& finalists, size_t sequential,
                double min_gain) {
  OVL_CHECK(std::isfinite(min_gain) && min_gain >= 0 && min_gain < 1, "tuning_pick: min_gain = {}", min_gain);
  auto timed_again = [&](size_t i, const char* what) {
    OVL_CHECK(i < candidates.size(), "tuning_pick: {} {} of {} candidates", what, i, candidates.size());
    OVL_CHECK(candidates[i].confirmed_us > 0, "tuning_pick: {} {} was not timed again (confirmed_us = 0)", what, i);
    return candidates[i].confirmed_us;
  };
  const double sequential_us = timed_again(sequential, "sequential candidate");
  OVL_CHECK(candidates[sequential].plan.mode == Mode::kSequential, "tuning_pick: candidate {} is not sequential",
            sequential);
  int pick = -1;
  double pick_sum = INFINITY;
  for (size_t i = 0; i < finalists.size(); ++i) {
    const double second_us = timed_again(finalists[i], "finalist");
    if (second_us > sequential_us * (1 - min_gain / 2)) continue;  // not confirmed
    const double sum = candidates[finalists[i]].measured_us + second_us;
    if (sum < pick_sum) {
      pick = int(i);
      pick_sum = sum;
    }
  }
  return pick;
}

}  // namespace ovl
