// simulate(): plays one Plan of one Problem on a Hardware profile through the event engine and returns its time,
// the time of each part and a Timeline (Chrome trace / Perfetto).
//
// What is simulated (docs/simulator.md has the detail and the simplifications):
//   - one representative GPU (rank 0; ranks are symmetric, so its peers' links carry what its own carry), with
//     resources: the GEMM's SM pool (the partition, or the whole device shared with the comm kernel), HBM, its
//     NVLink send and receive directions through the NVSwitch, and for several nodes its share of the node's
//     network link;
//   - the GEMM as a persistent kernel running tiles in waves on its SM pool (FLOPs on the pool, A/B panel and
//     output bytes on HBM); a tile group is ready when the wave holding its last tile ends;
//   - each group's collective as ring / one-shot push / pull steps, each step a flow over the link directions
//     and HBM capped by the kernel's CTAs; NCCL's per-call overhead; a shared-SM comm kernel lends its SMs.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/model/timeline.hpp"
#include "ovl/sim/engine.hpp"

namespace ovl::sim {

struct SimOptions {
  bool record_timeline = true;  // intervals (waves, groups, collective calls and steps)
  bool record_counters = true;  // "nvlink util", "hbm util", "sm util" (and "net util") counter tracks
  bool record_steps = true;     // one interval per collective step on lane "comm/steps" (large for many groups)
  // Ranks written to the trace. Ranks are symmetric, so ranks 1.. repeat rank 0's lanes; 1 keeps traces small.
  int trace_ranks = 1;
};

struct ResourceUsage {
  std::string name;  // "gpu0 hbm"
  ResourceKind kind = ResourceKind::kHbm;
  int gpu = 0;
  double capacity = 0;     // units per ns at the start
  double work_done = 0;    // bytes (links, HBM) or FLOPs (SM pools)
  double utilization = 0;  // mean load / capacity over the run
};

struct SimResult {
  double total_us = 0;         // the whole operator, first launch to last byte
  double gemm_us = 0;          // first GEMM launch to the end of the last wave (or chunk)
  double comm_us = 0;          // time any collective call of rank 0 was in flight (union of intervals)
  double exposed_comm_us = 0;  // total_us - gemm_us: communication (or waiting for it) not hidden by the GEMM
  int64_t tiles = 0;
  int64_t waves = 0;   // GEMM waves, summed over chunks
  int groups = 0;      // collective calls (tile groups, chunks, or 1)
  int64_t events = 0;  // engine events processed (a measure of simulation cost)
  // What the work must add up to, per rank: the GEMM's matrix work (every tile a whole tile, as wgmma pads edge tiles:
  // 2MNK when the tiles divide the matrix) and bytes each NVLink direction (and network link) must carry for the
  // collective. The conservation test compares them with resources[].work_done.
  double required_flops = 0;
  double required_link_bytes = 0;
  double required_net_bytes = 0;
  std::vector<ResourceUsage> resources;
  Timeline timeline;
};

// Bounds of what is simulated tile by tile and step by step (larger problems throw ovl::Error).
inline constexpr int64_t kMaxSimTiles = int64_t{1} << 22;
inline constexpr int64_t kMaxSimDim = int64_t{1} << 24;  // M, N, K: keeps M x N x bytes and tile counts in range
inline constexpr int kMaxSimWorld = 1024;
inline constexpr int64_t kMaxSimGroups = int64_t{1} << 16;  // tile groups or chunks (collective calls)

// Throws ovl::Error when M, N or K exceed kMaxSimDim (checked before any tile arithmetic).
void check_simulatable(const Problem& problem);

// Validates the problem, the hardware and the plan (ovl::Error naming the bad field), then simulates.
SimResult simulate(const Problem& problem, const Plan& plan, const Hardware& hw, const SimOptions& options = {});

// {"total_us", "gemm_us", "comm_us", "exposed_comm_us", "tiles", "waves", "groups", "resources": [...]}; the
// timeline is left out (write it with result.timeline.write_chrome_trace(path)).
void to_json(nlohmann::json& j, const SimResult& r);

// Tile visiting order of a plan: tile ids (row * tiles_n + col) in the order the persistent GEMM runs them.
// kSwizzle visits blocks of kSwizzleRows tile rows column by column (L2 reuse of B panels; ovl/model/plan.hpp).
using ovl::kSwizzleRows;
std::vector<int64_t> tile_visit_order(const Problem& problem, const Plan& plan);

}  // namespace ovl::sim
