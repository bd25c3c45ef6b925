// Hardware: built-in profiles (each value with its source), validation, JSON.
#include "ovl/model/hardware.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_fields.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/model/plan.hpp"
#include "profiles.hpp"

namespace ovl {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// What validate() requires of a numeric field.
enum class Rule {
  kPositive,     // > 0
  kNonNegative,  // >= 0
  kFraction,     // (0, 1]
  kUnit,         // [0, 1]
};

struct DoubleField {
  const char* name;
  double Hardware::*member;
  Rule rule;
};
struct IntField {
  const char* name;
  int Hardware::*member;
};

// Every numeric field of Hardware, in declaration order: JSON I/O, validation and the field-by-field tests all
// walk this one table, so a new field cannot be forgotten by one of them.
constexpr IntField kIntFields[] = {
    {"sm_count", &Hardware::sm_count},
    {"sm_granularity", &Hardware::sm_granularity},
};
constexpr DoubleField kDoubleFields[] = {
    {"clock_ghz", &Hardware::clock_ghz, Rule::kPositive},
    {"matrix_tflops_per_sm", &Hardware::matrix_tflops_per_sm, Rule::kPositive},
    {"hbm_GBps", &Hardware::hbm_GBps, Rule::kPositive},
    {"l2_bytes", &Hardware::l2_bytes, Rule::kPositive},
    {"smem_per_sm_bytes", &Hardware::smem_per_sm_bytes, Rule::kPositive},
    {"link_GBps", &Hardware::link_GBps, Rule::kPositive},
    {"link_latency_us", &Hardware::link_latency_us, Rule::kNonNegative},
    {"per_cta_copy_GBps", &Hardware::per_cta_copy_GBps, Rule::kPositive},
    {"copy_engine_GBps", &Hardware::copy_engine_GBps, Rule::kNonNegative},
    {"tma_push_per_cta_GBps", &Hardware::tma_push_per_cta_GBps, Rule::kPositive},
    {"tma_pull_per_cta_GBps", &Hardware::tma_pull_per_cta_GBps, Rule::kPositive},
    {"simt_per_cta_GBps", &Hardware::simt_per_cta_GBps, Rule::kPositive},
    {"net_GBps", &Hardware::net_GBps, Rule::kPositive},
    {"net_latency_us", &Hardware::net_latency_us, Rule::kNonNegative},
    {"gemm_efficiency", &Hardware::gemm_efficiency, Rule::kFraction},
    {"gemm_l2_miss_cost", &Hardware::gemm_l2_miss_cost, Rule::kNonNegative},
    {"cublas_efficiency", &Hardware::cublas_efficiency, Rule::kFraction},
    {"cublas_partition_penalty", &Hardware::cublas_partition_penalty, Rule::kNonNegative},
    {"launch_us", &Hardware::launch_us, Rule::kNonNegative},
    {"tile_epilogue_us", &Hardware::tile_epilogue_us, Rule::kNonNegative},
    {"cublas_tile_epilogue_us", &Hardware::cublas_tile_epilogue_us, Rule::kNonNegative},
    {"clock_knee_sms", &Hardware::clock_knee_sms, Rule::kPositive},
    {"clock_exponent", &Hardware::clock_exponent, Rule::kUnit},
    {"operator_gemm_factor", &Hardware::operator_gemm_factor, Rule::kPositive},
    {"nccl_efficiency", &Hardware::nccl_efficiency, Rule::kFraction},
    {"nccl_per_cta_GBps", &Hardware::nccl_per_cta_GBps, Rule::kPositive},
    {"nccl_symmetric_per_cta_GBps", &Hardware::nccl_symmetric_per_cta_GBps, Rule::kPositive},
    {"nccl_launch_us", &Hardware::nccl_launch_us, Rule::kNonNegative},
    {"tma_launch_us", &Hardware::tma_launch_us, Rule::kNonNegative},
    {"tma_group_us", &Hardware::tma_group_us, Rule::kNonNegative},
    {"nccl_group_us", &Hardware::nccl_group_us, Rule::kNonNegative},
    {"loopback_piece_us", &Hardware::loopback_piece_us, Rule::kNonNegative},
    {"overlap_nccl_rate_factor", &Hardware::overlap_nccl_rate_factor, Rule::kPositive},
    {"overlap_tma_rate_factor", &Hardware::overlap_tma_rate_factor, Rule::kPositive},
    {"beside_gemm_rate_factor", &Hardware::beside_gemm_rate_factor, Rule::kPositive},
    {"hbm_contention", &Hardware::hbm_contention, Rule::kNonNegative},
    {"shared_sm_penalty", &Hardware::shared_sm_penalty, Rule::kNonNegative},
};

void check_double(const char* name, double v, Rule rule) {
  OVL_CHECK(std::isfinite(v), "hardware field \"{}\" = {} must be finite", name, v);
  switch (rule) {
    case Rule::kPositive:
      OVL_CHECK(v > 0, "hardware field \"{}\" = {} must be positive", name, v);
      break;
    case Rule::kNonNegative:
      OVL_CHECK(v >= 0, "hardware field \"{}\" = {} must not be negative", name, v);
      break;
    case Rule::kFraction:
      OVL_CHECK(v > 0 && v <= 1, "hardware field \"{}\" = {} must be in (0, 1]", name, v);
      break;
    case Rule::kUnit:
      OVL_CHECK(v >= 0 && v <= 1, "hardware field \"{}\" = {} must be in [0, 1]", name, v);
      break;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

// A built-in profile: model/profiles/<stem>.json (each value beside its source), embedded at build time.
Hardware builtin(std::string_view stem) {
  const nlohmann::json j = parse_json_document(detail::embedded_profile(stem), fmt::format("built-in profile {}", stem));
  Hardware h;
  from_json(j, h);
  return h;
}

}  // namespace

void Hardware::validate() const {
  OVL_CHECK(sm_count > 0, "hardware field \"sm_count\" = {} must be positive", sm_count);
  OVL_CHECK(sm_granularity > 0, "hardware field \"sm_granularity\" = {} must be positive", sm_granularity);
  // 132 SMs with 8-SM partitions is the normal Hopper case (16 groups and a remainder of 4), so sm_count need
  // not be a multiple of the granularity; the granularity must fit in the device.
  OVL_CHECK(sm_granularity <= sm_count, "hardware field \"sm_granularity\" = {} exceeds sm_count = {}", sm_granularity,
            sm_count);
  for (const auto& f : kDoubleFields) check_double(f.name, this->*f.member, f.rule);
  OVL_CHECK(clock_knee_sms <= sm_count, "hardware field \"clock_knee_sms\" = {} exceeds sm_count = {}",
            clock_knee_sms, sm_count);
}

std::string Hardware::summary() const {
  return fmt::format(
      "{}: {} SMs (partitions of {}), {:.3f} TFLOP/s per SM ({:.0f} total) at {:.2f} GHz, HBM {:.0f} GB/s, "
      "L2 {:.0f} MiB, link {:.0f} GB/s ({:.2f} us), per-CTA copy {:.0f} GB/s (push {:.0f}, pull {:.0f}, simt {:.0f}), "
      "net {:.0f} GB/s ({:.1f} us); "
      "gemm eff {:.3f} (L2 miss cost {:.2f}), cublas eff {:.3f} (partition penalty {:.3f}), clock (max(busy, {:.0f}) / "
      "{})^{:.3f}, "
      "operator GEMM x{:.3f}, "
      "launch {:.2f} us, epilogue {:.2f} us/tile (cublas {:.2f}), "
      "nccl eff {:.2f} ({:.0f} GB/s per CTA, symmetric kernels {:.1f}, launch {:.1f} us, per group {:.2f} us; "
      "loopback per piece {:.2f} us), "
      "tma launch {:.1f} us (per group {:.2f} us), "
      "overlapped comm rates x{:.3f} (nccl) / x{:.3f} (tma push), x{:.3f} beside the GEMM, hbm contention {:.2f}, "
      "shared-SM penalty {:.2f}",
      name, sm_count, sm_granularity, matrix_tflops_per_sm, matrix_tflops(), clock_ghz, hbm_GBps, l2_bytes / kMiB,
      link_GBps, link_latency_us, per_cta_copy_GBps, tma_push_per_cta_GBps, tma_pull_per_cta_GBps, simt_per_cta_GBps,
      net_GBps, net_latency_us, gemm_efficiency, gemm_l2_miss_cost, cublas_efficiency, cublas_partition_penalty,
      clock_knee_sms, sm_count, clock_exponent, operator_gemm_factor, launch_us, tile_epilogue_us,
      cublas_tile_epilogue_us, nccl_efficiency, nccl_per_cta_GBps, nccl_symmetric_per_cta_GBps, nccl_launch_us,
      nccl_group_us, loopback_piece_us, tma_launch_us, tma_group_us, overlap_nccl_rate_factor, overlap_tma_rate_factor,
      beside_gemm_rate_factor, hbm_contention, shared_sm_penalty);
}

Hardware Hardware::overlapped_comm() const {
  Hardware h = *this;
  h.nccl_per_cta_GBps *= overlap_nccl_rate_factor;
  h.nccl_symmetric_per_cta_GBps *= overlap_nccl_rate_factor;
  h.tma_push_per_cta_GBps *= overlap_tma_rate_factor;
  return h;
}

Hardware Hardware::beside_gemm_comm() const {
  Hardware h = overlapped_comm();
  h.nccl_per_cta_GBps *= beside_gemm_rate_factor;
  h.nccl_symmetric_per_cta_GBps *= beside_gemm_rate_factor;
  h.tma_push_per_cta_GBps *= beside_gemm_rate_factor;
  return h;
}

std::vector<std::string> hardware_field_names() {
  std::vector<std::string> names;
  for (const auto& f : kIntFields) names.emplace_back(f.name);
  for (const auto& f : kDoubleFields) names.emplace_back(f.name);
  return names;
}

Hardware builtin_hardware(std::string_view name) {
  const std::string n = lower(name);
  auto is = [&](std::string_view base) {
    return n == base || n == std::string(base) + "-sxm" || n == std::string(base) + " sxm";
  };
  if (is("h200")) return builtin("h200");
  if (is("h100")) return builtin("h100");
  if (is("a100")) return builtin("a100");
  OVL_FAIL("unknown hardware profile \"{}\" (built-in: h200, h100, a100)", name);
}

std::vector<std::string> builtin_hardware_names() { return {"h200", "h100", "a100"}; }

Hardware hardware_for_device_name(std::string_view device_name) {
  const std::string n = lower(device_name);
  // "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"; PCIe and NVL parts differ (fewer SMs,
  // other links) and are refused rather than silently given an SXM profile.
  if (n.find("pcie") != std::string::npos || n.find("nvl") != std::string::npos) {
    OVL_FAIL("no built-in hardware profile for device \"{}\" (only SXM parts: h200, h100, a100)", device_name);
  }
  if (n.find("h200") != std::string::npos) return builtin("h200");
  if (n.find("h100") != std::string::npos) return builtin("h100");
  if (n.find("a100") != std::string::npos) return builtin("a100");
  OVL_FAIL("no built-in hardware profile for device \"{}\" (built-in: h200, h100, a100)", device_name);
}

std::string_view to_string(LoopbackShare share) { return name_in(kLoopbackShareNames, share); }
LoopbackShare parse_loopback_share(std::string_view text) {
  return parse_name(kLoopbackShareNames, text, "loopback share");
}

Hardware loopback_hardware(const Hardware& base, int world, LoopbackShare share,
                           const std::optional<LinkProfile>& link) {
  OVL_CHECK(world >= 1, "loopback world = {} must be at least 1", world);
  OVL_CHECK(!link || share == LoopbackShare::kRank0,
            "loopback: a link profile ({}) paces rank 0's share only; the share is {}", link ? link->name : "",
            to_string(share));
  Hardware h = base;
  h.name = fmt::format("{} loopback x{} ({})", base.name, world, to_string(share));
  h.loopback = true;
  h.copy_engine_GBps = 0;  // same-device copies (on SMs): the loopback's link rate
  if (share == LoopbackShare::kWholeWorld) {
    h.hbm_GBps = base.hbm_GBps / world;
    h.link_GBps = base.hbm_GBps / (2.0 * world);
    // The benchmark's CTA count drives all W ranks' shares at once: each rank's share gets 1/W of every CTA.
    h.per_cta_copy_GBps = base.per_cta_copy_GBps / world;
    h.tma_push_per_cta_GBps = base.tma_push_per_cta_GBps / world;
    h.tma_pull_per_cta_GBps = base.tma_pull_per_cta_GBps / world;
    h.simt_per_cta_GBps = base.simt_per_cta_GBps / world;
  } else {
    h.link_GBps = base.hbm_GBps;
    h.loopback_rank0 = true;
    // An NCCL-algorithm call is the SIMT loopback kernel here (coll_coeffs): its CTAs move bytes at the SIMT
    // kernel's per-CTA rate, and it launches as a plain kernel.
    h.nccl_per_cta_GBps = base.simt_per_cta_GBps;
    h.nccl_launch_us = base.tma_launch_us;
  }
  h.link_latency_us = std::min(base.link_latency_us, 0.5);
  h.nccl_efficiency = 1.0;  // nothing to lose to a link protocol: the "link" is the memory system itself
  if (link) {
    // Paced: the peers' bytes cross a link of the profile's rate, with its latency per step (comm_model.cpp).
    link->validate();
    h.name = fmt::format("{} loopback x{} (rank0, paced: {})", base.name, world, link->name);
    h.link_profile = link;
    h.link_GBps = link->link_GBps;
    h.link_latency_us = link->latency_us;
  }
  return h;
}

int nccl_default_ctas(const Hardware& hw) { return hw.link_profile ? hw.link_profile->nccl_ctas : kDefaultNcclCtas; }

void to_json(nlohmann::json& j, const Hardware& h) {
  j = nlohmann::json::object();
  j["name"] = h.name;
  for (const auto& f : kIntFields) j[f.name] = h.*f.member;
  for (const auto& f : kDoubleFields) j[f.name] = h.*f.member;
}

void from_json(const nlohmann::json& j, Hardware& h) {
  OVL_CHECK(j.is_object(), "hardware JSON must be an object, got {}", j.dump());
  Hardware out = h;
  if (j.contains("base")) out = builtin_hardware(detail::read_string(j, "base", "hardware"));
  if (j.contains("name")) out.name = detail::read_string(j, "name", "hardware");
  for (const auto& f : kIntFields) {
    if (!j.contains(f.name)) continue;
    const int v = detail::read_int32(j, f.name, "hardware");
    OVL_CHECK(v > 0, "hardware field \"{}\" = {} must be positive", f.name, v);
    out.*f.member = v;
  }
  for (const auto& f : kDoubleFields) {
    if (!j.contains(f.name)) continue;
    const double v = detail::read_number(j, f.name, "hardware");
    check_double(f.name, v, f.rule);
    out.*f.member = v;
  }
  for (const auto& [key, value] : j.items()) {
    // Keys starting with "_" (and "comment") are notes for people, e.g. where a calibrated value came from.
    const bool known =
        key == "name" || key == "base" || key == "comment" || key.rfind('_', 0) == 0 ||
        std::any_of(std::begin(kIntFields), std::end(kIntFields), [&](auto& f) { return key == f.name; }) ||
        std::any_of(std::begin(kDoubleFields), std::end(kDoubleFields), [&](auto& f) { return key == f.name; });
    OVL_CHECK(known, "hardware field \"{}\" = {} is not a Hardware field", key, value.dump());
  }
  out.validate();
  h = out;
}

Hardware load_hardware(const std::string& path) {
  const nlohmann::json j =
      parse_json_document(read_file_text(path, "hardware profile"), fmt::format("hardware profile \"{}\"", path));
  // A file with a "base" field starts from that built-in profile; without one, from the H200 profile.
  Hardware h = builtin_hardware("h200");
  try {
    from_json(j, h);
  } catch (const Error& e) {
    OVL_FAIL("hardware profile \"{}\": {}", path, e.message());
  } catch (const nlohmann::json::exception& e) {
    OVL_FAIL("hardware profile \"{}\": {}", path, e.what());
  }
  return h;
}

void save_hardware(const Hardware& h, const std::string& path) {
  std::ofstream out(path);
  OVL_CHECK(out.good(), "cannot write hardware profile \"{}\"", path);
  nlohmann::json j = h;
  out << j.dump(2) << "\n";
  OVL_CHECK(out.good(), "writing hardware profile \"{}\" failed", path);
}

}  // namespace ovl
