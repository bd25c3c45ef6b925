// Hardware: built-in profiles (each value with its source), validation, JSON.
#include "ovl/model/hardware.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_fields.hpp"
#include "ovl/model/hardware_fields.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/model/plan.hpp"
#include "profiles.hpp"

namespace ovl {
namespace {

using namespace hardware_fields;

constexpr double kMiB = 1024.0 * 1024.0;

constexpr std::string_view kSpec = "spec", kFit = "fit";

// The part a field belongs in ("spec" or "fit"), or empty for a name that is no field.
std::string_view part_of(std::string_view key) {
  auto named = [&](const auto& fields) {
    return std::any_of(std::begin(fields), std::end(fields), [&](const auto& f) { return key == f.name; });
  };
  if (named(kSpecIntFields) || named(kSpecFields)) return kSpec;
  if (named(kFitFields)) return kFit;
  return {};
}

// Keys starting with "_" are notes for people beside the numbers, e.g. where a value came from.
bool is_note(std::string_view key) { return !key.empty() && key.front() == '_'; }

void check_double(std::string_view part, const char* name, double v, Rule rule) {
  OVL_CHECK(std::isfinite(v), "hardware field \"{}.{}\" = {} must be finite", part, name, v);
  switch (rule) {
    case Rule::kPositive:
      OVL_CHECK(v > 0, "hardware field \"{}.{}\" = {} must be positive", part, name, v);
      break;
    case Rule::kNonNegative:
      OVL_CHECK(v >= 0, "hardware field \"{}.{}\" = {} must not be negative", part, name, v);
      break;
    case Rule::kFraction:
      OVL_CHECK(v > 0 && v <= 1, "hardware field \"{}.{}\" = {} must be in (0, 1]", part, name, v);
      break;
    case Rule::kUnit:
      OVL_CHECK(v >= 0 && v <= 1, "hardware field \"{}.{}\" = {} must be in [0, 1]", part, name, v);
      break;
  }
}

// The keys of one part's JSON object: its fields and notes; another part's field is refused with the part it
// belongs in.
void check_part_keys(const nlohmann::json& j, std::string_view part) {
  OVL_CHECK(j.is_object(), "hardware field \"{}\" = {} is not an object", part, json_excerpt(j));
  for (const auto& [key, value] : j.items()) {
    if (is_note(key)) continue;
    const std::string_view belongs = part_of(key);
    if (belongs == part) continue;
    OVL_CHECK(belongs.empty(), "hardware field \"{}.{}\" belongs in \"{}\", not in \"{}\"", part, key, belongs, part);
    OVL_FAIL("hardware field \"{}.{}\" = {} is not a {} field", part, key, value.dump(), part);
  }
}

template <typename Part, std::size_t N>
void read_doubles(const nlohmann::json& j, std::string_view part, const DoubleField<Part> (&fields)[N], Part& out) {
  for (const auto& f : fields) {
    if (!j.contains(f.name)) continue;
    const std::string path = fmt::format("{}.{}", part, f.name);
    const double v = detail::as_number(j[f.name], path.c_str(), "hardware");
    check_double(part, f.name, v, f.rule);
    out.*f.member = v;
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
  OVL_CHECK(spec.sm_count > 0, "hardware field \"spec.sm_count\" = {} must be positive", spec.sm_count);
  OVL_CHECK(spec.sm_granularity > 0, "hardware field \"spec.sm_granularity\" = {} must be positive",
            spec.sm_granularity);
  // 132 SMs with 8-SM partitions is the normal Hopper case (16 groups and a remainder of 4), so sm_count need
  // not be a multiple of the granularity; the granularity must fit in the device.
  OVL_CHECK(spec.sm_granularity <= spec.sm_count,
            "hardware field \"spec.sm_granularity\" = {} exceeds spec.sm_count = {}", spec.sm_granularity,
            spec.sm_count);
  OVL_CHECK(spec.compute_capability >= 30 && spec.compute_capability < 200,
            "hardware field \"spec.compute_capability\" = {} is not major x 10 + minor (90 for Hopper)",
            spec.compute_capability);
  for (const auto& f : kSpecFields) check_double(kSpec, f.name, spec.*f.member, f.rule);
  for (const auto& f : kFitFields) check_double(kFit, f.name, fit.*f.member, f.rule);
  OVL_CHECK(fit.clock_knee_sms <= spec.sm_count,
            "hardware field \"fit.clock_knee_sms\" = {} exceeds spec.sm_count = {}", fit.clock_knee_sms, spec.sm_count);
  OVL_CHECK(!emulation.paced || (emulation.loopback_rank0 && link),
            "hardware \"{}\": a paced loopback needs rank 0's share and a link", name);
  if (link) link->validate();  // its rates price every paced call, its tables a real world's calls
}

std::string Hardware::summary() const {
  return fmt::format(
      "{}: {} SMs (partitions of {}), {:.3f} TFLOP/s per SM ({:.0f} total) at {:.2f} GHz, HBM {:.0f} GB/s, "
      "L2 {:.0f} MiB, link {:.0f} GB/s, net {:.0f} GB/s; "
      "fit: link x{:.3f} ({:.2f} us), net {:.1f} us, per-CTA copy {:.0f} GB/s (push {:.0f}, pull {:.0f}, simt {:.0f}), "
      "gemm eff {:.3f} (L2 miss cost {:.2f}), cublas eff {:.3f} (partition penalty {:.3f}), clock (max(busy, {:.0f}) / "
      "{})^{:.3f}, "
      "operator GEMM x{:.3f}, "
      "launch {:.2f} us, epilogue {:.2f} us/tile (cublas {:.2f}), "
      "nccl eff {:.2f} ({:.0f} GB/s per CTA, symmetric kernels {:.1f}, launch {:.1f} us, per group {:.2f} us; "
      "loopback per piece {:.2f} us), "
      "tma launch {:.1f} us (per group {:.2f} us), "
      "overlapped comm rates x{:.3f} (nccl) / x{:.3f} (tma push), x{:.3f} beside the GEMM, hbm contention {:.2f}, "
      "shared-SM penalty {:.2f}",
      name, spec.sm_count, spec.sm_granularity, spec.matrix_tflops_per_sm, matrix_tflops(), spec.clock_ghz,
      spec.hbm_GBps, spec.l2_bytes / kMiB, spec.link_GBps, spec.net_GBps, fit.link_efficiency, fit.link_latency_us,
      fit.net_latency_us, fit.per_cta_copy_GBps, fit.tma_push_per_cta_GBps, fit.tma_pull_per_cta_GBps,
      fit.simt_per_cta_GBps, fit.gemm_efficiency, fit.gemm_l2_miss_cost, fit.cublas_efficiency,
      fit.cublas_partition_penalty, fit.clock_knee_sms, spec.sm_count, fit.clock_exponent, fit.operator_gemm_factor,
      fit.launch_us, fit.tile_epilogue_us, fit.cublas_tile_epilogue_us, fit.nccl_efficiency, fit.nccl_per_cta_GBps,
      fit.nccl_symmetric_per_cta_GBps, fit.nccl_launch_us, fit.nccl_group_us, fit.loopback_piece_us, fit.tma_launch_us,
      fit.tma_group_us, fit.overlap_nccl_rate_factor, fit.overlap_tma_rate_factor, fit.beside_gemm_rate_factor,
      fit.hbm_contention, fit.shared_sm_penalty);
}

namespace {
// The rates an overlapped mode's collective runs at, scaled: NCCL's (its per-CTA rates; in a real world over a measured
// link also the link's NCCL table) by `nccl`, the TMA push's by `tma`. A paced loopback's tables are its pace, which
// the movers keep whatever runs beside them: not scaled.
void scale_comm_rates(Hardware& h, double nccl, double tma) {
  h.fit.nccl_per_cta_GBps *= nccl;
  h.fit.nccl_symmetric_per_cta_GBps *= nccl;
  h.fit.tma_push_per_cta_GBps *= tma;
  if (h.link && !h.emulation.paced) {
    if (h.link->nccl_busbw) h.link->nccl_busbw->scale(nccl);
    if (h.link->tma_push_busbw) h.link->tma_push_busbw->scale(tma);
  }
}
}  // namespace

Hardware Hardware::overlapped_comm() const {
  Hardware h = *this;
  scale_comm_rates(h, fit.overlap_nccl_rate_factor, fit.overlap_tma_rate_factor);
  return h;
}

Hardware Hardware::beside_gemm_comm() const {
  Hardware h = overlapped_comm();
  scale_comm_rates(h, fit.beside_gemm_rate_factor, fit.beside_gemm_rate_factor);
  return h;
}

std::vector<std::string> hardware_field_names() {
  std::vector<std::string> names;
  for (const auto& f : kSpecIntFields) names.push_back(fmt::format("{}.{}", kSpec, f.name));
  for (const auto& f : kSpecFields) names.push_back(fmt::format("{}.{}", kSpec, f.name));
  for (const auto& f : kFitFields) names.push_back(fmt::format("{}.{}", kFit, f.name));
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
  // Whole words only: "NVIDIA GH200 480GB" (Grace Hopper's GPU, another memory and link) is not an H200, nor is an
  // "A1000" an A100.
  std::vector<std::string> words(1);
  for (const char c : n) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      words.back() += c;
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  for (const char* name : {"h200", "h100", "a100"})
    if (std::find(words.begin(), words.end(), name) != words.end()) return builtin(name);
  OVL_FAIL("no built-in hardware profile for device \"{}\" (built-in: h200, h100, a100)", device_name);
}

std::string_view to_string(LoopbackShare share) { return name_in(kLoopbackShareNames, share); }
LoopbackShare parse_loopback_share(std::string_view text) {
  return parse_name(kLoopbackShareNames, text, "loopback share");
}

Hardware loopback_hardware(const Hardware& base, int world, LoopbackShare share,
                           const std::optional<LinkProfile>& link) {
  OVL_CHECK(world >= 1, "loopback world = {} must be at least 1", world);
  OVL_CHECK(!base.emulation.loopback, "loopback: \"{}\" is a loopback profile already; give the device's profile",
            base.name);
  OVL_CHECK(!link || share == LoopbackShare::kRank0,
            "loopback: a link profile ({}) paces rank 0's share only; the share is {}", link ? link->name : "",
            to_string(share));
  Hardware h = base;
  h.name = fmt::format("{} loopback x{} ({})", base.name, world, to_string(share));
  h.emulation.loopback = true;
  // The SIMT kernel's rate in this world: it keeps 8 16-byte loads in flight per thread up to W = 8 (kIlp = 8 / W
  // vectors of W sources each, kernels/src/loopback.cu) and stores kIlp results per memory latency, so it moves 8 +
  // 8 / W vectors a latency against the 9 of W = 8, where the profiles' simt_per_cta_GBps was measured.
  const double simt = base.fit.simt_per_cta_GBps * simt_world_factor(world);
  h.fit.copy_engine_GBps = 0;  // same-device copies (on SMs): the loopback's link rate
  h.fit.link_efficiency = 1;   // the "link" is the memory system (or the paced link), at its rate
  if (share == LoopbackShare::kWholeWorld) {
    h.spec.hbm_GBps = base.spec.hbm_GBps / world;
    h.spec.link_GBps = base.spec.hbm_GBps / (2.0 * world);
    // The benchmark's CTA count drives all W ranks' shares at once: each rank's share gets 1/W of every CTA.
    h.fit.per_cta_copy_GBps = base.fit.per_cta_copy_GBps / world;
    h.fit.tma_push_per_cta_GBps = base.fit.tma_push_per_cta_GBps / world;
    h.fit.tma_pull_per_cta_GBps = base.fit.tma_pull_per_cta_GBps / world;
    h.fit.simt_per_cta_GBps = simt / world;
  } else {
    h.spec.link_GBps = base.spec.hbm_GBps;
    h.emulation.loopback_rank0 = true;
    // An NCCL-algorithm call is the SIMT loopback kernel here (coll_coeffs): its CTAs move bytes at the SIMT
    // kernel's per-CTA rate, and it launches as a plain kernel.
    h.fit.simt_per_cta_GBps = simt;
    h.fit.nccl_per_cta_GBps = simt;
    h.fit.nccl_launch_us = base.fit.tma_launch_us;
  }
  h.fit.link_latency_us = std::min(base.fit.link_latency_us, 0.5);
  h.fit.nccl_efficiency = 1.0;  // nothing to lose to a link protocol: the "link" is the memory system itself
  if (link) {
    // Paced: the peers' bytes cross a link of the profile's rate, with its latency per step (comm_model.cpp).
    link->validate();
    h.name = fmt::format("{} loopback x{} (rank0, paced: {})", base.name, world, link->name);
    h.link = link;
    h.emulation.paced = true;
    h.spec.link_GBps = link->link_GBps;
    h.fit.link_latency_us = link->latency_us;
  }
  return h;
}

double simt_world_factor(int world) {
  OVL_CHECK(world >= 1, "loopback world = {} must be at least 1", world);
  const double w = std::min(world, 8);
  return (8 + 8 / w) / 9;
}

Hardware with_link(const Hardware& base, const LinkProfile& link) {
  OVL_CHECK(!base.emulation.loopback,
            "with_link: \"{}\" is a loopback profile; a loopback plays a link with loopback_hardware's link",
            base.name);
  link.validate();
  Hardware h = base;
  h.name = fmt::format("{} over {}", base.name, link.name);
  h.link = link;
  return h;
}

int nccl_default_ctas(const Hardware& hw) { return hw.link ? hw.link->nccl_ctas : kDefaultNcclCtas; }

void to_json(nlohmann::json& j, const Hardware& h) {
  j = nlohmann::json::object();
  j["name"] = h.name;
  nlohmann::json& spec = j[kSpec] = nlohmann::json::object();
  for (const auto& f : kSpecIntFields) spec[f.name] = h.spec.*f.member;
  for (const auto& f : kSpecFields) spec[f.name] = h.spec.*f.member;
  nlohmann::json& fit = j[kFit] = nlohmann::json::object();
  for (const auto& f : kFitFields) fit[f.name] = h.fit.*f.member;
}

void from_json(const nlohmann::json& j, Hardware& h) {
  OVL_CHECK(j.is_object(), "hardware JSON must be an object, got {}", json_excerpt(j));
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "base" || key == "comment" || key == kSpec || key == kFit || is_note(key)) continue;
    const std::string_view part = part_of(key);
    // A profile written before the fields were parted names them at the top level.
    OVL_CHECK(part.empty(),
              "hardware field \"{}\" is at the top level: move it into \"{}\" ({}); a profile reads "
              "{{\"name\": ..., \"spec\": {{...}}, \"fit\": {{...}}}}",
              key, part, part == kSpec ? "the device's facts" : "the model's parameters");
    OVL_FAIL("hardware field \"{}\" = {} is not a Hardware field", key, value.dump());
  }
  Hardware out = h;
  if (j.contains("base")) out = builtin_hardware(detail::read_string(j, "base", "hardware"));
  if (j.contains("name")) out.name = detail::read_string(j, "name", "hardware");
  if (const auto spec = j.find(kSpec); spec != j.end()) {
    check_part_keys(*spec, kSpec);
    for (const auto& f : kSpecIntFields) {
      if (!spec->contains(f.name)) continue;
      const std::string path = fmt::format("{}.{}", kSpec, f.name);
      const int v = detail::as_int32((*spec)[f.name], path.c_str(), "hardware");
      OVL_CHECK(v > 0, "hardware field \"{}\" = {} must be positive", path, v);
      out.spec.*f.member = v;
    }
    read_doubles(*spec, kSpec, kSpecFields, out.spec);
  }
  if (const auto fit = j.find(kFit); fit != j.end()) {
    check_part_keys(*fit, kFit);
    read_doubles(*fit, kFit, kFitFields, out.fit);
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
  // The emulation is not part of a profile's JSON: a loopback profile saved would load as a device with the
  // emulated rates and no emulation.
  OVL_CHECK(!h.emulation.loopback,
            "hardware profile \"{}\" is a loopback profile (\"{}\"): save the device's profile and plan with the "
            "loopback instead",
            path, h.name);
  std::ofstream out(path);
  OVL_CHECK(out.good(), "cannot write hardware profile \"{}\"", path);
  // The name first, then the device's facts, then the model's parameters (nlohmann::json itself sorts its keys).
  const nlohmann::json j = h;
  nlohmann::ordered_json ordered;
  for (const char* key : {"name", "spec", "fit"}) ordered[key] = j.at(key);
  out << ordered.dump(2) << "\n";
  OVL_CHECK(out.good(), "writing hardware profile \"{}\" failed", path);
}

}  // namespace ovl
