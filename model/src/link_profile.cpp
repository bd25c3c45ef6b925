// LinkProfile: the built-in profiles (model/profiles/*.json), validation, JSON.
#include "ovl/model/link_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "json_fields.hpp"
#include "ovl/error.hpp"
#include "ovl/model/json_document.hpp"
#include "ovl/model/plan.hpp"
#include "profiles.hpp"

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
  if (algo == CommAlgo::kSimt) per_cta = simt_per_cta_GBps;
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
  const auto names = builtin_link_profile_names();
  OVL_CHECK(std::find(names.begin(), names.end(), name) != names.end(),
            "unknown link profile \"{}\" (built-in: nvlink4-node8, h200x2; or a JSON file)", name);
  // model/profiles/<name>.json (each value beside its source), embedded at build time.
  const nlohmann::json j =
      parse_json_document(detail::embedded_profile(name), fmt::format("built-in link profile {}", name));
  LinkProfile p;
  from_json(j, p);
  return p;
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
