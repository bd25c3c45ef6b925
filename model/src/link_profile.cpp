// LinkProfile: the built-in profiles (each value with its source), validation, JSON.
#include "ovl/model/link_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "ovl/error.hpp"
#include "ovl/model/plan.hpp"

namespace ovl {
namespace {

constexpr const char* kWhat = "link profile";

struct RateField {
  const char* name;
  double LinkProfile::*member;
};
// Every rate of LinkProfile: JSON I/O and validation walk this one table.
constexpr RateField kRates[] = {
    {"link_GBps", &LinkProfile::link_GBps},
    {"nccl_per_cta_GBps", &LinkProfile::nccl_per_cta_GBps},
    {"tma_push_per_cta_GBps", &LinkProfile::tma_push_per_cta_GBps},
    {"tma_pull_per_cta_GBps", &LinkProfile::tma_pull_per_cta_GBps},
    {"simt_per_cta_GBps", &LinkProfile::simt_per_cta_GBps},
};

// The per-CTA rates of our kernels over NVLink 4, fitted from the 2-H200 runs (results/h200x2/bench_collectives.json,
// `scripts/results.py link-profile`): busbw / CTAs at 1-8 CTAs, the median over AllReduce, ReduceScatter and
// AllGather at 1 GiB. A transport's per-CTA rate is its kernel's, so the 8-GPU profile keeps them.
constexpr double kTmaPushPerCta = 23.0;
constexpr double kTmaPullPerCta = 19.4;
constexpr double kSimtPerCta = 5.0;

LinkProfile nvlink4_node8() {
  LinkProfile p;
  p.name = "nvlink4-node8";
  p.source =
      "an 8-GPU NVLink-4 NVSwitch node (DGX/HGX H100 or H200): link 450 GB/s per direction (18 NVLink-4 links x 25 "
      "GB/s, the datasheet's 900 GB/s bidirectional); NCCL on its own 24 channels (its choice on the 2-H200 "
      "NVLink-4 run; not measured on 8 GPUs) at 370 / 24 GB/s each, so that its ring AllReduce reaches the ~370 "
      "GB/s busbw nccl-tests reports on 8 H100 SXM with NVLS off; TMA push / pull and SIMT per-CTA rates: our "
      "kernels on the 2-H200 run (h200x2); latency 0.7 us per ring step (a small-message ring AllReduce on 8 GPUs "
      "~ 8 + 14 x 0.7 us, the order nccl-tests reports on DGX H100; a guess)";
  p.link_GBps = 450;
  p.nccl_ctas = 24;
  p.nccl_per_cta_GBps = 370.0 / 24.0;
  p.tma_push_per_cta_GBps = kTmaPushPerCta;
  p.tma_pull_per_cta_GBps = kTmaPullPerCta;
  p.simt_per_cta_GBps = kSimtPerCta;
  p.latency_us = 0.7;
  return p;
}

LinkProfile h200x2() {
  LinkProfile p;
  p.name = "h200x2";
  p.source =
      "two H200 SXM over NV18 (NVLink 4), fitted by `scripts/results.py link-profile "
      "results/h200x2/bench_collectives.json`: link = the best busbw at 1 GiB (NCCL AllReduce on 32 CTAs, 345.8 "
      "GB/s); per-CTA = median busbw / CTAs at 1-8 CTAs over AllReduce, ReduceScatter, AllGather at 1 GiB; latency "
      "= NCCL's 1 MiB AllReduce on its own CTAs (14.3 us) less its link time, over its 2 ring steps (it includes "
      "NCCL's launch); NCCL's own choice of 24 CTAs on that run (docs/performance.md)";
  p.link_GBps = 345.8;
  p.nccl_ctas = 24;
  p.nccl_per_cta_GBps = 18.1;
  p.tma_push_per_cta_GBps = kTmaPushPerCta;
  p.tma_pull_per_cta_GBps = kTmaPullPerCta;
  p.simt_per_cta_GBps = kSimtPerCta;
  p.latency_us = 5.64;
  return p;
}

}  // namespace

void LinkProfile::validate() const {
  OVL_CHECK(!name.empty(), "link profile field \"name\" must not be empty");
  for (const auto& f : kRates) {
    const double v = this->*f.member;
    OVL_CHECK(std::isfinite(v) && v > 0, "link profile \"{}\": field \"{}\" = {} must be positive", name, f.name, v);
  }
  OVL_CHECK(nccl_ctas >= 1 && nccl_ctas <= 1024, "link profile \"{}\": field \"nccl_ctas\" = {} must be in 1..1024",
            name, nccl_ctas);
  OVL_CHECK(std::isfinite(latency_us) && latency_us >= 0,
            "link profile \"{}\": field \"latency_us\" = {} must not be negative", name, latency_us);
}

double LinkProfile::paced_cta_GBps(CommAlgo algo, int ctas) const {
  OVL_CHECK(ctas >= 1, "link profile: ctas = {} must be at least 1", ctas);
  double per_cta = nccl_per_cta_GBps;
  if (algo == CommAlgo::kTmaPush) per_cta = tma_push_per_cta_GBps;
  if (algo == CommAlgo::kTmaPull) per_cta = tma_pull_per_cta_GBps;
  return std::min(link_GBps / ctas, per_cta);
}

std::string LinkProfile::summary() const {
  return fmt::format(
      "link profile {}: {:.1f} GB/s per direction, {:.2f} us per step; per CTA: nccl {:.1f} (on {} CTAs), tma-push "
      "{:.1f}, tma-pull {:.1f}, simt {:.1f} GB/s",
      name, link_GBps, latency_us, nccl_per_cta_GBps, nccl_ctas, tma_push_per_cta_GBps, tma_pull_per_cta_GBps,
      simt_per_cta_GBps);
}

LinkProfile builtin_link_profile(std::string_view name) {
  if (name == "nvlink4-node8") return nvlink4_node8();
  if (name == "h200x2") return h200x2();
  OVL_FAIL("unknown link profile \"{}\" (built-in: nvlink4-node8, h200x2; or a JSON file)", name);
}

std::vector<std::string> builtin_link_profile_names() { return {"nvlink4-node8", "h200x2"}; }

LinkProfile load_link_profile(const std::string& path) {
  std::ifstream in(path);
  OVL_CHECK(in.good(), "cannot open link profile \"{}\"", path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    OVL_FAIL("link profile \"{}\" is not valid JSON: {}", path, e.what());
  }
  LinkProfile p;
  try {
    from_json(j, p);
  } catch (const Error& e) {
    OVL_FAIL("link profile \"{}\": {}", path, e.message());
  }
  return p;
}

LinkProfile link_profile_from_arg(const std::string& name_or_path) {
  const auto names = builtin_link_profile_names();
  if (std::find(names.begin(), names.end(), name_or_path) != names.end()) return builtin_link_profile(name_or_path);
  return load_link_profile(name_or_path);
}

std::optional<LinkProfile> link_profile_from_env() {
  const char* v = std::getenv("OVL_LINK_PROFILE");
  if (v == nullptr || *v == '\0') return std::nullopt;
  try {
    return link_profile_from_arg(v);
  } catch (const Error& e) {
    OVL_FAIL("OVL_LINK_PROFILE = \"{}\": {}", v, e.message());
  }
}

void to_json(nlohmann::json& j, const LinkProfile& p) {
  j = nlohmann::json::object();
  j["name"] = p.name;
  j["source"] = p.source;
  for (const auto& f : kRates) j[f.name] = p.*f.member;
  j["nccl_ctas"] = p.nccl_ctas;
  j["latency_us"] = p.latency_us;
}

void from_json(const nlohmann::json& j, LinkProfile& p) {
  OVL_CHECK(j.is_object(), "link profile JSON must be an object, got {}", j.dump());
  LinkProfile out;
  out.name = detail::read_string(j, "name", kWhat);
  out.source = detail::read_string(j, "source", kWhat);
  for (const auto& f : kRates) out.*f.member = detail::read_number(j, f.name, kWhat);
  out.nccl_ctas = detail::read_int32(j, "nccl_ctas", kWhat);
  out.latency_us = detail::read_number(j, "latency_us", kWhat);
  for (const auto& [key, value] : j.items()) {
    const bool known = key == "name" || key == "source" || key == "nccl_ctas" || key == "latency_us" ||
                       key == "comment" || key.rfind('_', 0) == 0 ||
                       std::any_of(std::begin(kRates), std::end(kRates), [&](auto& f) { return key == f.name; });
    OVL_CHECK(known, "link profile field \"{}\" = {} is not a LinkProfile field", key, value.dump());
  }
  out.validate();
  p = std::move(out);
}

}  // namespace ovl
