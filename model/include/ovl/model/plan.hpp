// Plan: how one Problem is run. Plain data: made by the Planner or by hand, printable, JSON round-trippable.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ovl/error.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/modes.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/types.hpp"

namespace ovl {

// The CTA policy of the communicator an nccl-symmetric plan runs on (ncclConfig_t::CTAPolicy, NCCL 2.27+): kDefault
// and kEfficiency run the symmetric kernels on the plan's comm_ctas CTAs; kZero also moves an AllGather with the
// copy engines, on no CTA (collective_ctas). Other algorithms keep kDefault.
enum class CtaPolicy { kDefault, kEfficiency, kZero };
// NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY, _ZERO.
inline constexpr Named<CtaPolicy> kCtaPolicyNames[] = {
    {CtaPolicy::kDefault, "default"}, {CtaPolicy::kEfficiency, "efficiency"}, {CtaPolicy::kZero, "zero"}};
// kSwizzle visits blocks of kSwizzleRows tile rows ("swizzle bands"), each column by column (L2 reuse of B panels);
// the signaled GEMM runs it with GemmArguments::swizzle = kSwizzleRows. A group of whole swizzle bands is a
// contiguous block of rows, complete when its last tile is stored.
inline constexpr int kSwizzleRows = 8;
// TileOrder, OutputLayout: ovl/types.hpp.

std::string_view to_string(Mode mode);  // "sequential", "decomposed", "tile-signal", "green-context", "tma"
std::string_view to_string(CtaPolicy policy);  // "default", "efficiency", "zero" (NCCL_CTA_POLICY_DEFAULT, ...)
std::string_view to_string(TileOrder order);  // "row-band", "swizzle", "explicit"
std::string_view to_string(OutputLayout layout);  // "row-major", "tile-major"
Mode parse_mode(std::string_view text);
CommAlgo parse_comm_algo(std::string_view text);
CtaPolicy parse_cta_policy(std::string_view text);
TileOrder parse_tile_order(std::string_view text);
OutputLayout parse_output_layout(std::string_view text);
std::vector<Mode> all_modes();

// NCCL's CTA (channel) count when a plan does not choose one: what NCCL typically runs with on an NVSwitch node.
inline constexpr int kDefaultNcclCtas = 24;

struct TileShape {
  int m = 128, n = 256, k = 64;
  bool operator==(const TileShape&) const = default;
};

struct Plan {
  Mode mode = Mode::kSequential;
  // SMs the GEMM runs on and SMs (or CTAs, for NCCL on shared SMs) given to communication. With partitioned
  // set, the two are disjoint green-context partitions: multiples of the granularity, sum <= sm_count.
  // Without it both kernels share the device and comm_sms is the communication kernel's CTA count.
  int gemm_sms = 0;
  int comm_sms = 0;
  bool partitioned = false;  // true for kGreenContext; optional for kTma
  TileShape tile;
  TileOrder tile_order = TileOrder::kRowBand;
  std::vector<int> explicit_order;  // kExplicit: a permutation of the tile ids (tile_row * tiles_n + tile_col)
  OutputLayout output = OutputLayout::kRowMajor;
  // Tile-signal modes: how many tiles (in visiting order) each signal covers; sums to the tile count.
  std::vector<int> tile_groups;
  CommAlgo comm_algo = CommAlgo::kNcclRing;
  int comm_ctas = 0;  // CTAs of the collective kernel (<= comm_sms when partitioned)
  // comm_algo nccl-symmetric: its communicator's CTA policy (the others: kDefault). JSON field "cta_policy", written
  // and read only when not kDefault.
  CtaPolicy cta_policy = CtaPolicy::kDefault;
  int chunks = 1;     // kDecomposed: row chunks of the GEMM

  // Throws ovl::Error naming the field and value when the plan cannot run the problem on this hardware:
  // SM counts out of range or off the granularity, groups that do not sum to the tile count, a mode and
  // algorithm that do not go together (kTma with NCCL), chunks that do not divide M, etc.
  void validate(const Problem& problem, const Hardware& hw) const;

  // The tile grid (a plan not yet validated may carry any tile: a zero divides by nothing).
  int64_t tiles_m(const Problem& p) const {
    OVL_CHECK(tile.m > 0, "plan field \"tile.m\" = {} must be positive", tile.m);
    return (p.m + tile.m - 1) / tile.m;
  }
  int64_t tiles_n(const Problem& p) const {
    OVL_CHECK(tile.n > 0, "plan field \"tile.n\" = {} must be positive", tile.n);
    return (p.n + tile.n - 1) / tile.n;
  }
  int64_t tile_count(const Problem& p) const { return tiles_m(p) * tiles_n(p); }
  std::string summary() const;  // one line: "tma gemm_sms=132 comm_sms=16 groups=8 algo=tma-pull ctas=16"
  bool operator==(const Plan&) const = default;  // every field (what the JSON holds)
};

// Why the executors do not run a plan that Plan::validate accepts, as far as its mode decides it (kModeTraits; the
// device and the world decide the rest: Context::can_run): a tile-major output it does not write, and for the signaling
// GEMM an explicit order or groups that are not whole (swizzle) bands. "" when it runs.
std::string mode_refusal(const Problem& problem, const Plan& plan);

// A Plan for `mode` with sensible defaults: whole device for the GEMM, NCCL's default CTAs, one group per row
// band of tiles (modes that signal), 4 chunks (decomposed). The planner searches from here.
Plan default_plan(Mode mode, const Problem& problem, const Hardware& hw, int comm_sms);

// Whether the plan runs GEMM and communication on green-context partitions (Plan::partitioned, or a mode that
// always does).
bool runs_partitioned(const Plan& plan);
// The profile a mode's collective runs with, in the model and the simulator alike: hw for sequential (the collective
// runs after the GEMM), hw.overlapped_comm() in the overlapped modes, hw.beside_gemm_comm() there while the GEMM of
// the operator is still running (`beside_gemm`).
Hardware comm_hardware(const Hardware& hw, Mode mode, bool beside_gemm = false);
// The fixed cost of one tile group of tile-signal / green-context with an NCCL algorithm besides its collective call
// (the call's launch and link latencies), in the model and the simulator alike: the counter kernel the executor runs
// on the communication stream for every group (core/src/executor_tile_signal.cpp: the counter wait before a
// GEMM-first group's call, the counter release after an AllGather group's call), one launch of our own kernel
// (tma_launch_us), and nccl_group_us.
double signaled_group_us(const Hardware& hw);
// The persistent grid our GEMM runs with in a signaling mode (tile-signal, green-context, tma), in the executors
// (core/src/executor_tile_signal.cpp, executor_tma.cpp, executor_ce.cpp), the model and the simulator alike: on
// partitions the GEMM's (gemm_sms, within `partition_sms` when the executor's split has fewer); on shared SMs
// min(gemm_sms, sm_count - signaled_comm_ctas) where the collective must run beside the whole GEMM (tma's persistent
// kernel, AG+GEMM's gathers, a loopback AG+GEMM's same-device ce copies), min(gemm_sms, sm_count) for the rest of ce
// (nothing polls), else min(gemm_sms, sm_count - 1) (one SM for the counter-wait kernel). Its CTAs hold their SMs
// until they run out of tiles: nothing else fits on an SM beside one.
int signaled_gemm_grid(const Plan& plan, const Problem& problem, const Hardware& hw, int partition_sms = 0);
// The CTAs the signaling modes launch their collective with: comm_ctas, within `partition_sms` on partitions, and at
// most sm_count - 1 for a persistent collective on shared SMs (the GEMM keeps one).
int signaled_comm_ctas(const Plan& plan, const Hardware& hw, int partition_sms = 0);
// The collective's CTAs that get an SM while that whole grid is resident: collective_ctas, but on shared SMs with tile
// groups that follow the GEMM (tile-signal GEMM+AR / GEMM+RS) only the SMs the grid leaves (at least 1). The rest
// start as the GEMM's last CTAs finish. 0 for a collective on the copy engines.
int comm_ctas_beside_gemm(const Plan& plan, const Problem& problem, const Hardware& hw);
// The CTAs the plan's collective `c` runs on: comm_ctas, but 0 for nccl-symmetric under CtaPolicy::kZero where NCCL
// moves `c` with the copy engines (AllGather). The SMs the model and the simulator give the collective.
int collective_ctas(const Plan& plan, Collective c);
// NCCL's symmetric kernels run at most this many CTAs (NCCL 2.28: ncclSymkMaxBlocks).
inline constexpr int kNcclSymmetricMaxCtas = 64;
// comm_algo ce, GEMM+AR / GEMM+RS: whether the owner's sum runs per tile group, beside the GEMM (its grid of gemm_sms
// leaves comm_ctas SMs: gemm_sms + comm_ctas <= sm_count), or once after the GEMM, which holds every SM until then.
bool ce_sums_per_group(const Plan& plan, int sm_count);
// Splits `tiles` tiles into `groups` groups as evenly as possible (equal sizes when `groups` divides `tiles`,
// else the first tiles % groups groups get one more), so groups of tiles_m / groups whole bands stay whole bands.
std::vector<int> even_groups(int64_t tiles, int groups);
// Groups of whole row bands: tiles_m bands spread over `groups` groups as evenly as possible, each group's size
// in tiles (a multiple of tiles_n). Throws unless 1 <= groups <= tiles_m.
std::vector<int> band_groups(int64_t tiles_m, int64_t tiles_n, int groups);
// `groups` groups of whole swizzle bands (kSwizzleRows tile rows each, the last one possibly shorter), as evenly as
// possible, as tile counts: the groups a swizzle-order plan with a row-major output may have.
std::vector<int> swizzle_band_groups(int64_t tiles_m, int64_t tiles_n, int groups);
// The swizzle bands of a GEMM of tiles_m tile rows: ceil(tiles_m / kSwizzleRows).
int64_t swizzle_bands(int64_t tiles_m);
// The first of plan.tile_groups that ends inside a swizzle band (in swizzle order such a group is no block of whole
// rows), or -1 when every group ends at a band's end or at the last tile.
int group_inside_swizzle_band(const Plan& plan, const Problem& problem);

// The units of a plan, each one collective call (or one gated range of the persistent collective): sequential one
// unit (every row), decomposed `chunks` row chunks, the signaling modes one unit per tile group (its whole tile rows;
// a group inside one tile row, possible with a tile-major output, has no rows of its own). Row ranges are clipped to
// M. Used by the executors, the model and the simulator alike.
struct UnitRows {
  int64_t begin = 0, end = 0;                    // rows of C (AG+GEMM: of the gathered A and of C)
  int64_t tile_row_begin = 0, tile_row_end = 0;  // the signaling modes: the group's tile rows [begin, end)
  int64_t tiles = 0;                             // the signaling modes: the group's tile count (its counter's target)
};
std::vector<UnitRows> unit_rows(const Problem& problem, const Plan& plan);
// Owner `owner`'s part of unit rows [begin, end). ReduceScatter and AllGather: the unit's rows inside the owner's
// block of M / W rows, and `block_row`, the first of them counted inside that block (RS: its row of the owner's
// output; AG: its row of the owner's A). AllReduce: the owner-th of W near-equal runs of the unit's rows (each owner
// reduces one run, then sends it to every rank), block_row = begin. Empty (begin == end) when the owner has no rows
// in the unit. Rows are 16-byte multiples (Problem: N, K % 8 == 0).
struct OwnerRows {
  int64_t begin = 0, end = 0, block_row = 0;
  int64_t rows() const { return end - begin; }
};
OwnerRows owner_rows(const Problem& problem, int64_t begin, int64_t end, int owner);
// Whether NCCL moves unit rows [begin, end) owner by owner (one ncclReduce / ncclBroadcast per owner_rows piece):
// a ReduceScatter or AllGather unit short of the whole buffer, since NCCL's collectives need equal parts. The
// executor's choice (collective_unit), and what the predictors price (call_adjustments).
inline bool nccl_per_owner(const Problem& problem, int64_t begin, int64_t end) {
  return problem.op != Op::kGemmAllReduce && (begin != 0 || end != problem.m);
}
// The link load of an NCCL unit against a ReduceScatter or AllGather of its bytes: W / (W - 1) where NCCL moves it
// owner by owner (each ring link carries all of the unit's bytes), else 1. A real world's factor on the unit's bytes
// (call_adjustments), and what a paced loopback's stand-in paces (Resources::collective_unit).
inline double nccl_unit_link_load(const Problem& problem, int64_t begin, int64_t end) {
  return problem.world > 1 && nccl_per_owner(problem, begin, end) ? double(problem.world) / (problem.world - 1) : 1.0;
}
// The buffer bytes of the NCCL collective call that moves unit rows [begin, end) (nccl-tests' size: the unit's share
// of comm_bytes), by which a paced profile's measured NCCL rates go (LinkProfile::nccl_busbw); 0 where NCCL moves it
// owner by owner (ncclReduce / ncclBroadcast, which the table does not hold).
inline double nccl_unit_call_bytes(const Problem& problem, int64_t begin, int64_t end) {
  return nccl_per_owner(problem, begin, end) ? 0.0
                                             : double(problem.comm_bytes()) * double(end - begin) / double(problem.m);
}

void to_json(nlohmann::json& j, const Plan& p);
void from_json(const nlohmann::json& j, Plan& p);  // field types checked; Plan::validate needs the problem
Plan load_plan(const std::string& path);

}  // namespace ovl

template <>
struct fmt::formatter<ovl::Plan> : fmt::formatter<std::string_view> {
  auto format(const ovl::Plan& p, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(p.summary(), ctx);
  }
};
