// LinkProfile: the built-in profiles (model/profiles/*.json), validation, JSON.
#include "ovl/model/link_profile.hpp"

#include <fmt/ranges.h>

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

struct TableField {
  const char* name;
  std::optional<BusbwTable> LinkProfile::*member;
};
// Every measured table of LinkProfile: JSON I/O and validation walk this one list.
constexpr TableField kTables[] = {{"nccl_busbw", &LinkProfile::nccl_busbw},
                                  {"tma_push_busbw", &LinkProfile::tma_push_busbw},
                                  {"tma_pull_busbw", &LinkProfile::tma_pull_busbw}};

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
  for (const auto& t : kTables)
    if (this->*t.member) (this->*t.member)->validate(name, t.name);
}

namespace {
struct TableOp {
  Collective c;
  std::vector<std::vector<double>> BusbwTable::*rows;
};
// Every collective of BusbwTable: validation, lookup and JSON walk this one table (JSON keys: to_string(c)).
const TableOp kTableOps[] = {{Collective::kAllReduce, &BusbwTable::allreduce},
                             {Collective::kReduceScatter, &BusbwTable::reducescatter},
                             {Collective::kAllGather, &BusbwTable::allgather}};
const std::vector<std::vector<double>>& table_rows(const BusbwTable& t, Collective c) {
  for (const auto& op : kTableOps)
    if (op.c == c) return t.*op.rows;
  OVL_FAIL("unknown collective");
}
// The points lo, hi of an increasing axis of n points (at(k): point k) around x, and x's place between them (0..1),
// clamped to the ends (lo = hi on an axis of one point).
struct Segment {
  size_t lo, hi;
  double u;
};
template <typename At>
Segment bracket(size_t n, At at, double x) {
  if (n == 1 || x <= at(0)) return {0, 0, 0.0};
  if (x >= at(n - 1)) return {n - 2, n - 1, 1.0};
  size_t i = 0;
  while (at(i + 1) < x) ++i;
  return {i, i + 1, (x - at(i)) / (at(i + 1) - at(i))};
}
}  // namespace

void BusbwTable::validate(const std::string& profile, std::string_view field) const {
  const auto increasing = [](const auto& v) {
    return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
  };
  const bool finite = std::all_of(sizes_MiB.begin(), sizes_MiB.end(), [](double x) { return std::isfinite(x); });
  OVL_CHECK(!sizes_MiB.empty() && finite && increasing(sizes_MiB) && sizes_MiB.front() > 0,
            "link profile \"{}\": field \"{}.sizes_MiB\" = [{}] must be positive, finite and strictly increasing",
            profile, field, fmt::join(sizes_MiB, ", "));
  OVL_CHECK(!ctas.empty() && increasing(ctas) && ctas.front() >= 1 && ctas.back() <= 1024,
            "link profile \"{}\": field \"{}.ctas\" = [{}] must be in 1..1024 and strictly increasing", profile, field,
            fmt::join(ctas, ", "));
  for (const auto& op : kTableOps) {
    const auto& rows = this->*op.rows;
    const std::string_view name = to_string(op.c);
    OVL_CHECK(rows.size() == ctas.size(), "link profile \"{}\": field \"{}.{}\" has {} rows, one per CTA count ({})",
              profile, field, name, rows.size(), ctas.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      OVL_CHECK(rows[i].size() == sizes_MiB.size(),
                "link profile \"{}\": field \"{}.{}\" row {} (ctas {}) has {} values, one per size ({})", profile,
                field, name, i, ctas[i], rows[i].size(), sizes_MiB.size());
      for (size_t j = 0; j < rows[i].size(); ++j)
        OVL_CHECK(std::isfinite(rows[i][j]) && rows[i][j] > 0,
                  "link profile \"{}\": field \"{}.{}\" [{}][{}] = {} must be positive", profile, field, name, i, j,
                  rows[i][j]);
    }
  }
}

double BusbwTable::GBps(Collective c, int call_ctas, double bytes) const {
  OVL_CHECK(call_ctas >= 1, "busbw table: ctas = {} must be at least 1", call_ctas);
  OVL_CHECK(std::isfinite(bytes) && bytes > 0, "busbw table: call bytes = {} must be positive", bytes);
  const auto& rows = table_rows(*this, c);
  const double mib = bytes / double(1 << 20);
  const Segment t = bracket(
      ctas.size(), [&](size_t k) { return double(ctas[k]); }, double(call_ctas));
  // A row's rate at `mib`: the time (size / busbw, up to the collective's factor) linear in the size between the
  // measured sizes, as a call's time is its latency plus its bytes at a rate; beyond the largest size that size's
  // rate; below the smallest, that size's time (the rate falls with the bytes).
  const size_t n = sizes_MiB.size();
  const auto row = [&](size_t r) {
    const auto time = [&](size_t k) { return sizes_MiB[k] / rows[r][k]; };
    if (mib >= sizes_MiB[n - 1]) return rows[r][n - 1];
    if (mib <= sizes_MiB[0]) return mib / time(0);
    size_t k = 0;
    while (sizes_MiB[k + 1] < mib) ++k;
    const double u = (mib - sizes_MiB[k]) / (sizes_MiB[k + 1] - sizes_MiB[k]);
    return mib / ((1 - u) * time(k) + u * time(k + 1));
  };
  return (1 - t.u) * row(t.lo) + t.u * row(t.hi);
}

void BusbwTable::scale(double factor) {
  OVL_CHECK(std::isfinite(factor) && factor > 0, "busbw table: scale factor {} must be positive", factor);
  for (const auto& op : kTableOps)
    for (auto& row : this->*op.rows)
      for (double& v : row) v *= factor;
}

double LinkProfile::paced_cta_GBps(CommAlgo algo, int ctas, Collective c, double call_bytes) const {
  OVL_CHECK(ctas >= 1, "link profile: ctas = {} must be at least 1", ctas);
  if (const BusbwTable* t = measured_table(algo, call_bytes)) return t->GBps(c, ctas, call_bytes) / ctas;
  double per_cta = nccl_per_cta_GBps;
  if (algo == CommAlgo::kTmaPush) per_cta = tma_push_per_cta_GBps;
  if (algo == CommAlgo::kTmaPull) per_cta = tma_pull_per_cta_GBps;
  if (algo == CommAlgo::kSimt) per_cta = simt_per_cta_GBps;
  return std::min(link_GBps / ctas, per_cta);
}

const BusbwTable* LinkProfile::measured_table(CommAlgo algo, double call_bytes) const {
  const std::optional<BusbwTable>* t = algo == CommAlgo::kNcclRing  ? &nccl_busbw
                                       : algo == CommAlgo::kTmaPush ? &tma_push_busbw
                                       : algo == CommAlgo::kTmaPull ? &tma_pull_busbw
                                                                    : nullptr;
  return t != nullptr && t->has_value() && call_bytes > 0 ? &**t : nullptr;
}

bool LinkProfile::latency_measured(CommAlgo algo, double call_bytes) const {
  return is_nccl(algo) && measured_table(algo, call_bytes) != nullptr;
}

namespace {
// "; calls at measured busbw: nccl (6 sizes 1-1024 MiB x 7 CTA counts), tma_push (...)", or "" without tables.
std::string measured_summary(const LinkProfile& p) {
  std::vector<std::string> parts;
  for (const auto& t : kTables) {
    if (const auto& table = p.*t.member) {
      std::string_view name(t.name);
      name.remove_suffix(std::string_view("_busbw").size());
      parts.push_back(fmt::format("{} ({} sizes {}-{} MiB x {} CTA counts)", name, table->sizes_MiB.size(),
                                  table->sizes_MiB.front(), table->sizes_MiB.back(), table->ctas.size()));
    }
  }
  return parts.empty() ? std::string() : fmt::format("; calls at measured busbw: {}", fmt::join(parts, ", "));
}
}  // namespace

std::string LinkProfile::summary() const {
  return fmt::format(
             "link profile {}: {:.1f} GB/s per direction, {:.2f} us per step; per CTA: nccl {:.1f} (on {} CTAs), "
             "tma-push "
             "{:.1f}, tma-pull {:.1f}, simt {:.1f} GB/s",
             name, link_GBps, latency_us, nccl_per_cta_GBps, nccl_ctas, tma_push_per_cta_GBps, tma_pull_per_cta_GBps,
             simt_per_cta_GBps) +
         measured_summary(*this);
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
  const nlohmann::json j =
      parse_json_document(read_file_text(path, "link profile"), fmt::format("link profile \"{}\"", path));
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
  for (const auto& f : kTables) {
    const std::optional<BusbwTable>& table = p.*f.member;
    if (!table) continue;
    nlohmann::json t = {{"sizes_MiB", table->sizes_MiB}, {"ctas", table->ctas}};
    for (const auto& op : kTableOps) t[std::string(to_string(op.c))] = *table.*op.rows;
    j[f.name] = std::move(t);
  }
}

namespace {
// A busbw table's JSON (field `field`): sizes_MiB, ctas and a [ctas][size] array per collective; notes under keys
// starting with "_".
BusbwTable read_busbw_table(const nlohmann::json& j, const char* field) {
  const std::string what = fmt::format("link profile {}", field);
  const char* kTable = what.c_str();
  OVL_CHECK(j.is_object(), "link profile field \"{}\" = {} is not an object", field, json_excerpt(j));
  const auto numbers = [&](const nlohmann::json& v, const std::string& name) {
    OVL_CHECK(v.is_array(), "{} field \"{}\" = {} is not an array", kTable, name, json_excerpt(v));
    std::vector<double> out;
    for (const auto& x : v) out.push_back(detail::as_number(x, name.c_str(), kTable));
    return out;
  };
  BusbwTable t;
  t.sizes_MiB = numbers(detail::require_field(j, "sizes_MiB", kTable), "sizes_MiB");
  for (const double c : numbers(detail::require_field(j, "ctas", kTable), "ctas")) {
    OVL_CHECK(c == std::floor(c) && c >= 1 && c <= 1024, "{} field \"ctas\" holds {}, not a CTA count in 1..1024",
              kTable, c);
    t.ctas.push_back(int(c));
  }
  for (const auto& op : kTableOps) {
    const std::string name(to_string(op.c));
    const nlohmann::json& rows = detail::require_field(j, name.c_str(), kTable);
    OVL_CHECK(rows.is_array(), "{} field \"{}\" = {} is not an array of rows", kTable, name, json_excerpt(rows));
    for (const auto& r : rows) (t.*op.rows).push_back(numbers(r, name));
  }
  for (const auto& [key, value] : j.items()) {
    const bool known = key == "sizes_MiB" || key == "ctas" || key.rfind('_', 0) == 0 ||
                       std::any_of(std::begin(kTableOps), std::end(kTableOps),
                                   [&](const TableOp& op) { return key == to_string(op.c); });
    OVL_CHECK(known, "{} field \"{}\" = {} is not a field of a busbw table", kTable, key, json_excerpt(value));
  }
  return t;
}
}  // namespace

void from_json(const nlohmann::json& j, LinkProfile& p) {
  OVL_CHECK(j.is_object(), "link profile JSON must be an object, got {}", json_excerpt(j));
  LinkProfile out;
  out.name = detail::read_string(j, "name", kWhat);
  out.source = detail::read_string(j, "source", kWhat);
  for (const auto& f : kRates) out.*f.member = detail::read_number(j, f.name, kWhat);
  out.nccl_ctas = detail::read_int32(j, "nccl_ctas", kWhat);
  out.latency_us = detail::read_number(j, "latency_us", kWhat);
  for (const auto& t : kTables)
    if (const auto it = j.find(t.name); it != j.end()) out.*t.member = read_busbw_table(*it, t.name);
  for (const auto& [key, value] : j.items()) {
    const bool known = key == "name" || key == "source" || key == "nccl_ctas" || key == "latency_us" ||
                       key == "comment" || key.rfind('_', 0) == 0 ||
                       std::any_of(std::begin(kRates), std::end(kRates), [&](auto& f) { return key == f.name; }) ||
                       std::any_of(std::begin(kTables), std::end(kTables), [&](auto& f) { return key == f.name; });
    OVL_CHECK(known, "link profile field \"{}\" = {} is not a LinkProfile field", key, json_excerpt(value));
  }
  out.validate();
  p = std::move(out);
}

}  // namespace ovl
