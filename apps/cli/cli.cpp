#include "cli/cli.hpp"

#include <ostream>

#include "cli/args.hpp"
#include "ovl/error.hpp"

namespace ovl::cli {
namespace {

constexpr const char* kUsage = R"(usage: ovl <command> [options]

commands:
  info       report the GPUs, their green-context granularity, peer access and versions (--json)
  plan       choose the overlap mode, SM split and tile groups for a problem
             --op gemm-allreduce|gemm-reducescatter|allgather-gemm --m M --n N --k K --world W
             [--gpu h100|h200|a100 | --profile FILE (default: env OVL_PROFILE, else h200)]
             [--loopback rank0|whole-world] [--link-profile nvlink4-node8|h200x2|FILE (the world's link: paces
             a loopback; without --loopback its measured tables price a real world's calls)]
             [--dtype bf16|fp16|e4m3] [--layout nt|nn] [--gpus-per-node G] [--modes M1,M2] [--min-gain F] [--top N]
             [--model-only (rank by the closed-form model, no simulator)] [--json] [--trace FILE]
  tune       on a GPU: a short benchmark sweep, the profile fitted to it, then measured tuning of the shapes:
             [--shapes FILE (lines "OP M N K")] [--op OP --m M --n N --k K] [--world W (loopback, 8)]
             [--profile-out FILE] [--cache-out FILE] [--skip-sweep --profile FILE] [--candidates K]
             [--bench-dir DIR] [--bench-args ARGS] [--work-dir DIR] [--device D] [--json]
  simulate   simulate one given plan: --plan FILE (a Plan JSON, or `ovl plan --json` output) plus the
             problem options of `plan`, [--json] [--trace FILE]
  calibrate  fit a hardware profile to benchmark JSON: ovl calibrate FILE.json... -o profile.json
             [--gpu NAME | --profile FILE (the base; default: the GPU the files name)]
             [--link-profile NAME|FILE (the link real-world runs went over: its measured tables price them)]
  validate   predicted versus measured: ovl validate --measured FILE.json... [--gpu NAME | --profile FILE]
             [--link-profile NAME|FILE (as calibrate's)] [--json] [--plot DIR]
)";

}  // namespace

int guarded(const char* command, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    err << "ovl " << command << ": " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    err << "ovl " << command << ": " << e.message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "ovl " << command << ": " << e.what() << "\n";
    return 1;
  }
}

int run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err, const GpuCommands& gpu) {
  if (argv.empty() || argv[0] == "help" || argv[0] == "--help" || argv[0] == "-h") {
    (argv.empty() ? err : out) << kUsage;
    return argv.empty() ? 2 : 0;
  }
  const std::string& command = argv[0];
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  // `ovl <command> --help` (or -h) anywhere on the line: the usage, which lists every command's options.
  for (const std::string& arg : rest) {
    if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return 0;
    }
  }
  if (command == "info") {
    if (!gpu.info) {
      out << "ovl was built without CUDA (OVL_ENABLE_CUDA=OFF): no GPU report\n";
      return 0;
    }
    return gpu.info(rest, out, err);
  }
  if (command == "tune") {
    if (!gpu.tune) {
      err << "ovl tune: ovl was built without CUDA (OVL_ENABLE_CUDA=OFF); tuning needs a GPU\n";
      return 1;
    }
    return gpu.tune(rest, out, err);
  }
  if (command == "plan") return cmd_plan(rest, out, err);
  if (command == "simulate") return cmd_simulate(rest, out, err);
  if (command == "calibrate") return cmd_calibrate(rest, out, err);
  if (command == "validate") return cmd_validate(rest, out, err);
  err << "ovl: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

}  // namespace ovl::cli
