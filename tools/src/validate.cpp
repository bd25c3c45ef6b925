#include "ovl/tools/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "ovl/error.hpp"
#include "ovl/tools/calibrate.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::sim {
namespace {

std::string problem_key(const BenchCase& b) {
  return fmt::format("{}/{}x{}x{}/world:{}", to_string(b.op), b.m, b.n, b.k, b.world);
}

// Picks, per problem, the case a predictor ranks best and compares its measured time with the measured best.
RankingStats ranking(const std::vector<CaseResult>& cases, bool by_simulator) {
  std::map<std::string, std::vector<const CaseResult*>> groups;
  for (const CaseResult& c : cases) {
    if (c.kind != BenchKind::kOverlap) continue;
    if (!(by_simulator ? c.sim_us : c.model_us)) continue;
    groups[c.problem].push_back(&c);
  }
  RankingStats s;
  int hits = 0;
  double regret_sum = 0;
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    const auto predicted = [&](const CaseResult* c) { return by_simulator ? *c->sim_us : *c->model_us; };
    const CaseResult* pred_best = *std::min_element(members.begin(), members.end(), [&](auto* a, auto* b) {
      return predicted(a) < predicted(b);
    });
    const CaseResult* meas_best = *std::min_element(members.begin(), members.end(), [](auto* a, auto* b) {
      return a->measured_us < b->measured_us;
    });
    const double regret = (pred_best->measured_us - meas_best->measured_us) / meas_best->measured_us;
    ++s.problems;
    hits += pred_best == meas_best ? 1 : 0;
    regret_sum += regret;
    s.regret_max = std::max(s.regret_max, regret);
  }
  if (s.problems > 0) {
    s.top1 = double(hits) / s.problems;
    s.regret_mean = regret_sum / s.problems;
  }
  return s;
}

}  // namespace

ErrorStats error_stats(const std::vector<double>& ape) {
  ErrorStats s;
  s.cases = static_cast<int>(ape.size());
  if (ape.empty()) return s;
  for (double e : ape) OVL_CHECK(std::isfinite(e) && e >= 0, "error_stats: an absolute percentage error of {}", e);
  std::vector<double> sorted = ape;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double e : sorted) sum += e;
  s.mape = sum / double(sorted.size());
  // P90 by the nearest-rank method: the smallest value with at least 90% of the values at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * double(sorted.size())));
  s.p90_ape = sorted[std::max<size_t>(rank, 1) - 1];
  s.max_ape = sorted.back();
  return s;
}

ValidationResult validate(const std::vector<nlohmann::json>& files, const std::optional<Hardware>& profile) {
  OVL_CHECK(!files.empty(), "validate: no measurement files given");
  Hardware hw;
  const std::string gpu = benchmark_files_gpu(files);  // one GPU's measurements, whichever profile predicts them
  if (profile) {
    hw = *profile;
  } else {
    OVL_CHECK(!gpu.empty() && gpu != "none",
              "validate: the measurements name no GPU in their context; pass --profile FILE");
    hw = hardware_for_device_name(gpu);
  }
  hw.validate();

  ValidationResult r;
  r.hardware = hw.name;
  std::vector<double> model_ape, sim_ape, model_overlap_ape;
  for (const nlohmann::json& file : files) {
    std::vector<std::string> notes;
    const std::vector<Measurement> ms = read_measurements({file}, &notes);
    r.notes.insert(r.notes.end(), notes.begin(), notes.end());
    for (const Measurement& m : ms) {
      if (!(m.us > 0)) {
        r.notes.push_back(fmt::format("{}: no positive time measured, skipped", m.name));
        continue;
      }
      const BenchCase& b = m.bench;
      CaseResult c;
      c.name = m.name;
      c.kind = b.kind;
      c.measured_us = m.us;
      c.loopback = m.loopback.has_value();
      const Hardware case_hw = measurement_hardware(m, hw);
      std::string why;
      c.model_us = predict_us(b, case_hw, &why);
      if (b.kind == BenchKind::kOverlap) {
        c.problem = problem_key(b) + (c.loopback ? " (loopback)" : "");
        try {
          const Problem p = b.problem();
          const Plan plan = b.plan(case_hw);
          SimOptions quiet;
          quiet.record_timeline = quiet.record_counters = quiet.record_steps = false;
          c.sim_us = simulate(p, plan, case_hw, quiet).total_us;
        } catch (const Error& e) {
          r.notes.push_back(fmt::format("{}: the simulator cannot run it: {}", m.name, e.message()));
        }
      }
      if (!c.model_us)
        r.notes.push_back(fmt::format("{}: the model cannot predict it on {}: {}", m.name, case_hw.name, why));
      const auto ape = [&](double p) { return 100.0 * std::abs(p - c.measured_us) / c.measured_us; };
      if (c.model_us) model_ape.push_back(ape(*c.model_us));
      if (c.sim_us) {
        sim_ape.push_back(ape(*c.sim_us));
        if (c.model_us) model_overlap_ape.push_back(ape(*c.model_us));
      }
      r.cases.push_back(std::move(c));
    }
  }
  OVL_CHECK(!model_ape.empty() || !sim_ape.empty(), "validate: none of the {} measured cases could be predicted",
            r.cases.size());
  r.model = error_stats(model_ape);
  r.simulator = error_stats(sim_ape);
  r.model_overlap = error_stats(model_overlap_ape);
  r.ranking_simulator = ranking(r.cases, true);
  r.ranking_model = ranking(r.cases, false);
  return r;
}

std::string ValidationResult::summary() const {
  std::string s = fmt::format("{:<66} {:>10} {:>10} {:>7} {:>10} {:>7}\n", "case", "measured", "model", "err %",
                              "simulator", "err %");
  for (const CaseResult& c : cases) {
    const auto cell = [&](const std::optional<double>& p) {
      return p ? fmt::format("{:>10.1f} {:>7.1f}", *p, 100.0 * (*p - c.measured_us) / c.measured_us)
               : fmt::format("{:>10} {:>7}", "-", "-");
    };
    s += fmt::format("{:<66} {:>10.1f} {} {}{}\n", c.name, c.measured_us, cell(c.model_us), cell(c.sim_us),
                     c.loopback ? "  (loopback)" : "");
  }
  const auto stats = [](const char* who, const ErrorStats& e) {
    return fmt::format("{:<22} cases {:>4}  MAPE {:6.2f}%  P90 {:6.2f}%  max {:6.2f}%\n", who, e.cases, e.mape,
                       e.p90_ape, e.max_ape);
  };
  s += fmt::format("\nprofile: {}\n", hardware);
  s += stats("model (all cases)", model);
  s += stats("model (overlap cases)", model_overlap);
  s += stats("simulator (overlap)", simulator);
  const auto rank = [](const char* who, const RankingStats& k) {
    return fmt::format("{:<22} problems {:>3}  top-1 {:5.1f}%  regret mean {:5.2f}%  max {:5.2f}%\n", who, k.problems,
                       100.0 * k.top1, 100.0 * k.regret_mean, 100.0 * k.regret_max);
  };
  s += rank("ranking by simulator", ranking_simulator);
  s += rank("ranking by model", ranking_model);
  for (const std::string& n : notes) s += fmt::format("note: {}\n", n);
  return s;
}

void to_json(nlohmann::json& j, const ValidationResult& r) {
  const auto stats = [](const ErrorStats& e) {
    return nlohmann::json{{"cases", e.cases}, {"mape", e.mape}, {"p90_ape", e.p90_ape}, {"max_ape", e.max_ape}};
  };
  const auto rank = [](const RankingStats& k) {
    return nlohmann::json{
        {"problems", k.problems}, {"top1", k.top1}, {"regret_mean", k.regret_mean}, {"regret_max", k.regret_max}};
  };
  j = nlohmann::json::object();
  j["profile"] = r.hardware;
  j["cases"] = r.model.cases;
  j["mape"] = r.model.mape;
  j["p90_ape"] = r.model.p90_ape;
  j["max_ape"] = r.model.max_ape;
  j["top1"] = r.ranking_simulator.top1;
  j["regret_mean"] = r.ranking_simulator.regret_mean;
  j["regret_max"] = r.ranking_simulator.regret_max;
  j["model"] = stats(r.model);
  j["model_overlap"] = stats(r.model_overlap);
  j["simulator"] = stats(r.simulator);
  j["ranking_simulator"] = rank(r.ranking_simulator);
  j["ranking_model"] = rank(r.ranking_model);
  j["rows"] = nlohmann::json::array();
  for (const CaseResult& c : r.cases) {
    nlohmann::json row = {{"name", c.name}, {"kind", to_string(c.kind)}, {"measured_us", c.measured_us},
                          {"loopback", c.loopback}};
    if (c.model_us) row["model_us"] = *c.model_us;
    if (c.sim_us) row["sim_us"] = *c.sim_us;
    if (!c.problem.empty()) row["problem"] = c.problem;
    j["rows"].push_back(row);
  }
  j["notes"] = r.notes;
}

}  // namespace ovl::sim
