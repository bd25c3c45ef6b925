// Problem and hardware options shared by `ovl plan`, `ovl simulate` and friends.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "cli/args.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/problem.hpp"

namespace ovl::cli {

// --op --m --n --k --world --dtype --layout --gpus-per-node --gpu --profile --loopback --link-profile
const std::set<std::string>& problem_options();
// Builds and validates a Problem; `base` supplies values for missing options. Without a base --op, --m, --n, --k
// and --world are required (--world defaults to `default_world` when that is positive). Throws UsageError naming
// the bad or missing option.
Problem problem_from_args(const Args& args, const Problem* base = nullptr, int default_world = 0);
// --profile FILE, else --gpu NAME, else the profile file in env OVL_PROFILE, else `fallback` (a built-in name).
// Throws UsageError naming the bad value.
Hardware hardware_from_args(const Args& args, const std::string& fallback = "h200");
// hardware_from_args, and with --loopback rank0|whole-world the profile a loopback Context of the problem's world
// plans with (loopback_hardware); --link-profile NAME|FILE paces that loopback (rank0) to the link, or without
// --loopback prices a real world over it (with_link: its measured tables price the calls they hold).
Hardware planning_hardware_from_args(const Args& args, const Problem& problem);
// --link-profile NAME|FILE (a built-in link or a LinkProfile JSON file), or nullopt; a bad one is a UsageError.
std::optional<LinkProfile> link_profile_from_args(const Args& args);
// The problem options plus `extra`.
std::set<std::string> with_problem_options(std::set<std::string> extra);
// A UsageError naming the first positional argument, if any.
void reject_positionals(const Args& args);

}  // namespace ovl::cli
