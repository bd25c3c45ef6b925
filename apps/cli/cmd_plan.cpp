// `ovl plan` and `ovl simulate`.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/problem_args.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/sim/planner.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::cli {
namespace {

void write_trace(const Timeline& timeline, const std::string& path) {
  try {
    timeline.write_chrome_trace(path);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--trace {}: {}", path, e.message()));
  }
}

}  // namespace

int cmd_plan(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("plan", err, [&] {
    const Args args(argv, with_problem_options({"trace", "top", "modes", "min-gain"}), {"json", "model-only"});
    reject_positionals(args);
    const Problem problem = problem_from_args(args);
    const Hardware hw = planning_hardware_from_args(args, problem);
    sim::PlannerOptions options;
    options.use_simulator = !args.flag("model-only");
    if (auto gain = args.value("min-gain")) {
      char* end = nullptr;
      options.min_gain = std::strtod(gain->c_str(), &end);
      if (end == gain->c_str() || *end != '\0' || !(options.min_gain >= 0 && options.min_gain < 1))
        throw UsageError(fmt::format("--min-gain {}: not a fraction in [0, 1)", *gain));
    }
    if (auto modes = args.value("modes")) {
      size_t start = 0;
      while (start <= modes->size()) {
        const size_t comma = std::min(modes->find(',', start), modes->size());
        try {
          options.modes.push_back(parse_mode(modes->substr(start, comma - start)));
        } catch (const Error& e) {
          throw UsageError(e.message());
        }
        start = comma + 1;
      }
    }
    const int top = static_cast<int>(args.integer("top", 10, 1, 1000));
    sim::PlanResult result = sim::plan(problem, hw, options);
    if (auto trace = args.value("trace")) write_trace(sim::simulate(problem, result.best, hw).timeline, *trace);
    if (result.alternatives.size() > size_t(top)) result.alternatives.resize(size_t(top));
    if (args.flag("json")) {
      out << nlohmann::json(result).dump(2) << "\n";
    } else {
      out << sim::format_plan_result(result);
    }
    return 0;
  });
}

int cmd_simulate(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("simulate", err, [&] {
    const Args args(argv, with_problem_options({"plan", "trace"}), {"json"});
    reject_positionals(args);
    const auto path = args.value("plan");
    if (!path) throw UsageError("missing required option --plan FILE");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*path, ec))
      throw UsageError(fmt::format("--plan {}: not a readable file", *path));
    nlohmann::json doc;
    try {
      doc = parse_json_document(read_file_text(*path, "--plan file"), fmt::format("--plan {}", *path));
    } catch (const Error& e) {
      throw UsageError(e.message());
    }
    // Either a Plan, or `ovl plan --json` output ({"problem": ..., "plan": ...}).
    Plan plan;
    Problem base;
    const bool from_planner = doc.is_object() && doc.contains("plan") && doc.contains("problem");
    try {
      plan = (from_planner ? doc.at("plan") : doc).get<Plan>();
      if (from_planner) base = doc.at("problem").get<Problem>();
    } catch (const Error& e) {
      throw UsageError(fmt::format("--plan {}: {}", *path, e.message()));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("--plan {}: {}", *path, e.what()));
    }
    const Problem problem = problem_from_args(args, from_planner ? &base : nullptr);
    const Hardware hw = planning_hardware_from_args(args, problem);
    // `ovl plan --json` output names the profile it was planned on: simulating it elsewhere is said, never silent.
    if (from_planner && doc.contains("hardware") && doc["hardware"].is_string()) {
      const std::string planned_on = doc["hardware"].get<std::string>();
      const bool chosen = args.has("gpu") || args.has("profile") || args.has("loopback") || args.has("link-profile");
      if (planned_on != hw.name && !chosen)
        throw UsageError(
            fmt::format("--plan {} was planned on \"{}\", not \"{}\": give the options it was planned "
                        "with (--gpu, --profile, --loopback, --link-profile)",
                        *path, planned_on, hw.name));
      if (planned_on != hw.name) fmt::print(err, "note: planned on \"{}\", simulated on \"{}\"\n", planned_on, hw.name);
    }
    try {
      plan.validate(problem, hw);
    } catch (const Error& e) {
      throw UsageError(fmt::format("--plan {}: {}", *path, e.message()));
    }
    const sim::SimResult result = sim::simulate(problem, plan, hw);
    if (auto trace = args.value("trace")) write_trace(result.timeline, *trace);
    if (args.flag("json")) {
      nlohmann::json j = result;
      j["problem"] = problem;
      j["plan"] = plan;
      out << j.dump(2) << "\n";
    } else {
      fmt::print(out, "{} on {}\nplan: {}\n", problem.name(), hw.name, plan.summary());
      fmt::print(
          out,
          "total {:.1f} us  gemm {:.1f} us  comm {:.1f} us  exposed comm {:.1f} us  ({} tiles, {} waves, {} groups)\n",
          result.total_us, result.gemm_us, result.comm_us, result.exposed_comm_us, result.tiles, result.waves,
          result.groups);
    }
    return 0;
  });
}

}  // namespace ovl::cli
