// The event engine: max-min fair shares with caps and weights against hand-computed answers, completion times,
// capacity changes, determinism and work conservation. Rates are exact sums of a few doubles, so shares are
// compared to 1e-9 relative; times are whole nanoseconds (completion = ceil(remaining / rate)).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ovl/error.hpp"
#include "ovl/sim/engine.hpp"

namespace ovl::sim {
namespace {

FlowSpec flow(std::vector<FlowUse> uses, double cap = 0) {
  FlowSpec f;
  f.uses = std::move(uses);
  f.cap = cap;
  return f;
}

TEST(MaxMin, EqualSharesOnOneLink) {
  // Two uncapped flows on a 10 B/ns link: 5 each.
  const auto r = Engine::max_min_rates({flow({{0, 1}}), flow({{0, 1}})}, {10});
  EXPECT_DOUBLE_EQ(r[0], 5);
  EXPECT_DOUBLE_EQ(r[1], 5);
}

TEST(MaxMin, CappedFlowLeavesItsShareToOthers) {
  // Capacity 12, three flows, one capped at 2 (a 1-CTA flow): the capped one gets 2, the others (12 - 2) / 2 = 5.
  const auto r = Engine::max_min_rates({flow({{0, 1}}, 2), flow({{0, 1}}), flow({{0, 1}})}, {12});
  EXPECT_DOUBLE_EQ(r[0], 2);
  EXPECT_DOUBLE_EQ(r[1], 5);
  EXPECT_DOUBLE_EQ(r[2], 5);
}

TEST(MaxMin, TwoResourcesBottleneckFirst) {
  // A (10) carries flows 1 and 2; B (4) carries flows 2 and 3. B saturates first at 2 each (flows 2, 3 fixed);
  // flow 1 then takes what A has left: 10 - 2 = 8.
  const auto r = Engine::max_min_rates({flow({{0, 1}}), flow({{0, 1}, {1, 1}}), flow({{1, 1}})}, {10, 4});
  EXPECT_NEAR(r[0], 8, 1e-9);
  EXPECT_NEAR(r[1], 2, 1e-9);
  EXPECT_NEAR(r[2], 2, 1e-9);
}

TEST(MaxMin, WeightsCountResourceUnitsPerProgressUnit) {
  // Capacity 12; flow 1 uses 2 units per unit of progress, flow 2 uses 1: equal progress x with 2x + x = 12,
  // so x = 4 each (flow 1 consumes 8, flow 2 consumes 4).
  const auto r = Engine::max_min_rates({flow({{0, 2}}), flow({{0, 1}})}, {12});
  EXPECT_NEAR(r[0], 4, 1e-9);
  EXPECT_NEAR(r[1], 4, 1e-9);
}

TEST(MaxMin, CapBelowFairShareAndUnboundedFlow) {
  // Capacity 9, caps 1 and 100, one uncapped flow: 1, then (9 - 1) / 2 = 4 and 4. A flow that uses nothing and
  // has no cap is unbounded (it completes at once).
  const auto r = Engine::max_min_rates({flow({{0, 1}}, 1), flow({{0, 1}}, 100), flow({{0, 1}}), flow({})}, {9});
  EXPECT_NEAR(r[0], 1, 1e-9);
  EXPECT_NEAR(r[1], 4, 1e-9);
  EXPECT_NEAR(r[2], 4, 1e-9);
  EXPECT_TRUE(std::isinf(r[3]));
}

TEST(Engine, CompletionTimesFollowRecomputedShares) {
  // Link 10 B/ns; flows of 100 B and 300 B start at 0: 5 B/ns each until the first ends at 100 / 5 = 20 ns;
  // then the second has 300 - 100 = 200 B left at 10 B/ns: ends at 20 + 20 = 40 ns.
  Engine e;
  const ResourceId link = e.add_resource("link", ResourceKind::kLinkTx, 0, 10);
  TimeNs t1 = -1, t2 = -1;
  FlowSpec a = flow({{link, 1}});
  a.amount = 100;
  a.on_done = [&] { t1 = e.now(); };
  FlowSpec b = flow({{link, 1}});
  b.amount = 300;
  b.on_done = [&] { t2 = e.now(); };
  e.start_flow(a);
  e.start_flow(b);
  EXPECT_EQ(e.run(), 40);
  EXPECT_EQ(t1, 20);
  EXPECT_EQ(t2, 40);
  EXPECT_DOUBLE_EQ(e.resource(link).work_done, 400);
  EXPECT_NEAR(e.resource(link).busy_ns, 40, 1e-9);  // saturated throughout
}

TEST(Engine, PerFlowCapLimitsALoneFlow) {
  // A 2-CTA flow at 2 x 1 B/ns on a 10 B/ns link: 100 B take 50 ns; the link is 20% busy.
  Engine e;
  const ResourceId link = e.add_resource("link", ResourceKind::kLinkTx, 0, 10);
  FlowSpec f = flow({{link, 1}}, 2 * 1.0);
  f.amount = 100;
  e.start_flow(f);
  EXPECT_EQ(e.run(), 50);
  EXPECT_NEAR(e.resource(link).busy_ns / 50.0, 0.2, 1e-12);
}

TEST(Engine, CapacityChangeMidFlow) {
  // 100 B at 10 B/ns; at 5 ns the capacity halves (an SM pool lending SMs): 50 B done, 50 B at 5 B/ns: ends 15 ns.
  Engine e;
  const ResourceId r = e.add_resource("pool", ResourceKind::kSmPool, 0, 10);
  FlowSpec f = flow({{r, 1}});
  f.amount = 100;
  e.start_flow(f);
  e.at(5, [&] { e.set_capacity(r, 5); });
  EXPECT_EQ(e.run(), 15);
}

TEST(Engine, FlowCapChangeMidFlow) {
  // 100 B capped at 4 B/ns on a 10 B/ns link; at 10 ns (40 B done) the cap rises to 6 B/ns (a collective's CTAs once
  // the GEMM beside them is over): 60 B at 6 B/ns, ends at 20 ns. A cap set on an ended flow is ignored.
  Engine e;
  const ResourceId r = e.add_resource("link", ResourceKind::kLinkTx, 0, 10);
  FlowSpec f = flow({{r, 1}});
  f.amount = 100;
  f.cap = 4;
  TimeNs done = -1;
  f.on_done = [&] { done = e.now(); };
  const FlowId id = e.start_flow(f);
  e.at(10, [&] {
    EXPECT_DOUBLE_EQ(e.flow_rate(id), 4.0);
    e.set_flow_cap(id, 6);
  });
  e.at(30, [&] { e.set_flow_cap(id, 1); });
  EXPECT_EQ(e.run(), 30);
  EXPECT_EQ(done, 20);
  EXPECT_DOUBLE_EQ(e.resource(r).work_done, 100.0);
  EXPECT_THROW(e.set_flow_cap(id, -1), Error);
}

TEST(Engine, EventsAtOneInstantRunInSchedulingOrder) {
  Engine e;
  std::string order;
  e.at(7, [&] { order += 'a'; });
  e.at(3, [&] { order += 'b'; });
  e.at(7, [&] { order += 'c'; });
  e.at(7, [&] {
    order += 'd';
    e.after(0, [&] { order += 'e'; });  // scheduled now for now: after those already queued
  });
  e.run();
  EXPECT_EQ(order, "bacde");
}

TEST(Engine, RoundingUpToWholeNanoseconds) {
  // 10 B at 3 B/ns: 3.33 ns rounds up to 4 ns; the work is still booked exactly.
  Engine e;
  const ResourceId r = e.add_resource("link", ResourceKind::kLinkTx, 0, 3);
  FlowSpec f = flow({{r, 1}});
  f.amount = 10;
  e.start_flow(f);
  EXPECT_EQ(e.run(), 4);
  EXPECT_DOUBLE_EQ(e.resource(r).work_done, 10);
}

TEST(Engine, BadInputsAndDeadlockThrow) {
  Engine e;
  EXPECT_THROW(e.add_resource("x", ResourceKind::kHbm, 0, -1), Error);
  const ResourceId r = e.add_resource("dead", ResourceKind::kHbm, 0, 0);
  FlowSpec neg = flow({{r, 1}});
  neg.amount = -5;
  EXPECT_THROW(e.start_flow(neg), Error);
  FlowSpec unknown = flow({{42, 1}});
  unknown.amount = 1;
  EXPECT_THROW(e.start_flow(unknown), Error);
  FlowSpec stuck = flow({{r, 1}});
  stuck.amount = 1;
  e.start_flow(stuck);
  EXPECT_THROW(e.run(), Error);  // zero capacity, no event to change it
  EXPECT_THROW(e.at(-1, [] {}), Error);
  EXPECT_THROW(e.resource(-1), Error);
  EXPECT_THROW(e.resource(1), Error);
  EXPECT_EQ(e.resource(r).name, "dead");
  // The public max-min solver checks what start_flow checks: resource indices and weights.
  EXPECT_THROW(Engine::max_min_rates({flow({{1, 1}})}, {1.0}), Error);
  EXPECT_THROW(Engine::max_min_rates({flow({{0, -1}})}, {1.0}), Error);
}

// A random scenario: resources, flows started at random times with random uses, weights and caps, some started
// from completion callbacks. Returns the completion log.
std::vector<std::pair<TimeNs, int>> random_run(uint32_t seed, Engine& e, std::vector<double>& expected_work) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> cap(1, 50), amount(10, 5000), weight(0.25, 3);
  const int nr = 5;
  for (int i = 0; i < nr; ++i) e.add_resource("r" + std::to_string(i), ResourceKind::kHbm, 0, cap(rng));
  expected_work.assign(nr, 0);
  std::vector<std::pair<TimeNs, int>> log;
  auto make = [&](int id) {
    FlowSpec f;
    f.amount = amount(rng);
    const int uses = 1 + static_cast<int>(rng() % 3);
    for (int u = 0; u < uses; ++u) {
      const int r = static_cast<int>(rng() % nr);
      const double w = weight(rng);
      f.uses.push_back({r, w});
      expected_work[static_cast<size_t>(r)] += w * f.amount;
    }
    f.cap = rng() % 2 ? cap(rng) : 0;
    f.on_done = [&log, &e, id] { log.emplace_back(e.now(), id); };
    return f;
  };
  for (int i = 0; i < 40; ++i) {
    const TimeNs t = static_cast<TimeNs>(rng() % 500);
    FlowSpec f = make(i);
    FlowSpec follow = make(1000 + i);  // started when the first ends
    auto inner = std::move(f.on_done);
    f.on_done = [&e, inner, follow]() mutable {
      inner();
      e.start_flow(std::move(follow));
    };
    e.at(t, [&e, f]() mutable { e.start_flow(std::move(f)); });
  }
  e.run();
  return log;
}

TEST(Engine, DeterministicAndWorkConserving) {
  Engine a, b;
  std::vector<double> wa, wb;
  const auto la = random_run(7, a, wa);
  const auto lb = random_run(7, b, wb);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(la.size(), 80u);
  EXPECT_EQ(a.events_processed(), b.events_processed());
  for (size_t r = 0; r < wa.size(); ++r) {
    EXPECT_NEAR(a.resource(static_cast<ResourceId>(r)).work_done, wa[r], 1e-9 * wa[r]) << "resource " << r;
    // Never above capacity on average.
    EXPECT_LE(a.resource(static_cast<ResourceId>(r)).busy_ns, static_cast<double>(a.now()) + 1e-6);
  }
}

}  // namespace
}  // namespace ovl::sim
