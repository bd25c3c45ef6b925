// Plan: names, validation, defaults and JSON.
#include "ovl/model/plan.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "json_fields.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/json_document.hpp"

namespace ovl {

std::string_view to_string(Mode mode) { return name_in(kModeNames, mode); }
std::string_view to_string(CtaPolicy policy) { return name_in(kCtaPolicyNames, policy); }
std::string_view to_string(TileOrder order) { return name_in(kTileOrderNames, order); }
std::string_view to_string(OutputLayout layout) { return name_in(kOutputLayoutNames, layout); }

std::vector<Mode> all_modes() {
  std::vector<Mode> modes;
  for (const Named<Mode>& n : kModeNames) modes.push_back(n.value);
  return modes;
}

Mode parse_mode(std::string_view text) { return parse_name(kModeNames, text, "mode"); }
CommAlgo parse_comm_algo(std::string_view text) { return parse_name(kCommAlgoNames, text, "comm algorithm"); }
CtaPolicy parse_cta_policy(std::string_view text) { return parse_name(kCtaPolicyNames, text, "CTA policy"); }
TileOrder parse_tile_order(std::string_view text) { return parse_name(kTileOrderNames, text, "tile order"); }
OutputLayout parse_output_layout(std::string_view text) {
  return parse_name(kOutputLayoutNames, text, "output layout");
}

namespace {
// The names of the modes `pred` holds for, in kModeNames' order: "a, b or c".
template <typename Pred>
std::string modes_where(Pred pred) {
  std::vector<std::string_view> names;
  for (const ModeTraits& t : kModeTraits)
    if (pred(t)) names.push_back(to_string(t.mode));
  return join_or(names.size(), [&](size_t i) { return names[i]; });
}
}  // namespace

void Plan::validate(const Problem& problem, const Hardware& hw) const {
  problem.validate();
  hw.validate();
  const int sms = hw.spec.sm_count;
  const int gran = hw.spec.sm_granularity;
  const std::string_view mode_name = to_string(mode);
  const ModeTraits& traits = mode_traits(mode);
  const AlgoTraits& algo = algo_traits(comm_algo);

  // ovl's GEMM (wgmma, FP8) and its TMA collective are sm_90a code, which runs on compute capability 9.0 only;
  // elsewhere the cuBLAS modes on NCCL run.
  const int cc = hw.spec.compute_capability;
  if (cc != kHopperComputeCapability) {
    const std::string device = fmt::format("{} is compute capability {}.{}", hw.name, cc / 10, cc % 10);
    OVL_CHECK(!is_fp8(problem.dtype), "problem dtype {} runs on ovl's Hopper GEMM (sm_90a, compute capability 9.0); {}",
              to_string(problem.dtype), device);
    OVL_CHECK(!traits.signals(), "plan field \"mode\" = {} runs ovl's Hopper GEMM (sm_90a, compute capability 9.0); {}",
              mode_name, device);
    OVL_CHECK(!is_tma_mover(comm_algo),
              "plan field \"comm_algo\" = {} runs on ovl's Hopper TMA collective (sm_90a, compute capability 9.0); {}",
              to_string(comm_algo), device);
  }
  OVL_CHECK(tile.m > 0 && tile.m % 64 == 0 && tile.m <= 256,
            "plan field \"tile.m\" = {} must be 64, 128, 192 or 256 (wgmma rows)", tile.m);
  OVL_CHECK(tile.n > 0 && tile.n % 8 == 0 && tile.n <= 256,
            "plan field \"tile.n\" = {} must be a multiple of 8 up to 256", tile.n);
  OVL_CHECK(tile.k > 0 && tile.k % 16 == 0 && tile.k <= 256,
            "plan field \"tile.k\" = {} must be a multiple of 16 up to 256", tile.k);

  OVL_CHECK(gemm_sms >= 1 && gemm_sms <= sms, "plan field \"gemm_sms\" = {} must be in [1, {}] (sm_count)", gemm_sms,
            sms);
  OVL_CHECK(comm_sms >= 0 && comm_sms <= sms, "plan field \"comm_sms\" = {} must be in [0, {}] (sm_count)", comm_sms,
            sms);
  OVL_CHECK(comm_ctas >= 1 && comm_ctas <= sms, "plan field \"comm_ctas\" = {} must be in [1, {}] (sm_count)",
            comm_ctas, sms);
  OVL_CHECK(chunks >= 1, "plan field \"chunks\" = {} must be at least 1", chunks);

  // Modes and partitioning.
  OVL_CHECK(partitioned || traits.partitioning != Partitioning::kAlways,
            "plan field \"partitioned\" = false: mode {} runs on green-context partitions", mode_name);
  OVL_CHECK(!partitioned || traits.partitioning != Partitioning::kNever,
            "plan field \"partitioned\" = true: mode {} runs on plain streams (use {})", mode_name,
            modes_where([](const ModeTraits& t) { return t.partitioning != Partitioning::kNever; }));
  if (partitioned) {
    OVL_CHECK(comm_sms >= gran && comm_sms % gran == 0,
              "plan field \"comm_sms\" = {} must be a positive multiple of the green-context granularity {}", comm_sms,
              gran);
    // A split gives groups of `gran` SMs and a remainder (the H200 splits its 132 SMs into 15 groups
    // of 8 and a remainder of 12, since groups stay inside a GPC); the remainder may join the GEMM.
    OVL_CHECK(gemm_sms % gran == 0 || gemm_sms % gran == sms % gran,
              "plan field \"gemm_sms\" = {} must be a multiple of the green-context granularity {} (or one plus the "
              "remainder {})",
              gemm_sms, gran, sms % gran);
    OVL_CHECK(gemm_sms + comm_sms <= sms, "plan fields \"gemm_sms\" + \"comm_sms\" = {} + {} exceed sm_count = {}",
              gemm_sms, comm_sms, sms);
    OVL_CHECK(comm_ctas <= comm_sms, "plan field \"comm_ctas\" = {} exceeds comm_sms = {} (its partition)", comm_ctas,
              comm_sms);
  }

  // Mode and algorithm.
  OVL_CHECK(traits.takes(comm_algo), "plan field \"comm_algo\" = {} does not go with mode {} {}", to_string(comm_algo),
            mode_name, algo.mode_hint.empty() ? traits.algo_hint : algo.mode_hint);
  if (algo.one_node) {
    OVL_CHECK(problem.nodes() == 1, "plan field \"comm_algo\" = {} works within one node, but world {} spans {} nodes",
              to_string(comm_algo), problem.world, problem.nodes());
  }
  if (comm_algo != CommAlgo::kNcclSymmetric) {
    OVL_CHECK(cta_policy == CtaPolicy::kDefault,
              "plan field \"cta_policy\" = {} applies to comm_algo nccl-symmetric, not {}", to_string(cta_policy),
              to_string(comm_algo));
  } else {
    // NCCL's symmetric kernels: whole-buffer AllReduce, ReduceScatter and AllGather over distinct GPUs of one node,
    // on at most kNcclSymmetricMaxCtas CTAs. The executors cut GEMM+RS and AG+GEMM into units other than the whole
    // buffer with one ncclReduce / ncclBroadcast per owner, which those kernels do not cover.
    OVL_CHECK(!hw.emulation.loopback || problem.world == 1,
              "plan field \"comm_algo\" = nccl-symmetric needs NCCL across distinct GPUs; a loopback world of {} ranks "
              "has no NCCL communicator",
              problem.world);
    OVL_CHECK(comm_ctas <= kNcclSymmetricMaxCtas,
              "plan field \"comm_ctas\" = {}: NCCL's symmetric kernels run at most {} CTAs", comm_ctas,
              kNcclSymmetricMaxCtas);
    const size_t units = unit_rows(problem, *this).size();
    OVL_CHECK(problem.op == Op::kGemmAllReduce || units == 1,
              "plan field \"comm_algo\" = nccl-symmetric: mode {} {} moves each of its {} {} with one {} per owner, "
              "which NCCL's symmetric kernels do not cover (they run whole-buffer collectives: use mode sequential, or "
              "one {})",
              mode_name, to_string(problem.op), units, traits.units == ModeUnits::kChunks ? "chunks" : "tile groups",
              problem.op == Op::kGemmReduceScatter ? "ncclReduce" : "ncclBroadcast",
              traits.units == ModeUnits::kChunks ? "chunk" : "group");
  }

  // Tiles, order and groups.
  const int64_t tiles = tile_count(problem);
  const int64_t tn = tiles_n(problem);
  if (tile_order == TileOrder::kExplicit) {
    OVL_CHECK(int64_t(explicit_order.size()) == tiles,
              "plan field \"explicit_order\" has {} entries but the problem has {} tiles", explicit_order.size(),
              tiles);
    std::vector<char> seen(size_t(tiles), 0);
    for (size_t i = 0; i < explicit_order.size(); ++i) {
      const int t = explicit_order[i];
      OVL_CHECK(t >= 0 && t < tiles && !seen[size_t(t)],
                "plan field \"explicit_order\"[{}] = {} is out of range or repeated (needs a permutation of 0..{})", i,
                t, tiles - 1);
      seen[size_t(t)] = 1;
    }
  } else {
    OVL_CHECK(explicit_order.empty(), "plan field \"explicit_order\" has {} entries but tile_order is {}",
              explicit_order.size(), to_string(tile_order));
  }
  if (traits.signals() || !tile_groups.empty()) {
    OVL_CHECK(!tile_groups.empty(), "plan field \"tile_groups\" is empty: mode {} signals tile groups", mode_name);
    int64_t sum = 0;
    for (size_t g = 0; g < tile_groups.size(); ++g) {
      OVL_CHECK(tile_groups[g] >= 1, "plan field \"tile_groups\"[{}] = {} must be at least 1", g, tile_groups[g]);
      sum += tile_groups[g];
    }
    OVL_CHECK(sum == tiles, "plan field \"tile_groups\" sums to {} but the problem has {} tiles ({} x {} of {}x{})",
              sum, tiles, tiles_m(problem), tn, tile.m, tile.n);
  }
  // NCCL and the copy engine send contiguous buffers: with a row-major output a group must be whole row bands of
  // tiles; in swizzle order, whole swizzle bands (kSwizzleRows tile rows; the last band may be shorter).
  if (comm_algo == CommAlgo::kCopyEngine) {
    OVL_CHECK(output == OutputLayout::kRowMajor,
              "plan field \"output\" = {}: comm_algo ce copies row bands of a row-major output", to_string(output));
  }
  if (traits.signals() && algo.contiguous && output == OutputLayout::kRowMajor) {
    const bool swizzle = tile_order == TileOrder::kSwizzle;
    const int64_t unit = swizzle ? tn * kSwizzleRows : tn;
    int64_t start = 0;
    for (size_t g = 0; g < tile_groups.size(); ++g) {
      const int64_t end = start + tile_groups[g];
      if (swizzle) {
        OVL_CHECK(end % unit == 0 || end == tiles,
                  "plan field \"tile_groups\"[{}] = {} ends inside a swizzle band ({} tile rows of {} tiles): with "
                  "tile_order = swizzle and a row-major output a group must be whole swizzle bands",
                  g, tile_groups[g], kSwizzleRows, tn);
      } else {
        OVL_CHECK(end % unit == 0,
                  "plan field \"tile_groups\"[{}] = {} covers tiles [{}, {}), not whole row bands of {} tiles: {} "
                  "needs contiguous groups in a row-major output",
                  g, tile_groups[g], start, end, tn, is_nccl(comm_algo) ? "NCCL" : "the copy engine");
      }
      if (tile_order == TileOrder::kExplicit) {
        std::vector<int64_t> per_band(size_t(tiles_m(problem)), 0);
        for (int64_t i = start; i < end; ++i) per_band[size_t(explicit_order[size_t(i)] / tn)]++;
        for (size_t b = 0; b < per_band.size(); ++b) {
          OVL_CHECK(per_band[b] == 0 || per_band[b] == tn,
                    "plan field \"explicit_order\": group {} holds {} of the {} tiles of row band {}, so it is not "
                    "contiguous in a row-major output",
                    g, per_band[b], tn, b);
        }
      }
      start = end;
    }
  }
  if (traits.units == ModeUnits::kChunks) {
    OVL_CHECK(problem.m % chunks == 0, "plan field \"chunks\" = {} does not divide M = {}", chunks, problem.m);
    if (problem.op != Op::kGemmAllReduce) {
      OVL_CHECK((problem.m / chunks) % problem.world == 0,
                "plan field \"chunks\" = {}: a chunk of M / chunks = {} rows must split across world = {} for {}",
                chunks, problem.m / chunks, problem.world, to_string(problem.op));
    }
  }
}

std::string mode_refusal(const Problem& problem, const Plan& plan) {
  const ModeTraits& traits = mode_traits(plan.mode);
  if (plan.output != OutputLayout::kRowMajor) {
    if (problem.op == Op::kAllGatherGemm && traits.signals())
      return "plan field \"output\" = tile-major: allgather-gemm writes C row-major (nothing reads it tile by tile)";
    if (!traits.tile_major)
      return fmt::format(
          "plan field \"output\" = tile-major is not implemented for mode {} (the collective reads row bands)",
          to_string(plan.mode));
  }
  if (!traits.signals()) return "";
  if (plan.tile_order == TileOrder::kExplicit) {
    return "plan field \"tile_order\" = explicit: the executor runs row-band and swizzle orders (a group of whole "
           "bands is a contiguous block of rows for the collective)";
  }
  const int64_t tn = plan.tiles_n(problem);
  for (size_t g = 0; g < plan.tile_groups.size(); ++g) {
    if (plan.tile_groups[g] % tn != 0) {
      return fmt::format("plan field \"tile_groups\"[{}] = {} is not a whole number of row bands of {} tiles", g,
                         plan.tile_groups[g], tn);
    }
  }
  // Swizzle bands run column by column: a group must end at a band's end (Plan::validate checks this only for the
  // algorithms that move contiguous rows; the executor's collectives all move whole rows).
  const int inside = plan.tile_order == TileOrder::kSwizzle ? group_inside_swizzle_band(plan, problem) : -1;
  if (inside >= 0) {
    return fmt::format(
        "plan field \"tile_groups\"[{}] = {} ends inside a swizzle band ({} tile rows of {} tiles): with "
        "tile_order = swizzle a group must be whole swizzle bands",
        inside, plan.tile_groups[size_t(inside)], kSwizzleRows, tn);
  }
  return "";
}

std::string Plan::summary() const {
  std::string s =
      fmt::format("{} gemm_sms={} comm_sms={}{} tile={}x{}x{} order={} output={}", to_string(mode), gemm_sms, comm_sms,
                  partitioned ? " partitioned" : "", tile.m, tile.n, tile.k, to_string(tile_order), to_string(output));
  if (!tile_groups.empty()) s += fmt::format(" groups={}", tile_groups.size());
  if (mode_traits(mode).units == ModeUnits::kChunks) s += fmt::format(" chunks={}", chunks);
  s += fmt::format(" algo={} ctas={}", to_string(comm_algo), comm_ctas);
  if (cta_policy != CtaPolicy::kDefault) s += fmt::format(" cta_policy={}", to_string(cta_policy));
  return s;
}

std::vector<int> even_groups(int64_t tiles, int groups) {
  OVL_CHECK(tiles >= 1, "even_groups: tiles = {} must be positive", tiles);
  OVL_CHECK(groups >= 1 && groups <= tiles, "even_groups: groups = {} must be in [1, {}] (tiles)", groups, tiles);
  OVL_CHECK((tiles + groups - 1) / groups <= std::numeric_limits<int>::max(),
            "even_groups: tiles = {} in {} groups exceeds the largest group size {}", tiles, groups,
            std::numeric_limits<int>::max());
  // Equal sizes where the count divides (so groups of tiles_m / g whole bands stay whole bands); otherwise the
  // first (tiles % groups) groups get one tile more.
  std::vector<int> out(size_t(groups), int(tiles / groups));
  for (int64_t g = 0; g < tiles % groups; ++g) out[size_t(g)]++;
  return out;
}

namespace {
// `groups` groups of whole bands of `band_rows` tile rows (the last band possibly shorter), as evenly as possible, as
// tile counts. `what` names the caller and the bands in errors.
std::vector<int> groups_of_bands(int64_t tiles_m, int64_t tiles_n, int64_t band_rows, int groups, const char* what) {
  OVL_CHECK(tiles_m >= 1 && tiles_n >= 1, "{}: tiles_m = {}, tiles_n = {} must be positive", what, tiles_m, tiles_n);
  const int64_t bands = (tiles_m + band_rows - 1) / band_rows;
  OVL_CHECK(groups >= 1 && groups <= bands, "{}: groups = {} must be in [1, {}] ({})", what, groups, bands,
            band_rows == 1 ? std::string("row bands") : fmt::format("swizzle bands of {} tile rows", band_rows));
  std::vector<int> out;
  int64_t band = 0;
  for (int b : even_groups(bands, groups)) {
    const int64_t rows = std::min(tiles_m, (band + b) * band_rows) - band * band_rows;
    OVL_CHECK(rows * tiles_n <= std::numeric_limits<int>::max(), "{}: a group of {} x {} tiles exceeds {}", what, rows,
              tiles_n, std::numeric_limits<int>::max());
    out.push_back(int(rows * tiles_n));
    band += b;
  }
  return out;
}
}  // namespace

std::vector<int> band_groups(int64_t tiles_m, int64_t tiles_n, int groups) {
  return groups_of_bands(tiles_m, tiles_n, 1, groups, "band_groups");
}

int64_t swizzle_bands(int64_t tiles_m) { return (tiles_m + kSwizzleRows - 1) / kSwizzleRows; }

int group_inside_swizzle_band(const Plan& plan, const Problem& problem) {
  const int64_t band = plan.tiles_n(problem) * kSwizzleRows, tiles = plan.tile_count(problem);
  int64_t end = 0;
  for (size_t g = 0; g < plan.tile_groups.size(); ++g) {
    end += plan.tile_groups[g];
    if (end % band != 0 && end != tiles) return int(g);
  }
  return -1;
}

std::vector<int> swizzle_band_groups(int64_t tiles_m, int64_t tiles_n, int groups) {
  return groups_of_bands(tiles_m, tiles_n, kSwizzleRows, groups, "swizzle_band_groups");
}

std::vector<UnitRows> unit_rows(const Problem& problem, const Plan& plan) {
  std::vector<UnitRows> units;
  const ModeUnits kind = mode_traits(plan.mode).units;
  if (kind == ModeUnits::kWhole) {
    units.push_back({0, problem.m});
  } else if (kind == ModeUnits::kChunks) {
    const int chunks = std::max(1, plan.chunks);
    for (int c = 0; c < chunks; ++c) units.push_back({problem.m * c / chunks, problem.m * (c + 1) / chunks});
  } else {
    const int64_t tn = plan.tiles_n(problem);
    const std::vector<int> groups =
        plan.tile_groups.empty() ? std::vector<int>{int(plan.tile_count(problem))} : plan.tile_groups;
    int64_t tile = 0;
    for (int g : groups) {
      UnitRows u;
      u.tile_row_begin = tile / tn;
      tile += g;
      u.tile_row_end = tile / tn;
      u.begin = std::min<int64_t>(u.tile_row_begin * plan.tile.m, problem.m);
      u.end = std::min<int64_t>(u.tile_row_end * plan.tile.m, problem.m);
      u.tiles = g;
      units.push_back(u);
    }
  }
  return units;
}

OwnerRows owner_rows(const Problem& problem, int64_t begin, int64_t end, int owner) {
  const int64_t w = std::max(1, problem.world);
  OVL_CHECK(owner >= 0 && owner < w, "owner_rows: owner = {} must be in [0, {})", owner, w);
  OwnerRows o;
  if (end <= begin) return o;
  if (problem.op == Op::kGemmAllReduce) {
    o.begin = begin + (end - begin) * owner / w;
    o.end = begin + (end - begin) * (owner + 1) / w;
    o.block_row = o.begin;
    return o;
  }
  const int64_t block = problem.m / w;
  o.begin = std::max(begin, block * owner);
  o.end = std::min(end, block * (owner + 1));
  if (o.end <= o.begin) return OwnerRows{};
  o.block_row = o.begin - block * owner;
  return o;
}

Hardware comm_hardware(const Hardware& hw, Mode mode, bool beside_gemm) {
  if (mode_traits(mode).units == ModeUnits::kWhole) return hw;
  return beside_gemm ? hw.beside_gemm_comm() : hw.overlapped_comm();
}

double signaled_group_us(const Hardware& hw) { return hw.fit.tma_launch_us + hw.fit.nccl_group_us; }

namespace {
// The collective runs on SMs of its own beside the whole GEMM: a persistent collective kernel (tma) or AG+GEMM's
// gathers (the GEMM's CTAs wait in place for them). On the copy engines nothing does, but a loopback AG+GEMM's
// same-device copies, which run on SMs (core/src/executor_ce.cpp).
bool comm_beside_whole_gemm(const Plan& plan, const Problem& problem, const Hardware& hw) {
  if (algo_traits(plan.comm_algo).copy_engines)
    return problem.op == Op::kAllGatherGemm && hw.emulation.loopback && problem.world > 1;
  return mode_traits(plan.mode).persistent_comm || problem.op == Op::kAllGatherGemm;
}
}  // namespace

bool runs_partitioned(const Plan& plan) {
  return plan.partitioned || mode_traits(plan.mode).partitioning == Partitioning::kAlways;
}

int signaled_gemm_grid(const Plan& plan, const Problem& problem, const Hardware& hw, int partition_sms) {
  OVL_CHECK(mode_signals(plan.mode), "signaled_gemm_grid: mode {} does not run the signaling GEMM",
            to_string(plan.mode));
  const int sms = hw.spec.sm_count;
  const int gemm_sms = plan.gemm_sms > 0 ? std::min(plan.gemm_sms, sms) : sms;
  if (runs_partitioned(plan)) return partition_sms > 0 ? std::min(gemm_sms, partition_sms) : gemm_sms;
  if (comm_beside_whole_gemm(plan, problem, hw))
    return std::max(1, std::min(gemm_sms, sms - signaled_comm_ctas(plan, hw)));
  // ce: nothing polls (stream memory operations wait), the copies run on the copy engines and the reduction after
  // the GEMM: the GEMM may take every SM.
  if (algo_traits(plan.comm_algo).copy_engines) return gemm_sms;
  return std::max(1, std::min(gemm_sms, sms - 1));
}

int signaled_comm_ctas(const Plan& plan, const Hardware& hw, int partition_sms) {
  if (runs_partitioned(plan)) return partition_sms > 0 ? std::min(plan.comm_ctas, partition_sms) : plan.comm_ctas;
  if (mode_traits(plan.mode).persistent_comm) return std::min(plan.comm_ctas, hw.spec.sm_count - 1);
  return plan.comm_ctas;
}

int collective_ctas(const Plan& plan, Collective c) {
  const bool copy_engines =
      plan.comm_algo == CommAlgo::kNcclSymmetric && plan.cta_policy == CtaPolicy::kZero && c == Collective::kAllGather;
  return copy_engines ? 0 : plan.comm_ctas;
}

bool ce_sums_per_group(const Plan& plan, int sm_count) {
  return algo_traits(plan.comm_algo).copy_engines && plan.gemm_sms + plan.comm_ctas <= sm_count;
}

int comm_ctas_beside_gemm(const Plan& plan, const Problem& problem, const Hardware& hw) {
  const int ctas = collective_ctas(plan, collective_of(problem.op));
  if (ctas == 0) return 0;  // the copy engines
  if (!mode_signals(plan.mode) || runs_partitioned(plan) || comm_beside_whole_gemm(plan, problem, hw)) return ctas;
  return std::clamp(hw.spec.sm_count - signaled_gemm_grid(plan, problem, hw), 1, ctas);
}

Plan default_plan(Mode mode, const Problem& problem, const Hardware& hw, int comm_sms) {
  problem.validate();
  hw.validate();
  OVL_CHECK(comm_sms >= 0 && comm_sms <= hw.spec.sm_count, "default_plan: comm_sms = {} must be in [0, {}]", comm_sms,
            hw.spec.sm_count);
  Plan p;
  p.mode = mode;
  p.gemm_sms = hw.spec.sm_count;
  const int nccl_ctas = nccl_default_ctas(hw);
  // A paced loopback's sequential collective runs on NCCL's CTA count whatever comm_sms says: that is what a node's
  // NCCL does alone after the GEMM (docs/overlap.md, "Paced loopback"); on every SM it would be no node's baseline.
  const bool nccl_own = comm_sms == 0 || (mode == Mode::kSequential && hw.emulation.paced);
  const int ctas = nccl_own ? nccl_ctas : comm_sms;
  p.comm_algo = CommAlgo::kNcclRing;
  p.comm_ctas = std::min(ctas, hw.spec.sm_count);
  p.comm_sms = p.comm_ctas;
  const int64_t tm = p.tiles_m(problem);
  const int64_t tn = p.tiles_n(problem);
  const ModeTraits& traits = mode_traits(mode);
  if (traits.units == ModeUnits::kChunks) {
    // The largest chunk count up to 4 that divides the rows (and each chunk across ranks for RS / AG).
    const int64_t unit = problem.op == Op::kGemmAllReduce ? 1 : problem.world;
    p.chunks = 1;
    for (int c = 4; c >= 1; --c) {
      if (problem.m % (int64_t(c) * unit) == 0) {
        p.chunks = c;
        break;
      }
    }
  }
  if (traits.signals()) p.tile_groups = band_groups(tm, tn, int(tm));
  // The mode's first algorithm: NCCL's ring, else (tma) tma-push.
  const bool nccl_mode = traits.takes(CommAlgo::kNcclRing);
  if (!nccl_mode) p.comm_algo = CommAlgo::kTmaPush;
  if (traits.partitioning != Partitioning::kNever) {
    // Disjoint partitions: round the communication SMs up to the granularity (at least one group).
    const int gran = hw.spec.sm_granularity;
    int c = comm_sms > 0 ? comm_sms : (nccl_mode ? nccl_ctas : gran);
    c = std::max(gran, (c + gran - 1) / gran * gran);
    OVL_CHECK(c < hw.spec.sm_count, "default_plan: comm_sms = {} leaves no SMs for the GEMM on {} SMs", c,
              hw.spec.sm_count);
    p.partitioned = true;
    p.comm_sms = c;
    p.comm_ctas = c;
    p.gemm_sms = hw.spec.sm_count - c;
  }
  return p;
}

void to_json(nlohmann::json& j, const Plan& p) {
  j = nlohmann::json{{"mode", to_string(p.mode)},
                     {"gemm_sms", p.gemm_sms},
                     {"comm_sms", p.comm_sms},
                     {"partitioned", p.partitioned},
                     {"tile", {{"m", p.tile.m}, {"n", p.tile.n}, {"k", p.tile.k}}},
                     {"tile_order", to_string(p.tile_order)},
                     {"explicit_order", p.explicit_order},
                     {"output", to_string(p.output)},
                     {"tile_groups", p.tile_groups},
                     {"comm_algo", to_string(p.comm_algo)},
                     {"comm_ctas", p.comm_ctas},
                     {"chunks", p.chunks}};
  if (p.cta_policy != CtaPolicy::kDefault) j["cta_policy"] = to_string(p.cta_policy);
}

namespace {
std::vector<int> read_int_array(const nlohmann::json& j, const char* field) {
  const auto& v = detail::require_field(j, field, "plan");
  OVL_CHECK(v.is_array(), "plan field \"{}\" = {} is not an array", field, v.dump());
  std::vector<int> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = fmt::format("{}[{}]", field, i);
    out.push_back(detail::as_int32(v[i], name.c_str(), "plan"));
  }
  return out;
}
}  // namespace

void from_json(const nlohmann::json& j, Plan& p) {
  using namespace detail;
  OVL_CHECK(j.is_object(), "plan JSON must be an object, got {}", json_excerpt(j));
  Plan q;
  q.mode = parse_mode(read_string(j, "mode", "plan"));
  q.gemm_sms = read_int32(j, "gemm_sms", "plan");
  q.comm_sms = read_int32(j, "comm_sms", "plan");
  q.partitioned = read_bool(j, "partitioned", "plan");
  const auto& t = require_field(j, "tile", "plan");
  OVL_CHECK(t.is_object(), "plan field \"tile\" = {} is not an object {{\"m\", \"n\", \"k\"}}", t.dump());
  q.tile.m = read_int32(t, "m", "plan tile");
  q.tile.n = read_int32(t, "n", "plan tile");
  q.tile.k = read_int32(t, "k", "plan tile");
  q.tile_order = parse_tile_order(read_string(j, "tile_order", "plan"));
  q.explicit_order = read_int_array(j, "explicit_order");
  q.output = parse_output_layout(read_string(j, "output", "plan"));
  q.tile_groups = read_int_array(j, "tile_groups");
  q.comm_algo = parse_comm_algo(read_string(j, "comm_algo", "plan"));
  q.comm_ctas = read_int32(j, "comm_ctas", "plan");
  q.chunks = read_int32(j, "chunks", "plan");
  if (j.contains("cta_policy")) q.cta_policy = parse_cta_policy(read_string(j, "cta_policy", "plan"));
  // What needs no problem to check is checked here; Plan::validate checks the rest against a problem.
  OVL_CHECK(q.gemm_sms >= 1, "plan field \"gemm_sms\" = {} must be positive", q.gemm_sms);
  OVL_CHECK(q.comm_sms >= 0, "plan field \"comm_sms\" = {} must not be negative", q.comm_sms);
  OVL_CHECK(q.comm_ctas >= 1, "plan field \"comm_ctas\" = {} must be positive", q.comm_ctas);
  OVL_CHECK(q.chunks >= 1, "plan field \"chunks\" = {} must be positive", q.chunks);
  OVL_CHECK(q.tile.m > 0 && q.tile.n > 0 && q.tile.k > 0, "plan field \"tile\" = {}x{}x{} must be positive", q.tile.m,
            q.tile.n, q.tile.k);
  for (size_t g = 0; g < q.tile_groups.size(); ++g) {
    OVL_CHECK(q.tile_groups[g] >= 1, "plan field \"tile_groups\"[{}] = {} must be at least 1", g, q.tile_groups[g]);
  }
  for (const auto& [key, value] : j.items()) {
    static const char* kKnown[] = {"mode",       "gemm_sms",       "comm_sms",  "partitioned", "tile",
                                   "tile_order", "explicit_order", "output",    "tile_groups", "comm_algo",
                                   "comm_ctas",  "chunks",         "cta_policy"};
    const bool known = key == "comment" || key.rfind('_', 0) == 0 ||
                       std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return key == k; });
    OVL_CHECK(known, "plan field \"{}\" = {} is not a Plan field", key, value.dump());
  }
  p = std::move(q);
}

Plan load_plan(const std::string& path) {
  const nlohmann::json j = parse_json_document(read_file_text(path, "plan"), fmt::format("plan \"{}\"", path));
  try {
    return j.get<Plan>();
  } catch (const Error& e) {
    OVL_FAIL("plan \"{}\": {}", path, e.message());
  } catch (const nlohmann::json::exception& e) {
    OVL_FAIL("plan \"{}\": {}", path, e.what());
  }
}

}  // namespace ovl
