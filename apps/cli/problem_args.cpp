#include "cli/problem_args.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "ovl/error.hpp"

namespace ovl::cli {

const std::set<std::string>& problem_options() {
  static const std::set<std::string> options = {
      "op", "m", "n", "k", "world", "dtype", "layout", "gpus-per-node", "gpu", "profile", "loopback", "link-profile"};
  return options;
}

Problem problem_from_args(const Args& args, const Problem* base, int default_world) {
  Problem p = base ? *base : Problem{};
  if (!base) {
    // A plan for no named op or world would be a guess at the problem: the help lists both as required.
    if (!args.has("op"))
      throw UsageError("missing required option --op (gemm-allreduce, gemm-reducescatter or allgather-gemm)");
    if (default_world > 0) p.world = default_world;
  }
  try {
    if (auto v = args.value("op")) p.op = parse_op(*v);
    if (auto v = args.value("dtype")) p.dtype = parse_dtype(*v);
    if (auto v = args.value("layout")) p.b_layout = parse_b_layout(*v);
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
  constexpr int64_t kMaxDim = int64_t(1) << 24;
  p.m = args.integer("m", base ? p.m : 0, 1, kMaxDim);
  p.n = args.integer("n", base ? p.n : 0, 1, kMaxDim);
  p.k = args.integer("k", base ? p.k : 0, 1, kMaxDim);
  if (!base) {
    for (const char* dim : {"m", "n", "k"}) {
      if (!args.has(dim)) throw UsageError(fmt::format("missing required option --{}", dim));
    }
    if (default_world <= 0 && !args.has("world")) throw UsageError("missing required option --world");
  }
  p.world = static_cast<int>(args.integer("world", p.world, 1, 4096));
  p.gpus_per_node = static_cast<int>(args.integer("gpus-per-node", p.gpus_per_node, 1, 64));
  try {
    p.validate();
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
  return p;
}

Hardware hardware_from_args(const Args& args, const std::string& fallback) {
  if (args.has("profile") && args.has("gpu")) throw UsageError("give --gpu or --profile, not both");
  try {
    if (auto path = args.value("profile")) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(*path, ec))
        throw UsageError(fmt::format("--profile {}: not a readable file", *path));
      return load_hardware(*path);
    }
    if (!args.has("gpu")) {
      if (const char* env = std::getenv("OVL_PROFILE"); env != nullptr && *env != '\0') {
        try {
          return load_hardware(env);
        } catch (const Error& e) {
          throw UsageError(fmt::format("OVL_PROFILE={}: {}", env, e.message()));
        }
      }
    }
    return builtin_hardware(args.value_or("gpu", fallback));
  } catch (const Error& e) {
    throw UsageError(e.message());
  }
}

Hardware planning_hardware_from_args(const Args& args, const Problem& problem) {
  const Hardware hw = hardware_from_args(args);
  const auto share = args.value("loopback");
  const std::optional<LinkProfile> link = link_profile_from_args(args);
  // A real world over the link as measured (its tables price the calls they hold), or none.
  if (!share) return link ? with_link(hw, *link) : hw;
  try {
    return loopback_hardware(hw, problem.world, parse_loopback_share(*share), link);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--loopback {}: {}", *share, e.message()));
  }
}

std::optional<LinkProfile> link_profile_from_args(const Args& args) {
  const auto arg = args.value("link-profile");
  if (!arg) return std::nullopt;
  try {
    return link_profile_from_arg(*arg);
  } catch (const Error& e) {
    throw UsageError(fmt::format("--link-profile {}: {}", *arg, e.message()));
  }
}

std::set<std::string> with_problem_options(std::set<std::string> extra) {
  extra.insert(problem_options().begin(), problem_options().end());
  return extra;
}

void reject_positionals(const Args& args) {
  if (!args.positionals().empty()) throw UsageError(fmt::format("unexpected argument '{}'", args.positionals()[0]));
}

}  // namespace ovl::cli
