// The `ovl` command's subcommands as library calls: each takes its arguments (without the subcommand name) and
// the streams to write to, and returns the process exit status (0 ok, 1 failure, 2 bad arguments).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace ovl::cli {

using Command = std::function<int(const std::vector<std::string>& args, std::ostream& out, std::ostream& err)>;

int cmd_plan(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_simulate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_calibrate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_validate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Runs a subcommand's body: bad arguments (UsageError) print one line and give 2; library errors (ovl::Error) and
// anything else thrown print one line and give 1. Nothing escapes.
int guarded(const char* command, std::ostream& err, const std::function<int()>& body);

// The subcommands that need a GPU (builds with CUDA): `info`, the GPU report, and `tune`. Null in a CPU-only build:
// then `ovl info` says so and exits 0, and `ovl tune` says so and exits 1.
struct GpuCommands {
  Command info, tune;
};

// Dispatches argv[0] (the subcommand).
int run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err, const GpuCommands& gpu);

}  // namespace ovl::cli
