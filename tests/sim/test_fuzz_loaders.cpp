// Randomized robustness: garbage bytes, valid JSON with wrong types, negative, huge and missing values fed to the
// Problem / Hardware / Plan loaders (nlohmann::json::parse + get<>) and on to simulate() and plan(). Nothing may
// crash or hang: every failure must be an ovl::Error or a nlohmann::json::exception. The file loaders
// (load_hardware, load_plan) get mutated copies of valid files (tests/fuzz_text.hpp: byte flips, truncations,
// deletions, type swaps, huge numbers, NaN / inf, deep nesting, duplicate keys) and must load or throw ovl::Error,
// nothing else. Fixed seeds and bounded iterations keep the test deterministic and under a few seconds (also under
// the sanitizer build of scripts/test.sh, OVL_TEST_SANITIZE=1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "fuzz_text.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/sim/planner.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::sim {
namespace {

struct Outcome {
  int ok = 0, ovl_errors = 0, json_errors = 0;
};

template <typename Fn>
void run_guarded(Outcome& out, Fn&& fn) {
  try {
    fn();
    ++out.ok;
  } catch (const Error&) {
    ++out.ovl_errors;
  } catch (const nlohmann::json::exception&) {
    ++out.json_errors;
  }
  // Anything else (std::bad_alloc, std::out_of_range, a crash) fails the test.
}

nlohmann::json random_scalar(std::mt19937& rng) {
  switch (rng() % 12) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return "garbage";
    case 3:
      return nlohmann::json::array({1, "x", nullptr});
    case 4:
      return nlohmann::json::object({{"a", 1}});
    case 5:
      return -static_cast<int64_t>(rng() % 1000) - 1;
    case 6:
      return std::numeric_limits<int64_t>::max();
    case 7:
      return std::numeric_limits<int64_t>::min();
    case 8:
      return 1e300;
    case 9:
      return -0.0;
    case 10:
      return 3.5;
    default:
      return static_cast<int64_t>(rng() % 100000);
  }
}

// Changes, removes or adds fields (recursively into objects and arrays).
void mutate(nlohmann::json& j, std::mt19937& rng, int depth = 0) {
  if (j.is_object() && !j.empty()) {
    auto it = j.begin();
    std::advance(it, static_cast<long>(rng() % j.size()));
    const std::string key = it.key();
    switch (rng() % 4) {
      case 0:
        j.erase(key);
        break;
      case 1:
        j[key] = random_scalar(rng);
        break;
      case 2:
        j["unexpected_" + std::to_string(rng() % 5)] = random_scalar(rng);
        break;
      default:
        if (depth < 3) mutate(j[key], rng, depth + 1);
        break;
    }
  } else if (j.is_array() && !j.empty()) {
    const size_t i = rng() % j.size();
    if (rng() % 3 == 0)
      j.erase(i);
    else
      j[i] = random_scalar(rng);
  } else {
    j = random_scalar(rng);
  }
}

Problem base_problem() {
  Problem p;
  p.op = Op::kGemmAllReduce;
  p.m = 4096;
  p.n = 4096;
  p.k = 4096;
  p.world = 8;
  return p;
}

TEST(FuzzLoaders, RandomBytes) {
  std::mt19937 rng(1234);
  Outcome out;
  const std::string alphabet = "{}[]\":,0123456789-+.eE truefalsnl\\\x01\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string text(rng() % 64, ' ');
    for (char& c : text) c = rng() % 2 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    run_guarded(out, [&] { (void)nlohmann::json::parse(text).get<Problem>(); });
    run_guarded(out, [&] {
      Hardware h = builtin_hardware("h200");
      from_json(nlohmann::json::parse(text), h);
    });
    run_guarded(out, [&] { (void)nlohmann::json::parse(text).get<Plan>(); });
  }
  EXPECT_EQ(out.ok + out.ovl_errors + out.json_errors, 9000);
  EXPECT_GT(out.json_errors, 0);
}

TEST(FuzzLoaders, MutatedProblemsAndHardwareThroughThePlanner) {
  std::mt19937 rng(99);
  const Hardware h200 = builtin_hardware("h200");
  const nlohmann::json problem_json = base_problem();
  const nlohmann::json hw_json = h200;
  Outcome parse, planned;
  for (int i = 0; i < 400; ++i) {
    nlohmann::json pj = problem_json, hj = hw_json;
    for (int m = 1 + static_cast<int>(rng() % 3); m > 0; --m) {
      // The profile's fields sit in its parts ("spec", "fit"): half of its mutations start in one of them.
      nlohmann::json* target = rng() % 2 ? &pj : &hj;
      if (target == &hj && rng() % 2) {
        const char* part = rng() % 2 ? "spec" : "fit";
        if (hj.contains(part) && hj[part].is_object()) target = &hj[part];
      }
      mutate(*target, rng);
    }
    Problem p;
    Hardware hw = h200;
    bool loaded = false;
    run_guarded(parse, [&] {
      p = nlohmann::json::parse(pj.dump()).get<Problem>();
      from_json(nlohmann::json::parse(hj.dump()), hw);
      loaded = true;
    });
    if (!loaded) continue;
    PlannerOptions o;
    o.simulate_top = 2;  // keep each iteration cheap
    run_guarded(planned, [&] { (void)plan(p, hw, o); });
  }
  EXPECT_GT(parse.ovl_errors + parse.json_errors, 0);
  EXPECT_GT(planned.ok, 0);
  RecordProperty("planned_ok", planned.ok);
  RecordProperty("planned_errors", planned.ovl_errors + planned.json_errors);
}

TEST(FuzzLoaders, MutatedPlansThroughTheSimulator) {
  std::mt19937 rng(7);
  const Hardware hw = builtin_hardware("h200");
  const Problem p = base_problem();
  Outcome parse, simulated;
  for (Mode mode : all_modes()) {
    const nlohmann::json plan_json = default_plan(mode, p, hw, 16);
    for (int i = 0; i < 300; ++i) {
      nlohmann::json j = plan_json;
      for (int m = 1 + static_cast<int>(rng() % 3); m > 0; --m) mutate(j, rng);
      Plan plan;
      bool loaded = false;
      run_guarded(parse, [&] {
        plan = nlohmann::json::parse(j.dump()).get<Plan>();
        loaded = true;
      });
      if (!loaded) continue;
      SimOptions fast;
      fast.record_timeline = false;
      run_guarded(simulated, [&] { (void)simulate(p, plan, hw, fast); });
    }
  }
  EXPECT_GT(parse.ovl_errors + parse.json_errors, 0);
  EXPECT_GT(simulated.ok, 0);
}

TEST(FuzzLoaders, ExtremeButTypedValuesInTheApi) {
  // Values a loader would accept by type but that stress the simulator: huge sizes, tiny rates, huge latencies.
  std::mt19937 rng(2024);
  const Hardware h200 = builtin_hardware("h200");
  Outcome out;
  const double rates[] = {1e-300, 1e-6, 1.0, 1e6, 1e300};
  const int64_t sizes[] = {8, 64, 1000, 8192, int64_t{1} << 40, std::numeric_limits<int64_t>::max() / 2};
  for (int i = 0; i < 300; ++i) {
    Problem p = base_problem();
    p.op = static_cast<Op>(rng() % 3);
    p.m = sizes[rng() % 6];
    p.n = sizes[rng() % 6] / 8 * 8;
    p.k = sizes[rng() % 6] / 8 * 8;
    p.world = static_cast<int>(1u << (rng() % 14));
    Hardware hw = h200;
    hw.spec.link_GBps = rates[rng() % 5];
    hw.spec.matrix_tflops_per_sm = rates[rng() % 5];
    hw.fit.launch_us = rates[rng() % 5];
    hw.spec.hbm_GBps = rates[rng() % 5];
    PlannerOptions o;
    o.simulate_top = 1;
    run_guarded(out, [&] { (void)plan(p, hw, o); });
  }
  EXPECT_EQ(out.ok + out.ovl_errors + out.json_errors, 300);
}

// Writes `text` to this test process's own file (ctest runs each test in a process of its own) and returns the path.
std::string write_temp(const std::string& text) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("ovl_fuzz_loaders_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

// A file loader's outcome: loaded, or an ovl::Error; anything else (a json exception leaking, std::bad_alloc, a
// crash) fails the test.
template <typename Fn>
bool loads_or_ovl_error(Fn&& fn, const std::string& text, int& ovl_errors) {
  try {
    fn();
    return true;
  } catch (const Error&) {
    ++ovl_errors;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an ovl::Error: " << e.what() << "\nfrom the file:\n" << text.substr(0, 400);
  }
  return false;
}

TEST(FuzzLoaders, MutatedProfileAndPlanFilesLoadOrThrowOvlError) {
  const Hardware h200 = builtin_hardware("h200");
  const Problem p = base_problem();
  std::vector<std::string> profiles = {nlohmann::json(h200).dump(2),
                                       R"({"base": "h100", "_measured": "by ovl calibrate",
                                           "spec": {"hbm_GBps": 3000.5, "link_GBps": 410, "sm_count": 132},
                                           "fit": {"launch_us": 4.5, "_launch_us": "a note"}})"};
  for (const std::string& text : profiles) EXPECT_NO_THROW((void)load_hardware(write_temp(text))) << text;
  std::vector<std::string> plans;
  for (Mode mode : all_modes()) plans.push_back(nlohmann::json(default_plan(mode, p, h200, 16)).dump(2));
  std::mt19937 rng(31337);
  std::array<int, int(test::TextMutation::kCount)> errors_by_kind{};
  int loaded = 0, ovl_errors = 0, simulated = 0;
  Outcome planned;  // a loaded profile through the planner: plans or throws
  for (int i = 0; i < 1500; ++i) {
    const bool profile = i % 3 == 0;
    const std::vector<std::string>& pool = profile ? profiles : plans;
    const std::string& valid = pool[rng() % pool.size()];
    const auto kind = test::TextMutation(i % int(test::TextMutation::kCount));
    const std::string text = test::mutate_text(valid, kind, rng);
    const std::string path = write_temp(text);
    const int before = ovl_errors;
    if (profile) {
      Hardware hw;
      if (loads_or_ovl_error([&] { hw = load_hardware(path); }, text, ovl_errors)) {
        ++loaded;
        PlannerOptions o;
        o.simulate_top = 1;
        o.max_groups = 8;
        if (i % 10 == 0) run_guarded(planned, [&] { (void)plan(p, hw, o); });
      }
    } else {
      Plan plan;
      if (loads_or_ovl_error([&] { plan = load_plan(path); }, text, ovl_errors)) {
        ++loaded;
        // What a loaded plan is used for: validated against the problem, then simulated.
        try {
          plan.validate(p, h200);
          SimOptions fast;
          fast.record_timeline = false;
          (void)simulate(p, plan, h200, fast);
          ++simulated;
        } catch (const Error&) {
        }
      }
    }
    errors_by_kind[size_t(kind)] += ovl_errors - before;
  }
  std::filesystem::remove(write_temp(""));
  EXPECT_EQ(loaded + ovl_errors, 1500);
  EXPECT_GT(loaded, 0);
  EXPECT_GT(simulated, 0);
  // Every kind of damage is caught somewhere, except a duplicated key: nlohmann keeps the last value, which is the
  // original one (the copy goes before it), so such files usually load.
  for (size_t k = 0; k < errors_by_kind.size(); ++k) {
    if (test::TextMutation(k) != test::TextMutation::kDuplicateKey) EXPECT_GT(errors_by_kind[k], 0) << "kind " << k;
  }
  RecordProperty("loaded", loaded);
  RecordProperty("ovl_errors", ovl_errors);
}

TEST(FuzzLoaders, DeepNestingIsRefusedBeforeTheParser) {
  // nlohmann's parser recurses once per level: 10^5 brackets overflowed the stack before the depth limit.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string path = write_temp(deep);
  for (const auto& load : {std::function<void()>([&] { (void)load_plan(path); }),
                           std::function<void()>([&] { (void)load_hardware(path); }),
                           std::function<void()>([&] { (void)load_link_profile(path); })}) {
    try {
      load();
      ADD_FAILURE() << "a 100000-level document loaded";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("nests arrays and objects 100000 levels deep"), std::string::npos) << e.message();
    }
  }
  std::filesystem::remove(path);
  // A directory for a file, and an error naming a large value shows its size, not the value.
  test::expect_error_naming([&] { (void)load_link_profile(std::filesystem::temp_directory_path().string()); },
                            "is a directory");
  const nlohmann::json wide(std::vector<int>(100000, 1));
  EXPECT_EQ(json_excerpt(wide), "an array of 100000 elements");
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(200, 'x'))).size(), 80u);
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(R"({"a": 1, "b": "x"})")), R"({"a":1,"b":"x"})");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(R"({"a": [1, 2]})")), "an object of 1 field");
  nlohmann::json nested = nlohmann::json::array();  // built in memory: no parser's depth limit
  for (int i = 0; i < 100000; ++i) {
    nlohmann::json outer = nlohmann::json::array();
    outer.push_back(std::move(nested));
    nested = std::move(outer);
  }
  EXPECT_EQ(json_excerpt(nested), "an array of 1 element");
  EXPECT_EQ(json_depth(R"({"a": "[[[[", "b": [{"c": "\"]]]"}]})"), 3);  // brackets in strings do not count
  EXPECT_NO_THROW(parse_json_document(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'), "x"));
}

}  // namespace
}  // namespace ovl::sim
