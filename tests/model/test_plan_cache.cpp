// PlanCache: entries round-trip through the file; entries of another GPU, SM count or version are kept but never
// found; malformed files are errors naming the file, the entry and the field; a missing file is an empty cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "expect_error.hpp"
#include "ovl/model/plan_cache.hpp"

namespace ovl {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ovl_test_plan_cache_" + name)).string();
}

PlanCacheKey key(const std::string& problem, const std::string& gpu = "NVIDIA H200", int sms = 132) {
  PlanCacheKey k;
  k.problem = problem;
  k.world = "loopback:rank0";
  k.gpu = gpu;
  k.sm_count = sms;
  return k;
}

PlanChoice choice(const Problem& p, Mode mode, std::mt19937& rng) {
  std::uniform_real_distribution<double> us(10.0, 5000.0);
  PlanChoice c;
  c.plan = default_plan(mode, p, builtin_hardware("h200"), 16);
  c.chosen_by = ChosenBy::kMeasured;
  c.predicted_us = us(rng);
  c.measured_us = us(rng);
  c.sequential_us = us(rng);
  c.tuning_ms = us(rng) / 10;
  for (Mode m : {Mode::kSequential, Mode::kDecomposed, mode})
    c.candidates.push_back({default_plan(m, p, builtin_hardware("h200"), 16), us(rng), us(rng)});
  c.candidates.front().confirmed_us = us(rng);  // the best sequential plan and a finalist, timed again
  c.candidates.back().confirmed_us = us(rng);
  return c;
}

TEST(PlanCache, RoundTripsThroughAFile) {
  std::mt19937 rng(7);
  const Problem a = make_problem(Op::kGemmReduceScatter, 8192, 5120, 3072, 8);
  const Problem b = make_problem(Op::kGemmAllReduce, 4096, 14336, 8192, 8);
  PlanCache cache;
  const PlanChoice ca = choice(a, Mode::kTma, rng), cb = choice(b, Mode::kGreenContext, rng);
  cache.put(key(a.name()), ca);
  cache.put(key(b.name()), cb);
  cache.put(key(b.name()), cb);  // replaced, not added
  EXPECT_EQ(cache.size(), 2u);
  const std::string path = temp_path("roundtrip.json");
  cache.save(path);
  const PlanCache back = PlanCache::load(path);
  EXPECT_EQ(back.to_json().dump(), cache.to_json().dump());
  const PlanChoice* got = back.find(key(a.name()));
  ASSERT_NE(got, nullptr);
  EXPECT_TRUE(got->from_cache);
  EXPECT_EQ(got->plan.summary(), ca.plan.summary());
  EXPECT_EQ(got->chosen_by, ChosenBy::kMeasured);
  EXPECT_DOUBLE_EQ(got->measured_us, ca.measured_us);
  EXPECT_DOUBLE_EQ(got->sequential_us, ca.sequential_us);
  ASSERT_EQ(got->candidates.size(), ca.candidates.size());
  for (size_t i = 0; i < ca.candidates.size(); ++i) {
    EXPECT_EQ(got->candidates[i].plan.summary(), ca.candidates[i].plan.summary());
    EXPECT_DOUBLE_EQ(got->candidates[i].measured_us, ca.candidates[i].measured_us);
    EXPECT_DOUBLE_EQ(got->candidates[i].confirmed_us, ca.candidates[i].confirmed_us);
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A cache written before the confirmation's times were kept: its candidates read as not timed again.
  nlohmann::json older = cache.to_json();
  for (nlohmann::json& e : older["entries"])
    for (nlohmann::json& c : e["candidates"]) c.erase("confirmed_us");
  std::ofstream(path, std::ios::trunc) << older.dump();
  const PlanCache old_cache = PlanCache::load(path);
  const PlanChoice* old_choice = old_cache.find(key(a.name()));
  ASSERT_NE(old_choice, nullptr);
  for (const TunedCandidate& c : old_choice->candidates) EXPECT_EQ(c.confirmed_us, 0.0);
  std::filesystem::remove(path);
}

TEST(PlanCache, MissingFileIsEmpty) {
  const PlanCache c = PlanCache::load(temp_path("does_not_exist.json"));
  EXPECT_EQ(c.size(), 0u);
}

TEST(PlanCache, OtherGpusSmCountsAndVersionsAreKeptButNeverFound) {
  std::mt19937 rng(11);
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 4096, 8);
  PlanCache cache;
  cache.put(key(p.name(), "NVIDIA H100 80GB HBM3", 132), choice(p, Mode::kTma, rng));
  cache.put(key(p.name(), "NVIDIA H200", 124), choice(p, Mode::kTma, rng));
  PlanCacheKey old = key(p.name());
  old.version = "0.0.1";
  cache.put(old, choice(p, Mode::kTma, rng));
  const PlanCacheKey mine = key(p.name());
  EXPECT_EQ(cache.find(mine), nullptr);
  EXPECT_EQ(cache.foreign_entries(mine), 3);
  PlanCacheKey other_world = mine;
  other_world.world = "real";
  cache.put(other_world, choice(p, Mode::kSequential, rng));
  EXPECT_EQ(cache.find(mine), nullptr);  // the world kind is part of the key
  EXPECT_NE(cache.find(other_world), nullptr);
  const std::string path = temp_path("foreign.json");
  cache.save(path);
  EXPECT_EQ(PlanCache::load(path).size(), 4u);  // a save keeps every machine's entries
  std::filesystem::remove(path);
}

TEST(PlanCache, MalformedFilesNameTheFileAndTheField) {
  std::mt19937 rng(3);
  const Problem p = make_problem(Op::kGemmReduceScatter, 8192, 4096, 4096, 4);
  PlanCache cache;
  cache.put(key(p.name()), choice(p, Mode::kDecomposed, rng));
  const nlohmann::json good = cache.to_json();
  const std::string path = temp_path("malformed.json");
  auto write = [&](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  auto expect = [&](const std::string& text, const std::string& needle) {
    write(text);
    test::expect_error_naming([&] { PlanCache::load(path); }, needle);
    test::expect_error_naming([&] { PlanCache::load(path); }, path);
  };
  expect("{\"format\": \"ovl-plan-cache\", \"entries\": [", "not valid JSON");
  expect("[1, 2]", "not a plan cache");
  expect("{\"format\": \"ovl-profile\", \"entries\": []}", "not a plan cache");
  expect("{\"format\": \"ovl-plan-cache\"}", "\"entries\"");
  nlohmann::json j = good;
  j["entries"][0]["sm_count"] = "many";
  expect(j.dump(), "\"sm_count\"");
  j = good;
  j["entries"][0]["sm_count"] = -4;
  expect(j.dump(), "\"sm_count\" = -4");
  j = good;
  j["entries"][0].erase("gpu");
  expect(j.dump(), "\"gpu\" is missing");
  j = good;
  j["entries"][0]["chosen_by"] = "guessed";
  expect(j.dump(), "guessed");
  j = good;
  j["entries"][0]["measured_us"] = -1.5;
  expect(j.dump(), "\"measured_us\" = -1.5");
  j = good;
  j["entries"][0]["candidates"][0]["confirmed_us"] = -2.5;
  expect(j.dump(), "\"confirmed_us\" = -2.5");
  j = good;
  j["entries"][0]["plan"]["mode"] = "warp-speed";
  expect(j.dump(), "warp-speed");
  j = good;
  j["entries"][0]["candidates"][1]["plan"]["gemm_sms"] = "all";
  expect(j.dump(), "candidate 1");
  j = good;
  j["entries"].push_back(j["entries"][0]);
  expect(j.dump(), "repeats the key");
  expect(good.dump() + good.dump(), "not valid JSON");  // two caches run together: the second was dropped
  // Nested past the loaders' depth limit (it overflowed the stack), and a directory for a file.
  j = good;
  j["entries"][0]["candidates"] = nlohmann::json::parse(std::string(500, '[') + std::string(500, ']'));
  expect(j.dump(), "levels deep");
  test::expect_error_naming([] { PlanCache::load(std::filesystem::temp_directory_path().string()); }, "is a directory");
  std::filesystem::remove(path);
}

TEST(PlanCache, PutRefusesWhatLoadWouldRefuse) {
  std::mt19937 rng(5);
  const Problem p = make_problem(Op::kGemmReduceScatter, 8192, 4096, 4096, 4);
  PlanCache cache;
  cache.put(key("kept"), choice(p, Mode::kDecomposed, rng));
  test::expect_error_naming([&] { cache.put(key("empty plan"), PlanChoice{}); }, "\"gemm_sms\" = 0");
  PlanChoice nan = choice(p, Mode::kTma, rng);
  nan.predicted_us = std::nan("");
  test::expect_error_naming([&] { cache.put(key("nan"), nan); }, "\"predicted_us\"");
  test::expect_error_naming([&] { cache.put(key("no SMs", "NVIDIA H200", 0), choice(p, Mode::kTma, rng)); },
                            "\"sm_count\" = 0");
  EXPECT_EQ(cache.size(), 1u);  // nothing refused was kept, so the file still loads with the good entry
  const std::string path = temp_path("put.json");
  cache.save(path);
  EXPECT_EQ(PlanCache::load(path).size(), 1u);
  std::filesystem::remove(path);
}

TEST(TuningChoice, UnmeasuredCandidatesAndBadMarginsAreNeverPicked) {
  const Problem p = make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 8);
  const Hardware hw = builtin_hardware("h200");
  const Plan seq = default_plan(Mode::kSequential, p, hw, 16), tma = default_plan(Mode::kTma, p, hw, 16);
  // measured_us = 0 is "not measured": neither the sequential time to beat nor a finalist.
  std::vector<TunedCandidate> c{{seq, 0.0, 0.0}, {seq, 0.0, 100.0}, {tma, 0.0, 0.0}, {tma, 0.0, 90.0}};
  EXPECT_EQ(tuning_finalists(c, 0.02), std::vector<size_t>{3});
  test::expect_error_naming(
      [&] {
        (void)tuning_finalists({{seq, 0.0, 0.0}, {tma, 0.0, 90.0}}, 0.02);
      },
      "measured sequential plan");
  c[1].confirmed_us = 100.0;
  c[3].confirmed_us = 200.0;  // not confirmed: slower than sequential the second time
  EXPECT_EQ(tuning_pick(c, {3}, 1, 0.02), -1);
  for (double bad : {std::nan(""), -5.0, 1.0})
    test::expect_error_naming([&] { (void)tuning_pick(c, {3}, 1, bad); }, "min_gain");
}

TEST(PlanCache, SaveToAnUnwritablePathNamesIt) {
  PlanCache cache;
  test::expect_error_naming([&] { cache.save("/nonexistent-dir/ovl/plans.json"); }, "/nonexistent-dir/ovl/plans.json");
}

TEST(PlanCache, ChosenByNames) {
  for (ChosenBy by : {ChosenBy::kPredicted, ChosenBy::kMeasured}) EXPECT_EQ(parse_chosen_by(to_string(by)), by);
  test::expect_error_naming([] { parse_chosen_by("cached"); }, "cached");
  EXPECT_FALSE(library_version().empty());
}

// Measured tuning's confirmation on random candidate times (no GPU): the finalists are the fastest 3 overlapped plans
// among those that beat the fastest sequential one by the margin, fastest first, never a sequential plan; the pick is,
// among the finalists whose second time beats the sequential plan's by half the margin, the one with the lowest sum of
// its two times.
TEST(TuningChoice, FinalistsAndPickOnRandomTimes) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> time_us(95.0, 110.0);
  const Problem p = make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 8);
  const Hardware hw = builtin_hardware("h200");
  int confirmed = 0, rejected = 0;
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<TunedCandidate> c{{default_plan(Mode::kSequential, p, hw, 16), 0.0, time_us(rng)}};
    const int n = int(rng() % 8);
    for (int i = 0; i < n; ++i) {
      const Mode mode = rng() % 3 == 0 ? Mode::kSequential : (rng() % 2 ? Mode::kTma : Mode::kDecomposed);
      c.push_back({default_plan(mode, p, hw, 16), 0.0, time_us(rng)});
    }
    std::shuffle(c.begin(), c.end(), rng);
    const std::vector<size_t> f = tuning_finalists(c, 0.02);
    double sequential = 1e300;
    for (const TunedCandidate& t : c)
      if (t.plan.mode == Mode::kSequential) sequential = std::min(sequential, t.measured_us);
    size_t beating = 0;  // overlapped plans at least 2% faster than the fastest sequential one
    for (const TunedCandidate& t : c) beating += t.plan.mode != Mode::kSequential && t.measured_us <= sequential * 0.98;
    ASSERT_EQ(f.size(), std::min<size_t>(beating, 3));
    for (size_t i = 0; i < f.size(); ++i) {
      EXPECT_NE(c[f[i]].plan.mode, Mode::kSequential);
      EXPECT_LE(c[f[i]].measured_us, sequential * 0.98);
      if (i > 0) EXPECT_LE(c[f[i - 1]].measured_us, c[f[i]].measured_us);
    }
    for (const TunedCandidate& t : c)  // none left out is faster than the slowest finalist
      if (!f.empty() && t.plan.mode != Mode::kSequential && t.measured_us < c[f.back()].measured_us)
        EXPECT_TRUE(std::any_of(f.begin(), f.end(), [&](size_t i) { return &c[i] == &t; }));
    if (f.empty()) continue;
    size_t seq = 0;  // the fastest sequential candidate, timed again with the finalists
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i].plan.mode == Mode::kSequential && c[i].measured_us == sequential) seq = i;
    c[seq].confirmed_us = time_us(rng);
    for (size_t i : f) c[i].confirmed_us = time_us(rng);
    const int pick = tuning_pick(c, f, seq, 0.02);
    int expected = -1;
    auto sum = [&](size_t i) { return c[f[i]].measured_us + c[f[i]].confirmed_us; };
    for (size_t i = 0; i < f.size(); ++i)
      if (c[f[i]].confirmed_us <= c[seq].confirmed_us * 0.99 && (expected < 0 || sum(i) < sum(size_t(expected))))
        expected = int(i);
    EXPECT_EQ(pick, expected);
    (pick >= 0 ? confirmed : rejected) += 1;
  }
  EXPECT_GT(confirmed, 20);  // both outcomes are exercised
  EXPECT_GT(rejected, 20);
}

// The pick follows the second timing where the first cannot tell two plans apart, a finalist the second timing does
// not confirm gives way to the next confirmed one, and the sequential plan wins when none shows the margin.
TEST(TuningChoice, PickFollowsBothTimings) {
  const Problem p = make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 8);
  const Hardware hw = builtin_hardware("h200");
  const std::vector<TunedCandidate> c = {{default_plan(Mode::kSequential, p, hw, 16), 0.0, 110.0},
                                         {default_plan(Mode::kTma, p, hw, 16), 0.0, 100.0},
                                         {default_plan(Mode::kDecomposed, p, hw, 16), 0.0, 100.5},
                                         {default_plan(Mode::kTileSignal, p, hw, 16), 0.0, 103.0},
                                         {default_plan(Mode::kGreenContext, p, hw, 16), 0.0, 108.0}};
  const std::vector<size_t> f = tuning_finalists(c, 0.02);
  ASSERT_EQ(f, (std::vector<size_t>{1, 2, 3}));  // green-context is 1.8% ahead of sequential: not a finalist
  // The second timing of the finalists, then of the sequential plan (candidate 0).
  auto pick = [&](const std::vector<double>& second) {
    std::vector<TunedCandidate> timed = c;
    for (size_t i = 0; i < f.size(); ++i) timed[f[i]].confirmed_us = second[i];
    timed[0].confirmed_us = second.back();
    return tuning_pick(timed, f, 0, 0.02);
  };
  EXPECT_EQ(pick({102.0, 100.0, 105.0, 110.0}), 1);   // decomposed: 200.5 against tma's 202
  EXPECT_EQ(pick({100.0, 100.0, 105.0, 110.0}), 0);   // tma: 200 against 200.5
  EXPECT_EQ(pick({109.0, 104.0, 99.0, 110.0}), 2);    // tma not confirmed; tile-signal's 202 lowest
  EXPECT_EQ(pick({109.0, 109.0, 108.0, 110.0}), 2);   // only tile-signal 1% ahead
  EXPECT_EQ(pick({100.0, 100.0, 100.0, 100.9}), -1);  // under half the margin: sequential
  test::expect_error_naming([&] { tuning_pick(c, f, 0, 0.02); }, "not timed again");  // no second timing
  std::vector<TunedCandidate> timed = c;
  for (TunedCandidate& t : timed) t.confirmed_us = 100.0;
  test::expect_error_naming([&] { tuning_pick(timed, f, 1, 0.02); }, "not sequential");
  test::expect_error_naming([&] { tuning_pick(timed, {7}, 0, 0.02); }, "finalist 7");
  const std::vector<TunedCandidate> none_sequential(c.begin() + 1, c.end());
  test::expect_error_naming([&] { tuning_finalists(none_sequential, 0.02); }, "sequential");
  EXPECT_TRUE(tuning_finalists({c[0], c[4]}, 0.02).empty());  // nothing beats sequential by the margin
}

}  // namespace
}  // namespace ovl
