// Choosing the plan of a call without one: the plan cache, the planner, and measured tuning (timing the planner's
// best candidates and its best sequential plan on the call's own tensors).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>

#include "context_impl.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

std::string_view to_string(Tuning tuning) { return name_in(kTuningNames, tuning); }
Tuning parse_tuning(std::string_view text) { return parse_name(kTuningNames, text, "tuning"); }

namespace {

// OVL_TUNING, read once.
Tuning env_tuning() {
  static const Tuning value = [] {
    const char* text = std::getenv("OVL_TUNING");
    if (text == nullptr || *text == '\0') return Tuning::kMeasured;
    try {
      return parse_tuning(text);
    } catch (const Error& e) {
      OVL_FAIL("OVL_TUNING: {}", e.message());
    }
  }();
  return value;
}

// OVL_PLAN_CACHE, read once.
const std::string& env_plan_cache() {
  static const std::string value = [] {
    const char* text = std::getenv("OVL_PLAN_CACHE");
    return std::string(text == nullptr ? "" : text);
  }();
  return value;
}

// FNV-1a over the plans' JSON: equal on every rank exactly when the plans are. 32 bits, so exact as a double.
uint32_t plans_hash(const std::vector<Plan>& plans) {
  uint32_t h = 2166136261u;
  for (const Plan& p : plans) {
    for (const char ch : nlohmann::json(p).dump()) h = (h ^ uint8_t(ch)) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
  }
  return h;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The plans measured tuning times for a planner result: its best `count` distinct alternatives, then the best
// alternative of every other mode, then its best sequential plan (each plan once, in that order), with their
// predicted times.
void candidate_plans(const sim::PlanResult& r, int count, std::vector<Plan>& plans, std::vector<double>& predicted) {
  auto add = [&](const Plan& plan, double us) {
    for (const Plan& q : plans)
      if (q == plan) return;
    plans.push_back(plan);
    predicted.push_back(us);
  };
  for (const sim::PlanAlternative& alt : r.alternatives) {
    if (int(plans.size()) >= count) break;
    add(alt.plan, alt.predicted_us);
  }
  // The best plan of every other mode too: where the predictors rank modes wrongly, the measurement still sees each
  // mode at its predicted best (the alternatives hold it).
  for (Mode mode : all_modes()) {
    for (const sim::PlanAlternative& alt : r.alternatives) {
      if (alt.plan.mode != mode) continue;
      add(alt.plan, alt.predicted_us);
      break;
    }
  }
  add(r.sequential, r.sequential_us);
}

void refuse_capture(cudaStream_t stream, const std::string& what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  OVL_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  OVL_CHECK(status == cudaStreamCaptureStatusNone,
            "{} while the stream is being captured into a CUDA graph: run the same call once before capturing (warm "
            "up), so that its plan is chosen",
            what);
}

// Two events on one device, destroyed on scope exit.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    OVL_CUDA_CHECK(cudaEventCreate(&start));
    OVL_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    if (start != nullptr) (void)cudaEventDestroy(start);
    if (stop != nullptr) (void)cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

void Context::Impl::init_tuning(const ContextOptions& o) {
  tuning = o.tuning ? *o.tuning : env_tuning();
  OVL_CHECK(o.tuning_candidates >= 1 && o.tuning_candidates <= 16,
            "ContextOptions::tuning_candidates = {} must be in 1..16", o.tuning_candidates);
  OVL_CHECK(std::isfinite(o.tuning_min_gain) && o.tuning_min_gain >= 0 && o.tuning_min_gain < 1,
            "ContextOptions::tuning_min_gain = {} must be in [0, 1)", o.tuning_min_gain);
  OVL_CHECK(std::isfinite(o.tuning_budget_ms) && o.tuning_budget_ms >= 0 && o.tuning_budget_ms <= 600000,
            "ContextOptions::tuning_budget_ms = {} must be between 0 and 600000 (ten minutes)", o.tuning_budget_ms);
  cache_path = o.plan_cache ? *o.plan_cache : env_plan_cache();
  if (cache_path.empty()) return;
  cache = PlanCache::load(cache_path);
  PlanCacheKey mine;  // only the GPU, SM count and version matter here
  mine.gpu = gpu_name;
  mine.sm_count = sms;
  if (const int foreign = cache.foreign_entries(mine); foreign > 0) {
    fmt::print(stderr,
               "ovl: plan cache \"{}\": {} entr{} of another GPU, SM count or ovl version ignored (this: {}, {} "
               "SMs, ovl {})\n",
               cache_path, foreign, foreign == 1 ? "y" : "ies", gpu_name, sms, mine.version);
  }
}

PlanCacheKey Context::Impl::cache_key(const Problem& p) const {
  PlanCacheKey k;
  k.problem = p.name();
  // A paced loopback plans for another link: its choices are kept apart (loopback:rank0:paced:<profile name>).
  k.world = loopback ? fmt::format("loopback:{}{}", to_string(share), link ? ":paced:" + link->name : "") : "real";
  k.gpu = gpu_name;
  k.sm_count = sms;
  return k;
}

sim::PlanResult Context::Impl::plan_problem(const Problem& p, const Context& ctx) const {
  sim::PlannerOptions o;
  o.can_run = [&](const Plan& plan) { return ctx.can_run(p, plan); };
  o.min_gain = options.tuning_min_gain;
  return sim::plan(p, plan_hw, o);
}

std::vector<double> Context::Impl::max_over_ranks(std::vector<double> values) const {
  if (loopback || world == 1 || values.empty()) return values;
  // A real world of more than one rank is always a World (ContextOptions::world).
  const auto bytes = std::as_bytes(std::span<const double>(values));
  for (const std::vector<std::byte>& theirs : world_ref.all_gather(bytes)) {
    OVL_CHECK(theirs.size() == bytes.size(), "ranks disagree on how many times to compare ({} and {} bytes)",
              theirs.size(), bytes.size());
    for (size_t i = 0; i < values.size(); ++i) {
      double v = 0;
      std::memcpy(&v, theirs.data() + i * sizeof(double), sizeof(double));
      values[i] = std::max(values[i], v);
    }
  }
  return values;
}

const PlanChoice* Context::plan_choice(const Problem& problem) const {
  const std::lock_guard lock(impl_->mutex);
  const auto it = impl_->choices.find(problem.name());
  return it == impl_->choices.end() ? nullptr : &it->second;
}

std::vector<Plan> Context::tuning_candidates(const Problem& problem) const {
  const std::lock_guard lock(impl_->mutex);
  problem.validate();
  OVL_CHECK(problem.world == impl_->world, "tuning_candidates: problem world = {} on a context of world {}",
            problem.world, impl_->world);
  std::vector<Plan> plans;
  std::vector<double> predicted;
  candidate_plans(impl_->plan_problem(problem, *this), impl_->options.tuning_candidates, plans, predicted);
  return plans;
}

PlanChoice Context::measure(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
                            const std::vector<Plan>& plans, cudaStream_t stream) {
  return measure(op, a, b, c, plans, stream, impl_->options.tuning_budget_ms);
}

PlanChoice Context::measure(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
                            const std::vector<Plan>& plans, cudaStream_t stream, double budget_ms) {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);
  const detail::CallScope scope(s);  // every candidate runs on these inputs
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  const Problem p = problem_for(op, a, b, c);
  OVL_CHECK(!plans.empty(), "measure: no plans to time for {}", p.name());
  for (size_t i = 0; i < plans.size(); ++i) {
    const std::string why = can_run(p, plans[i]);
    OVL_CHECK(why.empty(), "measure: plan {} (\"{}\") cannot run {}: {}", i, plans[i].summary(), p.name(), why);
  }
  refuse_capture(stream, fmt::format("timing plans for {}", p.name()));
  const double h = plans_hash(plans);
  const std::vector<double> agreed = s.max_over_ranks({h, -h});
  OVL_CHECK(agreed[0] == -agreed[1],
            "measure: the ranks time different candidate plans for {} (their planner "
            "profiles or plan caches differ)",
            p.name());

  const size_t n = plans.size();
  EventPair ev;
  auto run_once = [&](const Plan& plan, bool timed) {
    if (timed) OVL_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    run(op, a, b, c, plan, stream);
    if (timed) OVL_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    synchronize(stream);  // a device-side timeout of a candidate is an error here, not a time
    float ms = 0;
    if (timed) OVL_CUDA_CHECK(cudaEventElapsedTime(&ms, ev.start, ev.stop));
    return double(ms) * 1e3;
  };
  for (const Plan& plan : plans) run_once(plan, false);  // partitions, buffers, lazy modules, clocks
  std::vector<std::vector<double>> times(n);
  double first_round_us = 0;
  for (size_t i = 0; i < n; ++i) first_round_us += (times[i].emplace_back(run_once(plans[i], true)));
  // More rounds (interleaved, so drift hits every plan alike) while the budget allows: decided from the slowest
  // rank's first round, so every rank runs as many. Round r starts at plan r mod n, so no plan always follows the
  // same one (a plan's time depends on the clock the previous one left: a GEMM runs faster after a memory-bound
  // collective than after another GEMM, docs/model.md "power state").
  // 15: with at most 5, a 0.4 ms problem's choice was once 5% slower than sequential when timed again
  // (docs/performance.md, "The automatic plan").
  constexpr int kMaxRounds = 15;
  const double slowest_round_us = s.max_over_ranks({first_round_us})[0];
  const double budget_us = budget_ms * 1e3;
  const int rounds = std::clamp(int(budget_us / std::max(slowest_round_us, 1e-3)), 1, kMaxRounds);
  for (int r = 1; r < rounds; ++r)
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + size_t(r)) % n;
      times[i].push_back(run_once(plans[i], true));
    }
  std::vector<double> med(n);
  for (size_t i = 0; i < n; ++i) med[i] = median(times[i]);
  med = s.max_over_ranks(std::move(med));

  PlanChoice out;
  out.chosen_by = ChosenBy::kMeasured;
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    out.candidates.push_back({plans[i], 0.0, med[i]});
    if (med[i] < med[best]) best = i;  // ties keep the earlier plan (the planner's order)
    if (plans[i].mode == Mode::kSequential && (out.sequential_us == 0 || med[i] < out.sequential_us))
      out.sequential_us = med[i];
  }
  out.plan = plans[best];
  out.measured_us = med[best];
  return out;
}

const PlanChoice& Context::plan_for(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
                                    cudaStream_t stream) {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);
  const Problem p = problem_for(op, a, b, c);
  const std::string name = p.name();
  if (const auto it = s.choices.find(name); it != s.choices.end()) return it->second;
  const bool real_world = !s.loopback && s.world > 1;

  // A plan cache entry, when every rank has the same one (else every rank chooses anew, together).
  const PlanCacheKey key = s.cache_key(p);
  const PlanChoice* cached = s.cache.find(key);
  if (cached != nullptr) {
    if (const std::string why = can_run(p, cached->plan); !why.empty()) {
      fmt::print(stderr, "ovl: plan cache \"{}\": the plan for {} cannot run in this context ({}); choosing anew\n",
                 s.cache_path, name, why);
      cached = nullptr;
    }
  }
  if (real_world) {
    const double h = cached != nullptr ? double(plans_hash({cached->plan})) : -1.0;
    const std::vector<double> agreed = s.max_over_ranks({h, -h});
    if (agreed[0] != -agreed[1]) cached = nullptr;
  }
  if (cached != nullptr) {
    PlanChoice choice = *cached;
    choice.from_cache = true;
    return s.choices.emplace(name, std::move(choice)).first->second;
  }

  s.check_capture(p, std::nullopt, stream);  // no choice yet: refused while capturing, as a call without a plan is
  const auto t0 = std::chrono::steady_clock::now();
  PlanChoice choice;
  std::optional<sim::PlanResult> r;
  try {
    r = s.plan_problem(p, *this);
  } catch (const Error& e) {
    fmt::print(stderr, "ovl: the planner failed for {} ({}); running the sequential plan\n", name, e.message());
  }
  if (!r) {
    choice.plan = default_plan(Mode::kSequential, p, s.hw, 0);
  } else if (s.tuning == Tuning::kPredicted) {
    choice.plan = r->best;
    choice.predicted_us = r->predicted_us;
    choice.sequential_us = r->sequential_us;
  } else {
    std::vector<Plan> plans;
    std::vector<double> predicted;
    candidate_plans(*r, s.options.tuning_candidates, plans, predicted);
    // Two thirds of the budget for the candidates, the rest for the confirmation.
    const double budget_ms = s.options.tuning_budget_ms;
    choice = measure(op, a, b, c, plans, stream, budget_ms * 2 / 3);
    TunedCandidate* best_sequential = nullptr;
    for (TunedCandidate& t : choice.candidates)
      if (t.plan.mode == Mode::kSequential && t.measured_us == choice.sequential_us) best_sequential = &t;
    // An overlapped plan must beat the best sequential one by tuning_min_gain among the candidates, and again, by
    // half of it, when the finalists are timed in fresh interleaved rounds. A difference within the timing's
    // run-to-run noise, or a plan whose times vary from one timing to the next, is no reason to overlap. Half: the
    // second timing runs on a GPU busy for longer, nearer the power limit, where an overlapped plan gains less than
    // on the fresher GPU of the first (docs/overlap.md, "Choosing a plan"). The finalists (tuning_finalists,
    // tuning_pick): up to 3 overlapped plans that beat the sequential one by the margin, timed again with it; of
    // those confirmed, the one with the lowest sum of its two times is kept.
    if (best_sequential != nullptr) {
      const std::vector<size_t> finalists = tuning_finalists(choice.candidates, s.options.tuning_min_gain);
      int pick = -1;
      if (!finalists.empty()) {
        std::vector<Plan> again_plans;
        for (size_t f : finalists) again_plans.push_back(choice.candidates[f].plan);
        again_plans.push_back(best_sequential->plan);
        const PlanChoice again = measure(op, a, b, c, again_plans, stream, budget_ms / 3);
        for (size_t i = 0; i < finalists.size(); ++i)
          choice.candidates[finalists[i]].confirmed_us = again.candidates[i].measured_us;
        best_sequential->confirmed_us = again.candidates.back().measured_us;
        pick = tuning_pick(choice.candidates, finalists, size_t(best_sequential - choice.candidates.data()),
                           s.options.tuning_min_gain);
      }
      const TunedCandidate& kept = pick >= 0 ? choice.candidates[finalists[size_t(pick)]] : *best_sequential;
      choice.plan = kept.plan;
      choice.measured_us = kept.measured_us;
    }
    for (size_t i = 0; i < plans.size(); ++i) choice.candidates[i].predicted_us = predicted[i];
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i] == choice.plan) choice.predicted_us = predicted[i];
  }
  choice.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.cache_path.empty()) {
    s.cache.put(key, choice);
    if (!real_world || s.rank == 0) s.cache.save(s.cache_path);
  }
  return s.choices.emplace(name, std::move(choice)).first->second;
}

}  // namespace ovl
