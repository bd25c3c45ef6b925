// `ovl calibrate FILE.json... -o profile.json [--gpu NAME | --profile FILE] [--link-profile L]`: fits the hardware
// profile's model parameters (its "fit"; the "spec" written is the base's) to Google Benchmark JSON (bench_gemm,
// bench_collectives, bench_overlap; any subset) by least squares and prints each parameter with its fit residual
// (--link-profile: the link the real-world runs went over, json_files.hpp). docs/model.md lists the names and counters
// read.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "cli/cli.hpp"
#include "cli/json_files.hpp"
#include "cli/problem_args.hpp"
#include "ovl/error.hpp"
#include "ovl/tools/calibrate.hpp"

namespace ovl::cli {

int cmd_calibrate(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return guarded("calibrate", err, [&] {
    std::vector<std::string> expanded;
    for (const std::string& a : argv)
      expanded.push_back(a == "-o" ? "--output" : a.rfind("-o=", 0) == 0 ? "--output=" + a.substr(3) : a);
    const Args args(expanded, {"output", "gpu", "profile", "link-profile"}, {});
    if (args.positionals().empty()) throw UsageError("give at least one benchmark JSON file");
    const auto output = args.value("output");
    if (!output) throw UsageError("missing -o FILE (where to write the fitted profile)");
    const std::optional<LinkProfile> link = link_profile_from_args(args);
    std::vector<nlohmann::json> files = read_json_files(args.positionals());
    add_link_profile(files, link);
    // The base profile: --profile / --gpu, else the built-in profile of the GPU the files name, else the H200's.
    const bool given = args.has("profile") || args.has("gpu");
    Hardware base;
    try {  // one GPU's files either way, named by path
      if (given)
        (void)benchmark_files_gpu(files, args.positionals());
      else
        base = calibration_base(files, args.positionals());
    } catch (const Error& e) {
      throw UsageError(e.message());
    }
    if (given) base = hardware_from_args(args, "h200");
    const CalibrationResult result = calibrate(files, base);
    try {
      save_hardware(result.hardware, *output);
    } catch (const Error& e) {
      throw UsageError(fmt::format("-o {}: {}", *output, e.message()));
    }
    fmt::print(out, "calibrated {} from {} measurements; profile written to {}\n", base.name, result.measurements,
               *output);
    out << result.summary();
    return 0;
  });
}

}  // namespace ovl::cli
