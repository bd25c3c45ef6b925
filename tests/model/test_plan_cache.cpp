// PlanCache: entries round-trip through the file; entries of another GPU, SM count or version are kept but never
// found; malformed files are errors naming the file, the entry and the field; a missing file is an empty cache.
#include <gtest/gtest.h>

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
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
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
  j["entries"][0]["plan"]["mode"] = "warp-speed";
  expect(j.dump(), "warp-speed");
  j = good;
  j["entries"][0]["candidates"][1]["plan"]["gemm_sms"] = "all";
  expect(j.dump(), "candidate 1");
  j = good;
  j["entries"].push_back(j["entries"][0]);
  expect(j.dump(), "repeats the key");
  std::filesystem::remove(path);
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

}  // namespace
}  // namespace ovl
