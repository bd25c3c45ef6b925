// Parsing the benchmark names (see bench_names.hpp).
#include "ovl/tools/bench_names.hpp"

#include <algorithm>
#include <charconv>
#include <vector>

#include "ovl/error.hpp"

namespace ovl {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// "key:<int>" -> int
std::optional<int64_t> keyed(std::string_view s, std::string_view key) {
  if (!starts_with(s, key) || s.size() <= key.size() || s[key.size()] != ':') return std::nullopt;
  return to_int(s.substr(key.size() + 1));
}

bool parse_mnk(std::string_view s, BenchCase& c) {
  const auto parts = split(s, 'x');
  if (parts.size() != 3) return false;
  const auto m = to_int(parts[0]), n = to_int(parts[1]), k = to_int(parts[2]);
  // Each size as Problem::validate bounds it (kMaxProblemDim): a larger one is no benchmark's.
  for (const auto& v : {m, n, k})
    if (!v || *v == 0 || *v >= kMaxProblemDim) return false;
  c.m = *m;
  c.n = *n;
  c.k = *k;
  return true;
}

std::optional<Collective> parse_collective(std::string_view s) {
  if (s == "allreduce" || s == "gemm-allreduce") return Collective::kAllReduce;
  if (s == "reducescatter" || s == "gemm-reducescatter") return Collective::kReduceScatter;
  if (s == "allgather" || s == "allgather-gemm") return Collective::kAllGather;
  return std::nullopt;
}

Op op_of(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return Op::kGemmAllReduce;
    case Collective::kReduceScatter:
      return Op::kGemmReduceScatter;
    case Collective::kAllGather:
      return Op::kAllGatherGemm;
  }
  return Op::kGemmAllReduce;
}

bool fits_int(int64_t v) { return v >= 0 && v <= (int64_t(1) << 30); }

}  // namespace

std::string_view to_string(BenchKind kind) { return name_in(kBenchKindNames, kind); }

GemmImpl BenchCase::gemm_impl() const {
  return impl == "cublas" || impl == "cublas-fp16" ? GemmImpl::kCublas : GemmImpl::kOvl;
}

CommAlgo BenchCase::comm_algo() const { return find_name(kCommAlgoNames, impl).value_or(CommAlgo::kTmaPush); }

std::string BenchCase::name() const {
  switch (kind) {
    case BenchKind::kGemm:
      return fmt::format("gemm/{}/{}x{}x{}/{}/sms:{}", impl, m, n, k, to_string(b_layout), sms);
    case BenchKind::kCollective:
      return fmt::format("coll/{}/{}/{}/world:{}/ctas:{}", impl, to_string(collective), bytes, world, ctas);
    case BenchKind::kCopy:
      return fmt::format("copy/{}/{}/ctas:{}", impl, bytes, ctas);
    case BenchKind::kOverlap:
      return fmt::format("overlap/{}/{}/{}x{}x{}/world:{}/comm_sms:{}{}{}{}", to_string(mode), to_string(collective),
                         m, n, k, world, comm_sms, groups > 0 ? fmt::format("/groups:{}", groups) : std::string(),
                         order == TileOrder::kSwizzle ? "/order:swizzle" : "",
                         dtype != DType::kBF16 ? fmt::format("/dtype:{}", to_string(dtype)) : std::string());
  }
  return {};
}

std::optional<BenchCase> parse_bench_name(std::string_view name) {
  // Aggregates: keep the mean and median rows (as the case itself), drop the spread rows.
  for (std::string_view agg : {"_stddev", "_cv"}) {
    if (ends_with(name, agg)) return std::nullopt;
  }
  for (std::string_view agg : {"_mean", "_median"}) {
    if (ends_with(name, agg)) {
      name.remove_suffix(agg.size());
      break;
    }
  }
  auto parts = split(name, '/');
  // Google Benchmark's own suffixes.
  while (parts.size() > 1) {
    const std::string_view last = parts.back();
    if (last == "manual_time" || last == "real_time" || last == "process_time" || starts_with(last, "iterations:") ||
        starts_with(last, "repeats:") || starts_with(last, "threads:") || starts_with(last, "min_time:") ||
        starts_with(last, "min_warmup_time:")) {
      parts.pop_back();
    } else {
      break;
    }
  }
  if (parts.empty()) return std::nullopt;
  BenchCase c;
  const std::string_view kind = parts[0];
  if (kind == "gemm" && parts.size() == 5) {
    c.kind = BenchKind::kGemm;
    c.impl = std::string(parts[1]);
    if (c.impl != "ovl" && c.impl != "ovl-nosignal" && c.impl != "ovl-nosk" && c.impl != "cublas" &&
        c.impl != "ovl-fp16" && c.impl != "cublas-fp16") {
      return std::nullopt;
    }
    if (!parse_mnk(parts[2], c)) return std::nullopt;
    if (parts[3] == "nn")
      c.b_layout = BLayout::kKxN;
    else if (parts[3] == "nt")
      c.b_layout = BLayout::kNxK;
    else
      return std::nullopt;
    const auto sms = keyed(parts[4], "sms");
    if (!sms || *sms < 1 || !fits_int(*sms)) return std::nullopt;
    c.sms = int(*sms);
    return c;
  }
  if (kind == "coll" && parts.size() == 6) {
    c.kind = BenchKind::kCollective;
    c.impl = std::string(parts[1]);
    const std::optional<CommAlgo> algo = find_name(kCommAlgoNames, c.impl);
    if (!algo || (*algo != CommAlgo::kNcclRing && *algo != CommAlgo::kNcclNvls && *algo != CommAlgo::kTmaPush &&
                  *algo != CommAlgo::kTmaPull && *algo != CommAlgo::kSimt)) {
      return std::nullopt;
    }
    const auto coll = parse_collective(parts[2]);
    const auto bytes = to_int(parts[3]);
    const auto world = keyed(parts[4], "world");
    const auto ctas = keyed(parts[5], "ctas");
    if (!coll || !bytes || !world || !ctas || *world < 1 || *ctas < 1 || !fits_int(*world) || !fits_int(*ctas)) {
      return std::nullopt;
    }
    c.collective = *coll;
    c.bytes = *bytes;
    c.world = int(*world);
    c.ctas = int(*ctas);
    return c;
  }
  if (kind == "copy" && parts.size() == 4) {
    c.kind = BenchKind::kCopy;
    c.impl = std::string(parts[1]);
    const auto bytes = to_int(parts[2]);
    const auto ctas = keyed(parts[3], "ctas");
    if (c.impl.empty() || !bytes || !ctas || *ctas < 1 || !fits_int(*ctas)) return std::nullopt;
    c.bytes = *bytes;
    c.ctas = int(*ctas);
    return c;
  }
  if (kind == "overlap" && parts.size() >= 6 && starts_with(parts.back(), "dtype:")) {  // the last part, optional
    const std::optional<DType> d = find_name(kDTypeNames, parts.back().substr(6));
    if (!d || *d == DType::kFP32) return std::nullopt;  // the inputs bench_overlap runs: bf16, fp16, e4m3, e5m2
    c.dtype = *d;
    parts.pop_back();
  }
  if (kind == "overlap" && parts.size() >= 6 && parts.size() <= 8) {
    c.kind = BenchKind::kOverlap;
    c.impl = std::string(parts[1]);
    bool mode_ok = false;
    for (Mode m : all_modes()) {
      if (parts[1] == to_string(m)) {
        c.mode = m;
        mode_ok = true;
      }
    }
    const auto coll = parse_collective(parts[2]);
    const auto world = keyed(parts[4], "world");
    const auto comm_sms = keyed(parts[5], "comm_sms");
    if (!mode_ok || !coll || !parse_mnk(parts[3], c) || !world || !comm_sms || *world < 1 || !fits_int(*world) ||
        !fits_int(*comm_sms)) {
      return std::nullopt;
    }
    if (parts.size() >= 7) {  // groups:<g>, only for the modes with tile groups
      const auto groups = keyed(parts[6], "groups");
      const bool grouped = c.mode == Mode::kTileSignal || c.mode == Mode::kGreenContext || c.mode == Mode::kTma;
      if (!groups || *groups < 1 || !fits_int(*groups) || !grouped) return std::nullopt;
      c.groups = int(*groups);
    }
    if (parts.size() == 8) {  // order:swizzle, after groups:<g>
      if (parts[7] != "order:swizzle") return std::nullopt;
      c.order = TileOrder::kSwizzle;
    }
    c.collective = *coll;
    c.op = op_of(*coll);
    c.world = int(*world);
    c.comm_sms = int(*comm_sms);
    return c;
  }
  return std::nullopt;
}

BenchCase BenchCase::of_run(const Problem& problem, const Plan& plan) {
  BenchCase c;
  c.kind = BenchKind::kOverlap;
  c.impl = std::string(to_string(plan.mode));
  c.mode = plan.mode;
  c.op = problem.op;
  c.collective = collective_of(problem.op);
  c.m = problem.m;
  c.n = problem.n;
  c.k = problem.k;
  c.world = problem.world;
  c.comm_sms = plan.comm_sms;
  c.groups = int(plan.tile_groups.size());
  c.order = plan.tile_order;
  c.dtype = problem.dtype;
  c.ran = Ran{problem, plan};
  return c;
}

Problem BenchCase::problem() const {
  if (ran) return ran->problem;
  Problem p = make_problem(op, m, n, k, world);
  p.dtype = dtype;
  p.gpus_per_node = std::max(p.gpus_per_node, world);
  return p;
}

Plan BenchCase::plan(const Hardware& hw) const {
  if (ran) return ran->plan;
  const Problem p = problem();
  Plan plan = default_plan(mode, p, hw, comm_sms);
  if (groups > 0) {
    const int64_t tm = plan.tiles_m(p);
    if (order == TileOrder::kSwizzle) {
      const int64_t bands = swizzle_bands(tm);
      OVL_CHECK(groups <= bands, "{}: groups = {} is more than the {} swizzle bands of {} tile rows", name(), groups,
                bands, kSwizzleRows);
      plan.tile_order = TileOrder::kSwizzle;
      plan.tile_groups = swizzle_band_groups(tm, plan.tiles_n(p), groups);
    } else {
      OVL_CHECK(groups <= tm, "{}: groups = {} is more than the {} row bands of tiles", name(), groups, tm);
      plan.tile_groups = band_groups(tm, plan.tiles_n(p), groups);
    }
    // tile-signal: the GEMM leaves the communication's SMs free (plain streams, no partition).
    if (mode == Mode::kTileSignal) plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;
  }
  return plan;
}

}  // namespace ovl
