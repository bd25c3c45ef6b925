// `ovl validate --measured FILE.json... [--profile FILE] [--link-profile L] [--json] [--plot DIR]`: predicted versus
// measured (--link-profile: the link the real-world runs went over, json_files.hpp).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/json_files.hpp"
#include "cli/problem_args.hpp"
#include "cli/svg.hpp"
#include "ovl/error.hpp"
#include "ovl/tools/calibrate.hpp"
#include "ovl/tools/validate.hpp"

namespace ovl::cli {
namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw UsageError(fmt::format("--plot: cannot write '{}'", path.string()));
  out << text;
}

// predicted_vs_measured.svg (every case, model and simulator) and, per overlap problem,
// <problem>_comm_sms.svg: time versus comm SMs per mode, measured points under the predicted curves.
void write_plots(const sim::ValidationResult& r, const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError(fmt::format("--plot {}: {}", dir.string(), ec.message()));
  Series model{"model", {}, {}, false, kColors[0]}, simulator{"simulator", {}, {}, false, kColors[1]};
  for (const auto& c : r.cases) {
    if (c.model_us) {
      model.x.push_back(c.measured_us);
      model.y.push_back(*c.model_us);
    }
    if (c.sim_us) {
      simulator.x.push_back(c.measured_us);
      simulator.y.push_back(*c.sim_us);
    }
  }
  PlotSpec spec{fmt::format("predicted vs measured ({})", r.hardware), "measured (us)", "predicted (us)", true, true,
                true};
  write_file(dir / "predicted_vs_measured.svg", svg_plot(spec, {model, simulator}));

  // problem -> mode -> (comm_sms, measured, simulated)
  std::map<std::string, std::map<std::string, std::vector<std::tuple<double, double, double>>>> by_problem;
  for (const auto& c : r.cases) {
    if (c.kind != BenchKind::kOverlap || !c.sim_us) continue;
    const auto parsed = parse_bench_name(c.name);
    if (!parsed) continue;
    by_problem[c.problem][std::string(to_string(parsed->mode))].emplace_back(parsed->comm_sms, c.measured_us,
                                                                            *c.sim_us);
  }
  for (const auto& [problem, modes] : by_problem) {
    std::vector<Series> series;
    size_t color = 0;
    for (const auto& [mode, points] : modes) {
      Series measured{mode + " measured", {}, {}, false, kColors[color % 8]};
      Series predicted{mode + " simulated", {}, {}, true, kColors[color % 8]};
      for (const auto& [sms, meas, pred] : points) {
        measured.x.push_back(sms);
        measured.y.push_back(meas);
        predicted.x.push_back(sms);
        predicted.y.push_back(pred);
      }
      series.push_back(measured);
      series.push_back(predicted);
      ++color;
    }
    // A file name of [A-Za-z0-9._-] only: "gemm-allreduce/8192x8192x2048/world:8 (loopback)" ->
    // "gemm-allreduce_8192x8192x2048_world_8_loopback".
    std::string file;
    for (char ch : problem) {
      if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-') {
        file += ch;
      } else if (ch != '(' && ch != ')' && (file.empty() || file.back() != '_')) {
        file += '_';
      }
    }
    write_file(dir / (file + "_comm_sms.svg"),
               svg_plot({problem, "comm SMs", "time (us)", false, false, false, 720, 480}, series));
  }
}

}  // namespace

int cmd_validate(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("validate", err, [&] {
    const Args args(argv, {"measured", "profile", "plot", "gpu", "link-profile"}, {"json"});
    std::vector<std::string> paths = args.values("measured");
    paths.insert(paths.end(), args.positionals().begin(), args.positionals().end());
    if (paths.empty()) throw UsageError("give the measurements: --measured FILE.json...");
    const std::optional<LinkProfile> link = link_profile_from_args(args);
    std::vector<nlohmann::json> files = read_json_files(paths);
    add_link_profile(files, link);
    try {
      (void)benchmark_files_gpu(files, paths);  // named by path here; sim::validate checks again by index
    } catch (const Error& e) {
      throw UsageError(e.message());
    }
    std::optional<Hardware> profile;
    if (args.has("profile") || args.has("gpu")) profile = hardware_from_args(args);
    const sim::ValidationResult result = sim::validate(files, profile);
    if (auto dir = args.value("plot")) write_plots(result, *dir);
    if (args.flag("json")) {
      out << nlohmann::json(result).dump(2) << "\n";
    } else {
      out << result.summary();
    }
    return 0;
  });
}

}  // namespace ovl::cli
