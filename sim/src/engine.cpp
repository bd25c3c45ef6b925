#include "ovl/sim/engine.hpp"

#include <algorithm>
#include <cmath>

#include "ovl/error.hpp"

namespace ovl::sim {

std::string_view to_string(ResourceKind kind) { return name_in(kResourceKindNames, kind); }

ResourceId Engine::add_resource(std::string name, ResourceKind kind, int gpu, double capacity) {
  OVL_CHECK(capacity >= 0 && std::isfinite(capacity), "resource {}: capacity = {} is not a finite number >= 0", name,
            capacity);
  Resource r;
  r.name = std::move(name);
  r.kind = kind;
  r.gpu = gpu;
  r.capacity = capacity;
  resources_.push_back(std::move(r));
  return static_cast<ResourceId>(resources_.size() - 1);
}

void Engine::set_capacity(ResourceId id, double capacity) {
  OVL_CHECK(id >= 0 && static_cast<size_t>(id) < resources_.size(), "unknown resource id {}", id);
  OVL_CHECK(capacity >= 0 && std::isfinite(capacity), "resource {}: capacity = {} is not a finite number >= 0",
            resources_[static_cast<size_t>(id)].name, capacity);
  resources_[static_cast<size_t>(id)].capacity = capacity;
  dirty_ = true;
}

void Engine::set_flow_cap(FlowId id, double cap) {
  OVL_CHECK(cap >= 0 && std::isfinite(cap), "flow {}: cap = {} is not a finite number >= 0", id, cap);
  for (Flow& f : flows_) {
    if (f.id != id) continue;
    f.spec.cap = cap;
    dirty_ = true;
    return;
  }
}

FlowId Engine::start_flow(FlowSpec spec) {
  OVL_CHECK(spec.amount >= 0 && std::isfinite(spec.amount), "flow {}: amount = {} is not a finite number >= 0",
            spec.name, spec.amount);
  OVL_CHECK(spec.cap >= 0 && std::isfinite(spec.cap), "flow {}: cap = {} is not a finite number >= 0", spec.name,
            spec.cap);
  for (const FlowUse& u : spec.uses) {
    OVL_CHECK(u.resource >= 0 && static_cast<size_t>(u.resource) < resources_.size(), "flow {}: unknown resource {}",
              spec.name, u.resource);
    OVL_CHECK(u.weight >= 0 && std::isfinite(u.weight), "flow {}: weight = {} on {} is not a finite number >= 0",
              spec.name, u.weight, resources_[static_cast<size_t>(u.resource)].name);
  }
  Flow f;
  f.id = next_flow_id_++;
  f.remaining = spec.amount;
  f.spec = std::move(spec);
  flows_.push_back(std::move(f));
  dirty_ = true;
  return flows_.back().id;
}

void Engine::at(TimeNs t, std::function<void()> fn) {
  OVL_CHECK(t >= now_, "event at {} ns is in the past (now {} ns)", t, now_);
  events_.push(Event{t, next_seq_++, std::move(fn)});
}

void Engine::after(TimeNs delay, std::function<void()> fn) {
  OVL_CHECK(delay >= 0 && delay < kNever - now_, "event delay of {} ns at {} ns is out of range", delay, now_);
  at(now_ + delay, std::move(fn));
}

bool Engine::flow_active(FlowId id) const {
  return std::any_of(flows_.begin(), flows_.end(), [id](const Flow& f) { return f.id == id; });
}

double Engine::flow_rate(FlowId id) const {
  for (const Flow& f : flows_)
    if (f.id == id) return f.rate;
  return 0;
}

// Progressive filling: raise the rate of every unfixed flow by the same step until a resource saturates or a
// flow reaches its cap; fix those flows; repeat. A flow with no positive-weight use and no cap is unbounded
// (rate = infinity: it completes at once).
const Resource& Engine::resource(ResourceId id) const {
  OVL_CHECK(id >= 0 && static_cast<size_t>(id) < resources_.size(), "unknown resource id {} (resources: {})", id,
            resources_.size());
  return resources_[static_cast<size_t>(id)];
}

std::vector<double> Engine::max_min_rates(const std::vector<FlowSpec>& flows, const std::vector<double>& capacity) {
  const size_t nf = flows.size();
  const size_t nr = capacity.size();
  for (const FlowSpec& f : flows)
    for (const FlowUse& u : f.uses)
      OVL_CHECK(u.resource >= 0 && static_cast<size_t>(u.resource) < nr && u.weight >= 0 && std::isfinite(u.weight),
                "max_min_rates: flow {} uses resource {} with weight {} (resources: {})", f.name, u.resource, u.weight,
                nr);
  std::vector<double> rate(nf, 0.0);
  std::vector<char> fixed(nf, 0);
  std::vector<double> left(capacity);
  std::vector<double> weight_sum(nr, 0.0);
  size_t unfixed = nf;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  while (unfixed > 0) {
    std::fill(weight_sum.begin(), weight_sum.end(), 0.0);
    for (size_t f = 0; f < nf; ++f) {
      if (fixed[f]) continue;
      for (const FlowUse& u : flows[f].uses) weight_sum[static_cast<size_t>(u.resource)] += u.weight;
    }
    double step = kInf;
    for (size_t r = 0; r < nr; ++r)
      if (weight_sum[r] > 0) step = std::min(step, std::max(0.0, left[r]) / weight_sum[r]);
    for (size_t f = 0; f < nf; ++f)
      if (!fixed[f] && flows[f].cap > 0) step = std::min(step, flows[f].cap - rate[f]);
    if (step == kInf) {  // the remaining flows use nothing and have no cap
      for (size_t f = 0; f < nf; ++f)
        if (!fixed[f]) rate[f] = kInf;
      break;
    }
    step = std::max(step, 0.0);
    for (size_t f = 0; f < nf; ++f)
      if (!fixed[f]) rate[f] += step;
    for (size_t r = 0; r < nr; ++r) left[r] -= step * weight_sum[r];
    // Fix flows at their cap and flows crossing a saturated resource (relative tolerance against rounding).
    for (size_t f = 0; f < nf; ++f) {
      if (fixed[f]) continue;
      bool fix = flows[f].cap > 0 && rate[f] >= flows[f].cap * (1 - 1e-12);
      for (const FlowUse& u : flows[f].uses) {
        const auto r = static_cast<size_t>(u.resource);
        if (u.weight > 0 && left[r] <= capacity[r] * 1e-12) fix = true;
      }
      if (fix) {
        fixed[f] = 1;
        --unfixed;
      }
    }
  }
  return rate;
}

void Engine::recompute_rates() {
  std::vector<FlowSpec> specs;
  specs.reserve(flows_.size());
  // Only uses, cap matter for the rates; copy the light parts (no callbacks).
  for (const Flow& f : flows_) {
    FlowSpec s;
    s.uses = f.spec.uses;
    s.cap = f.spec.cap;
    specs.push_back(std::move(s));
  }
  std::vector<double> capacity(resources_.size());
  for (size_t r = 0; r < resources_.size(); ++r) capacity[r] = resources_[r].capacity;
  const std::vector<double> rate = max_min_rates(specs, capacity);
  for (Resource& r : resources_) r.load = 0;
  for (size_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    f.rate = rate[i];
    if (f.remaining <= 0 || std::isinf(f.rate)) {
      f.finish = now_;
    } else if (f.rate <= 0) {
      f.finish = kNever;
    } else {
      // A finish past a simulated day is no GPU's: a profile rate too small for the problem (1e-12 TFLOP/s per SM
      // passes Hardware::validate), whose times would overflow the clock.
      const double dt = std::ceil(f.remaining / f.rate);
      constexpr double kMaxSimNs = 86400e9;
      OVL_CHECK(dt < kMaxSimNs - double(now_),
                "simulation: a flow would end {:.3g} s after {:.3g} s of simulated time, past a day: a rate of the "
                "hardware profile is too small for this problem",
                dt * 1e-9, double(now_) * 1e-9);
      f.finish = now_ + static_cast<TimeNs>(dt);
    }
    if (std::isfinite(f.rate))
      for (const FlowUse& u : f.spec.uses) resources_[static_cast<size_t>(u.resource)].load += u.weight * f.rate;
  }
  dirty_ = false;
  if (observer_) observer_(now_);
}

void Engine::advance_to(TimeNs t) {
  const double dt = static_cast<double>(t - now_);
  if (dt > 0) {
    for (Flow& f : flows_) {
      if (!std::isfinite(f.rate)) continue;
      const double done = std::min(f.remaining, f.rate * dt);
      f.remaining -= done;
      for (const FlowUse& u : f.spec.uses) resources_[static_cast<size_t>(u.resource)].work_done += u.weight * done;
    }
    for (Resource& r : resources_)
      if (r.capacity > 0) r.busy_ns += std::min(1.0, r.load / r.capacity) * dt;
  }
  now_ = t;
}

TimeNs Engine::run() {
  TimeNs last = now_;
  for (;;) {
    if (dirty_) recompute_rates();
    TimeNs t_flow = kNever;
    for (const Flow& f : flows_) t_flow = std::min(t_flow, f.finish);
    const TimeNs t_event = events_.empty() ? kNever : events_.top().t;
    const TimeNs t = std::min(t_flow, t_event);
    if (t == kNever) {
      OVL_CHECK(flows_.empty(),
                "simulation cannot progress at {} ns: {} flows have a zero (or vanishing) rate and no event is "
                "pending (first: {})",
                now_, flows_.size(), flows_.front().spec.name);
      break;
    }
    advance_to(t);
    last = t;
    // Completions first (in start order), then the events of this instant (in scheduling order).
    if (t_flow == t) {
      std::vector<std::function<void()>> done;
      std::vector<Flow> kept;
      kept.reserve(flows_.size());
      for (Flow& f : flows_) {
        if (f.finish == t) {
          // Book the rounding residue so the work done equals the amount exactly.
          for (const FlowUse& u : f.spec.uses)
            resources_[static_cast<size_t>(u.resource)].work_done += u.weight * f.remaining;
          if (f.spec.on_done) done.push_back(std::move(f.spec.on_done));
        } else {
          kept.push_back(std::move(f));
        }
      }
      flows_ = std::move(kept);
      dirty_ = true;
      for (auto& fn : done) {
        ++events_processed_;
        fn();
      }
    }
    while (!events_.empty() && events_.top().t == t) {
      auto fn = std::move(const_cast<Event&>(events_.top()).fn);
      events_.pop();
      ++events_processed_;
      fn();
    }
  }
  return last;
}

}  // namespace ovl::sim
