#include "ovl/sim/planner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl::sim {

namespace {

bool valid(const Plan& plan, const Problem& problem, const Hardware& hw) {
  try {
    plan.validate(problem, hw);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Groups of `per_group` units of `unit` tiles each (the last takes the rest).
std::vector<int> unit_groups(int64_t tiles, int64_t unit, int64_t per_group) {
  std::vector<int> groups;
  const int64_t size = unit * per_group;
  for (int64_t done = 0; done < tiles; done += size) groups.push_back(static_cast<int>(std::min(size, tiles - done)));
  return groups;
}

// Tile groupings searched for one plan: whole units x {1, 2, 4, ...} and the predictive grouping.
std::vector<std::vector<int>> groupings(const Problem& problem, const Plan& plan, const Hardware& hw, int max_groups) {
  const int64_t tiles = plan.tile_count(problem);
  const int64_t tiles_n = plan.tiles_n(problem);
  const int64_t unit = plan.tile_order == TileOrder::kSwizzle ? tiles_n * kSwizzleRows : tiles_n;
  const int64_t units = (tiles + unit - 1) / unit;
  std::vector<std::vector<int>> out;
  for (int64_t per = 1; per <= units; per *= 2) {
    if ((units + per - 1) / per > max_groups) continue;
    out.push_back(unit_groups(tiles, unit, per));
  }
  try {
    std::vector<int> predicted = predictive_groups(problem, plan, hw, unit, max_groups);
    if (std::find(out.begin(), out.end(), predicted) == out.end()) out.push_back(std::move(predicted));
  } catch (const Error&) {
    // The model cannot price this plan's collective (plan validation rejects the plan too).
  }
  return out;
}

// The transports that reach the link with few CTAs (the TMA collective, NCCL's symmetric kernels, the copy engines'
// sums) are offered on at most this many.
constexpr int kFewCommCtas = 32;

// `p` (planned on `comm` of `comm_options`) with comm_algo nccl-symmetric (NCCL's symmetric kernels, CTA policy
// efficiency), and for an AllGather also under CTA policy zero (NCCL's copy engines, whatever comm_ctas: offered once,
// with the first CTA count); none above kFewCommCtas. The planner's add() keeps those Plan::validate takes (one node,
// no loopback, and for GEMM+RS / AG+GEMM one unit: NCCL's symmetric kernels run whole-buffer collectives).
std::vector<Plan> nccl_symmetric_variants(const Plan& p, const Problem& problem, int comm,
                                          const std::vector<int>& comm_options) {
  std::vector<Plan> out;
  if (comm > kFewCommCtas) return out;
  const bool first_ctas = comm == comm_options.front();
  Plan v = p;
  v.comm_algo = CommAlgo::kNcclSymmetric;
  v.cta_policy = CtaPolicy::kEfficiency;
  out.push_back(v);
  if (problem.op == Op::kAllGatherGemm && first_ctas) {
    v.cta_policy = CtaPolicy::kZero;
    out.push_back(v);
  }
  return out;
}

std::vector<int> comm_sms_options(const Hardware& hw, const PlannerOptions& o) {
  const int g = std::max(1, hw.spec.sm_granularity);
  std::vector<int> out;
  const int lo = std::max(g, (o.min_comm_sms + g - 1) / g * g);
  const int hi = std::min(o.max_comm_sms, hw.spec.sm_count / 2);
  for (int c = lo; c <= hi; c += g) out.push_back(c);
  return out;
}

}  // namespace

std::vector<int> predictive_groups(const Problem& problem, const Plan& plan, const Hardware& hw, int64_t unit,
                                   int max_groups) {
  const int64_t tiles = plan.tile_count(problem);
  unit = std::clamp<int64_t>(unit, 1, tiles);
  max_groups = std::max(1, max_groups);
  const int grid = plan.gemm_sms > 0 ? plan.gemm_sms : hw.spec.sm_count;
  // GEMM time per tile in a wave (fluid: a wave of `grid` tiles per wave time), as estimate_gemm times the plan's
  // GEMM in the operator regime (clock, HBM floor and power state included).
  const double wave_us = estimate_gemm(GemmShape{problem.m, problem.n, problem.k, problem.dtype}, GemmImpl::kOvl, grid,
                                       plan.tile, plan.tile_order, hw, GemmRegime::kOperator)
                             .wave_us;
  const double gemm_us_per_tile = wave_us / grid;
  const double tile_bytes = static_cast<double>(plan.tile.m) * plan.tile.n * dtype_bytes(problem.output_dtype());
  const Collective c = collective_of(problem.op);
  const int ctas = plan.comm_ctas;
  auto comm_us = [&](int64_t n) {
    return estimate_collective(c, static_cast<int64_t>(static_cast<double>(n) * tile_bytes), problem.world,
                               plan.comm_algo, ctas, hw, problem.nodes())
        .us;
  };
  auto round_units = [&](double n) {
    // Clamped to the tile count first: a collective that dwarfs the GEMM (or a NaN) means "the rest in one".
    const double capped =
        std::isfinite(n) ? std::clamp(n, 0.0, static_cast<double>(tiles)) : static_cast<double>(tiles);
    return std::max<int64_t>(unit, std::llround(capped / static_cast<double>(unit)) * unit);
  };
  std::vector<int> groups;
  int64_t done = 0;
  // The first group: one wave's worth of tiles, so communication starts as early as the GEMM allows.
  int64_t size = round_units(static_cast<double>(grid));
  while (done < tiles) {
    if (static_cast<int>(groups.size()) + 1 >= max_groups) size = tiles - done;
    size = std::min(size, tiles - done);
    groups.push_back(static_cast<int>(size));
    done += size;
    // The next group's GEMM should last about as long as this group's collective.
    size = round_units(comm_us(size) / gemm_us_per_tile);
  }
  return groups;
}

std::vector<Plan> sequential_candidates(const Problem& problem, const Hardware& hw) {
  std::vector<Plan> out{default_plan(Mode::kSequential, problem, hw, 0)};
  // A paced loopback link behaves like a node's: the collective on every SM is no node's way of not overlapping.
  if (hw.emulation.loopback && !hw.emulation.paced && out.front().comm_ctas != hw.spec.sm_count)
    out.push_back(default_plan(Mode::kSequential, problem, hw, hw.spec.sm_count));
  return out;
}

std::vector<Plan> candidate_plans(const Problem& problem, const Hardware& hw, const PlannerOptions& options) {
  OVL_CHECK(options.min_comm_sms >= 1 && options.min_comm_sms <= hw.spec.sm_count,
            "min_comm_sms = {} must be in [1, {}] (the device's SMs)", options.min_comm_sms, hw.spec.sm_count);
  OVL_CHECK(options.min_comm_sms <= options.max_comm_sms, "min_comm_sms = {} > max_comm_sms = {}", options.min_comm_sms,
            options.max_comm_sms);
  for (size_t i = 0; i < options.modes.size(); ++i) {
    const int m = static_cast<int>(options.modes[i]);
    OVL_CHECK(m >= 0 && m < int(std::size(kModeTraits)), "modes[{}] = {} is not a mode", i, m);
    OVL_CHECK(std::find(options.modes.begin(), options.modes.begin() + long(i), options.modes[i]) ==
                  options.modes.begin() + long(i),
              "modes: {} given twice", to_string(options.modes[i]));
  }
  std::vector<Mode> modes = options.modes.empty() ? all_modes() : options.modes;
  if (options.runnable_only) {
    // Only AllGather+GEMM has modes that are not planned for it (kModeTraits: planned_ops).
    std::erase_if(modes, [&](Mode m) { return !mode_traits(m).planned(problem.op); });
    OVL_CHECK(!modes.empty(),
              "plan: AllGather+GEMM is planned in the sequential and decomposed modes only (the signaling modes run it "
              "when asked for, but are not modelled well enough for it yet)");
  }
  const std::vector<int> comm_options = comm_sms_options(hw, options);
  std::vector<Plan> out;
  auto add = [&](const Plan& p) {
    if (valid(p, problem, hw) && (!options.can_run || options.can_run(p).empty())) out.push_back(p);
  };
  auto add_grouped = [&](Plan base) {
    for (TileOrder order : {TileOrder::kRowBand, TileOrder::kSwizzle}) {
      // NCCL needs contiguous groups: the groupings are whole swizzle bands in swizzle order (units of
      // kSwizzleRows tile rows), each a contiguous block of rows of default_plan's row-major output.
      base.tile_order = order;
      for (std::vector<int>& g : groupings(problem, base, hw, options.max_groups)) {
        Plan p = base;
        p.tile_groups = std::move(g);
        add(p);
      }
    }
  };
  for (Mode mode : modes) {
    switch (mode) {
      case Mode::kSequential:
        for (const Plan& p : sequential_candidates(problem, hw)) add(p);
        // In loopback, ovl's TMA collective after the GEMM, on every SM (nothing else runs then): measured faster
        // than NCCL's stand-in in paced loopback and priced within a few percent there (docs/performance.md). A real
        // world runs the plan when asked (tma-push: TmaExecutor::run_real_sequential), but it has not been timed
        // across GPUs, where it would be priced from per-CTA rates measured up to 32 CTAs: not a candidate there.
        if (hw.emulation.loopback) {
          for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
            Plan p = default_plan(mode, problem, hw, hw.spec.sm_count);
            p.comm_algo = algo;
            p.comm_ctas = p.comm_sms = hw.spec.sm_count;
            add(p);
          }
        }
        // NCCL's symmetric kernels after the GEMM, on few CTAs (they reach the link with few).
        for (int comm : comm_options)
          for (const Plan& v :
               nccl_symmetric_variants(default_plan(mode, problem, hw, comm), problem, comm, comm_options))
            add(v);
        break;
      case Mode::kDecomposed:
        for (int chunks : {2, 4, 8, 16}) {
          if (problem.m % chunks != 0) continue;
          Plan p = default_plan(mode, problem, hw, 0);
          p.chunks = chunks;
          add(p);
          // NCCL's symmetric kernels take fewer SMs from cuBLAS on fewer CTAs.
          for (int comm : comm_options) {
            Plan sym = default_plan(mode, problem, hw, comm);
            sym.chunks = chunks;
            for (const Plan& v : nccl_symmetric_variants(sym, problem, comm, comm_options)) add(v);
          }
        }
        break;
      case Mode::kTileSignal:
        for (int comm : comm_options) {
          // The default grid (sm_count - 1 CTAs, which hold their SMs to the end) leaves the collective one SM until
          // the GEMM's last wave; a grid of sm_count - comm leaves it its CTAs (measured on the H200, docs/overlap.md:
          // 0.99-2.6x less time with 8 groups). Both are candidates; the model and the simulator price each
          // grid's starvation (signaled_gemm_grid, comm_ctas_beside_gemm).
          const Plan base = default_plan(mode, problem, hw, comm);
          add_grouped(base);
          if (problem.op != Op::kAllGatherGemm && base.comm_ctas < hw.spec.sm_count) {  // AG's grid leaves them already
            Plan reserve = base;
            reserve.gemm_sms = hw.spec.sm_count - base.comm_ctas;
            add_grouped(reserve);
            for (const Plan& v : nccl_symmetric_variants(reserve, problem, comm, comm_options)) add_grouped(v);
          }
          for (const Plan& v : nccl_symmetric_variants(base, problem, comm, comm_options)) add_grouped(v);
          // ce: the GEMM on every SM; comm_ctas run only the owner's sum after it.
          // Or on sm_count - comm_ctas, which leaves the sum SMs beside it: a sum per group (ce_sums_per_group).
          if (comm <= kFewCommCtas) {
            Plan ce = base;
            ce.comm_algo = CommAlgo::kCopyEngine;
            ce.gemm_sms = hw.spec.sm_count;
            add_grouped(ce);
            if (problem.op != Op::kAllGatherGemm && base.comm_ctas < hw.spec.sm_count) {
              ce.gemm_sms = hw.spec.sm_count - base.comm_ctas;
              add_grouped(ce);
            }
          }
        }
        break;
      case Mode::kGreenContext:
        for (int comm : comm_options) {
          add_grouped(default_plan(mode, problem, hw, comm));
          for (const Plan& v :
               nccl_symmetric_variants(default_plan(mode, problem, hw, comm), problem, comm, comm_options))
            add_grouped(v);
        }
        break;
      case Mode::kTma:
        for (int comm : comm_options) {
          if (comm > kFewCommCtas) continue;  // a TMA collective saturates the links with few CTAs
          for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
            for (bool partitioned : {false, true}) {
              Plan p = default_plan(mode, problem, hw, comm);
              p.comm_algo = algo;
              if (p.partitioned != partitioned) {
                // Shared SMs: the GEMM's grid covers the device and the TMA kernel's CTAs take SMs from it.
                p.partitioned = partitioned;
                p.gemm_sms = partitioned ? hw.spec.sm_count - comm : hw.spec.sm_count;
              }
              add_grouped(p);
            }
          }
        }
        break;
    }
  }
  return out;
}

PlanResult plan(const Problem& problem, const Hardware& hw, const PlannerOptions& options) {
  check_simulatable(problem);
  problem.validate();
  hw.validate();
  {
    const Plan probe = default_plan(Mode::kSequential, problem, hw, 0);
    OVL_CHECK(probe.tile_count(problem) >= 1 && probe.tile_count(problem) <= kMaxSimTiles,
              "{} is too large to plan: {} tiles (limit {})", problem.name(), probe.tile_count(problem), kMaxSimTiles);
  }
  OVL_CHECK(options.simulate_top >= 1, "simulate_top = {} must be >= 1", options.simulate_top);
  OVL_CHECK(options.max_groups >= 1, "max_groups = {} must be >= 1", options.max_groups);
  OVL_CHECK(std::isfinite(options.min_gain) && options.min_gain >= 0 && options.min_gain < 1,
            "min_gain = {} must be in [0, 1)", options.min_gain);

  // The baseline: every way of not overlapping the executor runs, whatever options.modes says.
  std::vector<Plan> baseline = sequential_candidates(problem, hw);
  for (const Plan& b : baseline) b.validate(problem, hw);  // e.g. an FP8 problem on a GPU without ovl's GEMM
  for (const Plan& b : baseline) {
    if (!options.can_run) continue;
    const std::string why = options.can_run(b);
    OVL_CHECK(why.empty(), "plan: the executor refuses the sequential plan \"{}\" for {}: {}", b.summary(),
              problem.name(), why);
  }
  std::vector<Plan> plans = candidate_plans(problem, hw, options);
  // Price every candidate with the closed-form model.
  struct Priced {
    size_t index;
    double model_us;
  };
  std::vector<Priced> priced;
  priced.reserve(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    try {
      const double us = estimate(problem, plans[i], hw).total_us;
      if (std::isfinite(us) && us > 0) priced.push_back({i, us});
    } catch (const Error&) {
      // A plan the model cannot price is left out.
    }
  }
  OVL_CHECK(!priced.empty(), "no valid plan for {} on {}", problem.name(), hw.name);
  std::stable_sort(priced.begin(), priced.end(),
                   [](const Priced& a, const Priced& b) { return a.model_us < b.model_us; });

  // The best few overall, the best of each mode and every sequential candidate go to the simulator.
  std::vector<Priced> chosen;
  auto pick = [&](const Priced& c) {
    for (const Priced& x : chosen)
      if (x.index == c.index) return;
    chosen.push_back(c);
  };
  for (size_t i = 0; i < priced.size() && static_cast<int>(i) < options.simulate_top; ++i) pick(priced[i]);
  for (Mode mode : all_modes())
    for (const Priced& c : priced)
      if (plans[c.index].mode == mode) {
        pick(c);
        break;
      }
  // Every baseline plan (a sequential plan of another algorithm is one candidate among the others).
  const auto is_baseline = [&](const Plan& p) {
    return p.mode == Mode::kSequential && std::any_of(baseline.begin(), baseline.end(), [&](const Plan& b) {
             return b == p;
           });
  };
  for (const Priced& c : priced)
    if (is_baseline(plans[c.index])) pick(c);

  SimOptions fast;
  fast.record_timeline = false;
  fast.record_counters = false;
  fast.record_steps = false;
  auto predict = [&](const Plan& p, double model_us) {
    return options.use_simulator ? simulate(problem, p, hw, fast).total_us : model_us;
  };

  PlanResult r;
  r.problem = problem;
  r.hardware = hw.name;
  r.candidates = static_cast<int>(priced.size());
  // The baseline's price: the best sequential candidate. Those among the ranked alternatives are priced there
  // (options.modes may leave them out).
  r.sequential_us = std::numeric_limits<double>::infinity();
  std::vector<double> baseline_us;
  for (const Plan& b : baseline) {
    baseline_us.push_back(predict(b, estimate(problem, b, hw).total_us));
    if (options.use_simulator) ++r.simulated;
    if (baseline_us.back() < r.sequential_us) r.sequential_us = baseline_us.back(), r.sequential = b;
  }
  for (const Priced& c : chosen) {
    PlanAlternative a;
    a.plan = plans[c.index];
    a.model_us = c.model_us;
    // A baseline plan among the candidates is priced already.
    const auto same = std::find_if(baseline.begin(), baseline.end(), [&](const Plan& b) {
      return a.plan.mode == Mode::kSequential && b == a.plan;
    });
    if (same != baseline.end()) {
      a.predicted_us = baseline_us[size_t(same - baseline.begin())];
    } else {
      a.predicted_us = predict(a.plan, c.model_us);
      if (options.use_simulator) ++r.simulated;
    }
    r.alternatives.push_back(std::move(a));
  }
  for (PlanAlternative& a : r.alternatives) a.speedup = a.predicted_us > 0 ? r.sequential_us / a.predicted_us : 0;
  std::stable_sort(r.alternatives.begin(), r.alternatives.end(),
                   [](const PlanAlternative& a, const PlanAlternative& b) { return a.predicted_us < b.predicted_us; });
  // Any other plan (overlapped, or sequential with NCCL's symmetric kernels) must beat the baseline by min_gain;
  // else the answer is the best sequential candidate.
  const PlanAlternative& first = r.alternatives.front();
  const bool may_be_sequential = options.modes.empty() || std::find(options.modes.begin(), options.modes.end(),
                                                                    Mode::kSequential) != options.modes.end();
  const bool overlap_wins = !is_baseline(first.plan) && first.predicted_us < r.sequential_us * (1.0 - options.min_gain);
  if (may_be_sequential && !overlap_wins) {
    r.best = r.sequential;
    r.predicted_us = r.sequential_us;
    r.sequential_best = true;
  } else {
    r.best = first.plan;
    r.predicted_us = first.predicted_us;
  }
  r.speedup = r.predicted_us > 0 ? r.sequential_us / r.predicted_us : 0;
  return r;
}

void to_json(nlohmann::json& j, const PlanResult& r) {
  j = nlohmann::json::object();
  j["problem"] = r.problem;
  j["hardware"] = r.hardware;
  j["plan"] = r.best;
  j["predicted_us"] = r.predicted_us;
  j["sequential"] = r.sequential;
  j["sequential_us"] = r.sequential_us;
  j["sequential_best"] = r.sequential_best;
  j["speedup"] = r.speedup;
  j["candidates"] = r.candidates;
  j["simulated"] = r.simulated;
  nlohmann::json alts = nlohmann::json::array();
  for (const PlanAlternative& a : r.alternatives) {
    alts.push_back({{"mode", std::string(to_string(a.plan.mode))},
                    {"gemm_sms", a.plan.gemm_sms},
                    {"comm_sms", a.plan.comm_sms},
                    {"groups", a.plan.tile_groups.size()},
                    {"comm_algo", std::string(to_string(a.plan.comm_algo))},
                    {"predicted_us", a.predicted_us},
                    {"model_us", a.model_us},
                    {"speedup", a.speedup},
                    {"plan", a.plan}});
  }
  j["alternatives"] = std::move(alts);
}

std::string format_plan_result(const PlanResult& r) {
  std::string out = fmt::format(
      "problem    {}\nhardware   {}\nplan       {}\npredicted  {:.1f} us  (sequential "
      "{:.1f} us, speedup {:.2f}x; {} candidates, {} simulated)\n",
      r.problem.name(), r.hardware, r.best.summary(), r.predicted_us, r.sequential_us, r.speedup, r.candidates,
      r.simulated);
  if (r.sequential_best) {
    const PlanAlternative* faster = nullptr;
    for (const PlanAlternative& a : r.alternatives)
      if (!(a.plan == r.sequential) && a.predicted_us < r.sequential_us) {
        faster = &a;
        break;
      }
    out += faster ? fmt::format(
                        "verdict    sequential: the best other plan is predicted {:.2f}x faster, short of the "
                        "min_gain margin\n",
                        faster->speedup)
                  : "verdict    sequential: no overlapped plan is predicted faster than not overlapping\n";
  } else if (r.speedup < 1) {
    out += fmt::format(
        "verdict    {}: predicted {:.2f}x, slower than not overlapping (the modes asked for leave "
        "sequential out)\n",
        to_string(r.best.mode), r.speedup);
  }
  out += "\n";
  out += fmt::format("{:>3}  {:<14} {:>8} {:>8} {:>6} {:<9} {:<14} {:>12} {:>10} {:>8}\n", "#", "mode", "gemm_sms",
                     "comm_sms", "groups", "order", "algo", "predicted_us", "model_us", "speedup");
  int rank = 0;
  for (const PlanAlternative& a : r.alternatives) {
    const Plan& p = a.plan;
    const std::string groups = mode_traits(p.mode).units == ModeUnits::kChunks
                                   ? fmt::format("c{}", p.chunks)
                                   : fmt::format("{}", p.tile_groups.size());
    out += fmt::format("{:>3}  {:<14} {:>8} {:>8} {:>6} {:<9} {:<14} {:>12.1f} {:>10.1f} {:>7.2f}x\n", ++rank,
                       std::string(to_string(p.mode)) +
                           (p.partitioned && mode_traits(p.mode).partitioning == Partitioning::kOptional ? "/gc" : ""),
                       p.gemm_sms, p.comm_sms, groups, to_string(p.tile_order), to_string(p.comm_algo), a.predicted_us,
                       a.model_us, a.speedup);
  }
  return out;
}

}  // namespace ovl::sim
