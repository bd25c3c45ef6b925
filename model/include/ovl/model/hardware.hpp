// Hardware: what the model and simulator know about one GPU and its links, in three parts: the device's spec (its
// datasheet and measured facts), the model's parameters (what `ovl calibrate` fits; guesses until it does) and the
// loopback emulation's settings. Built-in profiles carry each value with its source (model/profiles/*.json).
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "ovl/types.hpp"
#include "ovl/model/link_profile.hpp"

namespace ovl {

// The device and its interconnect as the datasheet or a measurement of the machine gives them; set by the profile
// (JSON "spec"), never by `ovl calibrate`.
inline constexpr int kHopperComputeCapability = 90;

struct DeviceSpec {
  int sm_count = 0;                 // SMs on the device
  int sm_granularity = 8;           // green-context partition size and alignment (minSmPartitionSize)
  // major x 10 + minor: ovl's GEMM (the signaling modes, every FP8 problem) and its TMA collective are sm_90a code,
  // which runs on 90 (Hopper) only; on any other only the cuBLAS modes on NCCL run (Plan::validate). A Context sets
  // it from the device.
  int compute_capability = 90;
  double clock_ghz = 0;             // sustained SM clock under matrix load
  double matrix_tflops_per_sm = 0;  // dense bf16 wgmma peak per SM at clock_ghz, TFLOP/s
  double hbm_GBps = 0;              // achievable device-memory bandwidth, read + write, GB/s (a device copy)
  double l2_bytes = 0;
  double smem_per_sm_bytes = 0;
  double link_GBps = 0;             // NVLink bandwidth per direction per GPU (through the NVSwitch), GB/s
  double net_GBps = 0;              // per-GPU inter-node bandwidth per direction (several nodes), GB/s
};

// The model's parameters: our kernels' rates and costs, efficiencies, the clock curve and the contention weights.
// Set by the profile (JSON "fit"): fitted by `ovl calibrate` (the only part it writes), educated guesses until then.
struct ModelParams {
  // The fraction of spec.link_GBps our collectives' link traffic reaches (Hardware::effective_link_GBps(); NCCL
  // reaches a further nccl_efficiency of it). 1 in the built-in profiles; fitted from collectives over a real link.
  double link_efficiency = 1.0;
  // Per step of a collective over the link (a ring step, a flag round trip) and over the network: the link's
  // latency with the kernels' synchronisation in it (no datasheet gives it; fitted from small collectives).
  double link_latency_us = 0;
  double net_latency_us = 0;
  double per_cta_copy_GBps = 0;     // bytes (read + written) one CTA of a plain local copy moves per second, GB/s
  // Bytes per second one GPU's copy engines push to its peers, per direction (comm_algo ce). 0: the link's rate, an
  // assumption (unmeasured: the copy engines keep up with the link; no SM takes part). In loopback the "peer" copies
  // are same-device copies, which run on SMs: the link's rate there as well (loopback_hardware).
  double copy_engine_GBps = 0;
  // Bytes (read + written, as each collective's CTA work counts them, docs/model.md) one CTA of our collective
  // kernels moves per second, per algorithm: a reduction costs far more per byte than a copy (per_cta_GBps()).
  double tma_push_per_cta_GBps = 56.0;  // tma-push (bulk reduce at the owner; push all-gather)
  double tma_pull_per_cta_GBps = 15.0;  // tma-pull (read W chunks, fp32 sums on the consumer warps)
  double simt_per_cta_GBps = 32.0;      // the SIMT comparison kernel (the pull protocol, 16-byte loads)
  double gemm_efficiency = 0.85;         // fraction of matrix peak our persistent GEMM reaches with every SM busy
  // Our GEMM's main loop stalls on operand loads that miss the L2: its matrix time is 1 + gemm_l2_miss_cost x (the
  // fraction of its operand bytes read from HBM, as the model's L2 reuse counts them) times the all-hit time; the HBM
  // floor is unchanged. A row-band walk re-reads B once per band group when B overflows the L2 share, a swizzled one
  // far less, so this term makes the orders differ on a compute-bound GEMM (docs/model.md, "L2 misses"). 0: none.
  double gemm_l2_miss_cost = 0.0;
  double cublas_efficiency = 0.90;       // same for cuBLAS (fewer busy SMs run faster: clock_* below)
  double cublas_partition_penalty = 0.0; // cuBLAS slowdown on a partition beyond proportional, docs/model.md
  double launch_us = 4.0;                // kernel launch + ramp
  double tile_epilogue_us = 0.5;         // per tile stored (epilogue + signal), our kernel (not overlapped)
  double cublas_tile_epilogue_us = 0.5;  // per tile stored by cuBLAS (its epilogue partly overlaps the next tile)
  // The matrix clock under load (docs/model.md, "clock"): with `busy` SMs running matrix work, one tile's matrix
  // time is (max(busy, clock_knee_sms) / sm_count)^clock_exponent times its full-device time (the power limit
  // lowers the clock as more SMs draw power). clock_exponent 0: a constant clock. Exponent in [0, 1].
  double clock_knee_sms = 1.0;           // busy SMs up to which the clock stays at its maximum, in (0, sm_count]
  double clock_exponent = 0.0;
  // A GEMM's compute time (matrix work and epilogues; not its launch or HBM floor) inside an overlap operator, where
  // it alternates with memory-bound collectives, relative to the sustained stream of back-to-back GEMMs that the
  // GEMM parameters above are fitted on (bench_gemm). The power-limited H200 clocks higher after idle or
  // memory-bound phases (docs/model.md, "power state"). Every mode's GEMM uses it (estimate(), simulate()); a GEMM
  // estimated alone (estimate_gemm) does not. 1: no difference. Fitted by `ovl calibrate` from the overlap cases'
  // GEMM-alone times (t_gemm_us).
  double operator_gemm_factor = 1.0;
  double nccl_efficiency = 0.80;         // NCCL ring's fraction of the link's rate (effective_link_GBps())
  double nccl_per_cta_GBps = 20.0;       // NCCL throughput per CTA (channel) before the link caps it
  // Link bytes per second one CTA of NCCL's symmetric kernels (comm_algo nccl-symmetric) moves before the link caps
  // it (at nccl_efficiency, as the ring). Unmeasured: NCCL's own model of those kernels (the profiles say which).
  double nccl_symmetric_per_cta_GBps = 47.2;
  double nccl_launch_us = 10.0;          // NCCL call overhead (enqueue + kernel start + first handshake)
  double tma_launch_us = 4.0;  // one launch of our kernel on a running stream (a collective, a counter kernel)
  // Per tile group and CTA, the persistent TMA mover's own work besides moving bytes (acquiring the group's counter,
  // reading the group's pieces): it does not shrink as CTAs are added, so the rate per CTA falls with the CTA count.
  double tma_group_us = 0.0;
  // Per tile group of tile-signal / green-context with an NCCL algorithm, beyond the call's nccl_launch_us and its
  // counter kernel's launch (tma_launch_us; signaled_group_us): the gap between the calls on the communication
  // stream. Without it the held-out 2-H200 plans of one group per 128-row band (64 calls) erred by 22-28% instead of
  // 8-10% (docs/performance.md, prediction accuracy). 0 in the built-in profiles.
  double nccl_group_us = 0.0;
  // The loopback SIMT kernel's fixed cost per piece with work (rank 0's play of an NCCL-algorithm call on a kRank0
  // profile: AllReduce W pieces, ReduceScatter 1 or 0, AllGather the owners its rows span), on top of its launch.
  // 0 in the built-in profiles; fitted by `ovl calibrate` from loopback overlap cases.
  double loopback_piece_us = 0.0;
  // A collective's per-CTA rates inside an overlapped mode (decomposed, tile-signal, green-context, tma), relative to
  // the same collective alone (nccl_per_cta_GBps and tma_push_per_cta_GBps, which bench_collectives fits): what the
  // concurrent GEMM costs the collective beyond hbm_contention, and the costs of many small calls. Kept apart from
  // the rates so that fitting the overlap cases does not move what a collective alone is predicted to take (it did:
  // on 2 H200s the overlap fit halved the push rate, and the held-out collectives then erred by 30.8% instead of
  // 15.8%, docs/performance.md). The sequential mode's collective runs after the GEMM: rates unscaled. 1: no
  // difference. Fitted by `ovl calibrate` from the overlap cases.
  double overlap_nccl_rate_factor = 1.0;
  double overlap_tma_rate_factor = 1.0;
  // Those two rates again (the NCCL one also for nccl_symmetric_per_cta_GBps), while the GEMM of the operator is still
  // running, relative to after it: a collective's CTAs beside a compute-bound GEMM move less per second (the GEMM's L2
  // traffic, and the clock its power draw lowers). The part of a collective that runs after the GEMM's end (the exposed
  // tail) is not slowed; a call that straddles it is split there. "While" starts with the operator: AG+GEMM's gathers
  // before the GEMM's first wave count. Applied by Hardware::beside_gemm_comm() in the model and the simulator to every
  // mode but sequential. 1: no difference. Fitted by `ovl calibrate` from the overlap cases.
  double beside_gemm_rate_factor = 1.0;
  double hbm_contention = 1.0;           // weight of the shared-HBM slowdown when GEMM and comm overlap
  double shared_sm_penalty = 1.0;        // weight of the wave disruption when NCCL takes SMs from cuBLAS (decomposed)
};

// How a loopback run plays the world's peers on this one device; set by loopback_hardware() only, never read from
// or written to JSON. All off: a real device.
struct Emulation {
  // The world's peers are buffers on this device (either share), so a collective that runs alone (the sequential
  // mode's) may use every SM.
  bool loopback = false;
  // kRank0 only: the collective is rank 0's share as the loopback emulation plays it, so the TMA movers' bytes are
  // what the emulation moves (coll_coeffs).
  bool loopback_rank0 = false;
  // kRank0 with Hardware::link only: the loopback's peer traffic is paced to that link (docs/overlap.md, "Paced
  // loopback"); the spec's link_GBps and the fit's link_latency_us are the link's, the collectives' link bytes move at
  // most at LinkProfile::paced_cta_GBps per CTA, and NCCL-algorithm collectives that a plan leaves to NCCL's choice
  // run on its nccl_ctas (nccl_default_ctas).
  bool paced = false;
};

struct Hardware {
  std::string name;  // the profile's name: "H200 SXM", "H200 SXM loopback x8 (rank0)"
  DeviceSpec spec;
  ModelParams fit;
  Emulation emulation;
  // The world's link as measured (never in the profile's JSON): a paced loopback plays it (loopback_hardware,
  // Emulation::paced), and in a real world (with_link) the calls its measured tables hold are priced at the table's
  // busbw (docs/model.md, "A measured link in a real world"); nullopt: the spec's link and the fit's rates price every
  // call.
  std::optional<LinkProfile> link;

  // Throws ovl::Error naming the field ("spec.sm_count") and value: non-positive sizes or rates, a granularity
  // larger than the device, efficiencies outside (0, 1], negative latencies or weights. (sm_count need not be a
  // multiple of the granularity: Hopper's 132 SMs split into 16 groups of 8 and a remainder of 4.)
  void validate() const;

  double matrix_tflops() const { return spec.matrix_tflops_per_sm * spec.sm_count; }
  // The link bandwidth per direction our collectives reach: spec.link_GBps x fit.link_efficiency, GB/s.
  double effective_link_GBps() const { return spec.link_GBps * fit.link_efficiency; }
  // The profile an overlapped mode's collective runs with: nccl_per_cta_GBps (and nccl_symmetric_per_cta_GBps) and
  // tma_push_per_cta_GBps scaled by overlap_nccl_rate_factor and overlap_tma_rate_factor (the model and the simulator
  // alike).
  Hardware overlapped_comm() const;
  // overlapped_comm() with those rates also scaled by beside_gemm_rate_factor: the collective while the GEMM runs.
  Hardware beside_gemm_comm() const;
  std::string summary() const;  // one line with every field
};

// The JSON path of every numeric field, "spec.<field>" then "fit.<field>", each part in declaration order.
std::vector<std::string> hardware_field_names();

// LoopbackShare: ovl/types.hpp.
std::string_view to_string(LoopbackShare share);  // "rank0", "whole-world"
LoopbackShare parse_loopback_share(std::string_view text);  // throws ovl::Error naming the text

// A profile for loopback runs: `world` virtual ranks on one GPU of profile `base`.
// The spec and the fit are the emulated device's; `emulation` says how it is played.
//   kWholeWorld: all W ranks run at once and share the device: each gets hbm_GBps / world of HBM, and its "link"
//     is a local copy (a read and a write), so link_GBps = hbm_GBps / (2 world). bench_collectives' loopback cases.
//   kRank0: only rank 0's share runs (the overlap executor's default emulation): the GEMM has the whole HBM, and a
//     byte from a "peer" is an HBM access rather than an NVLink transfer, so link_GBps = hbm_GBps; loopback_rank0
//     tells the collective model to count the bytes the emulation's movers move (see coll_coeffs). An
//     NCCL-algorithm call is the SIMT loopback kernel there (loopback_rank0_nccl_bytes): nccl_per_cta_GBps and
//     nccl_launch_us become simt_per_cta_GBps and tma_launch_us (a plain kernel launch).
// Link latency is a flag round trip through L2 rather than NVLink; NCCL's protocol losses do not apply, and the
// "link" runs at its rate (link_efficiency 1).
// With a link profile (kRank0 only: the pacing counts rank 0's link bytes): the paced loopback: link_GBps and
// link_latency_us become the profile's, link_profile is set (the collective model and the simulator then cap the
// link bytes per CTA at the profile's rates and count the ring's steps), and NCCL's CTA count is the profile's.
Hardware loopback_hardware(const Hardware& base, int world, LoopbackShare share = LoopbackShare::kWholeWorld,
                           const std::optional<LinkProfile>& link = std::nullopt);

// The loopback SIMT kernel's per-CTA rate in a world of `world` ranks relative to a world of 8 (where the built-in
// simt_per_cta_GBps was measured): (8 + 8 / W) / 9 for W <= 8, 1 beyond (its loads in flight per thread are 8 up to
// W = 8, and it stores 8 / W results per memory latency). loopback_hardware scales the SIMT rates by it.
double simt_world_factor(int world);

// `base` (a real device's profile) in a real world over `link`: the calls that the link's measured tables hold
// (LinkProfile::measured_table) are priced at the table's busbw for the call's size and CTAs, the overlapped modes'
// rate factors applied (overlapped_comm, beside_gemm_comm); every other call as on `base`. Throws ovl::Error on a
// loopback profile or a link that fails LinkProfile::validate.
Hardware with_link(const Hardware& base, const LinkProfile& link);

// The CTAs NCCL runs a collective on when a plan leaves it to NCCL (comm_sms 0): the link's nccl_ctas, else
// kDefaultNcclCtas.
int nccl_default_ctas(const Hardware& hw);

// Built-in profiles: "h200", "h100", "a100" (case-insensitive; "h200-sxm" etc. accepted). Throws on unknown names.
Hardware builtin_hardware(std::string_view name);
std::vector<std::string> builtin_hardware_names();
// Picks the built-in profile for a device name as the GPU reports it ("NVIDIA H200" -> h200); throws if none.
Hardware hardware_for_device_name(std::string_view device_name);

// The JSON form: {"name": ..., "spec": {DeviceSpec's fields}, "fit": {ModelParams' fields}}; the emulation is
// never written or read.
void to_json(nlohmann::json& j, const Hardware& h);
// Every field is optional on input (missing ones keep the value already in h, so a profile can override a
// built-in one field by field); a present field that is not a number, is negative, or breaks validate()
// throws ovl::Error naming it ("spec.hbm_GBps"). A "base" field ("h200") starts from that built-in profile.
// Unknown keys are errors (typos would otherwise be ignored) except "comment" at the top level and keys starting
// with "_" (notes, at the top level and beside a field in its part); so is a field in the wrong part, or at the top
// level (the form before the parts), named with the part it belongs in.
void from_json(const nlohmann::json& j, Hardware& h);
// Reads a JSON file, starting from the H200 profile unless the file names a "base"; errors name the file and the
// field.
Hardware load_hardware(const std::string& path);
void save_hardware(const Hardware& h, const std::string& path);

}  // namespace ovl

template <>
struct fmt::formatter<ovl::Hardware> : fmt::formatter<std::string_view> {
  auto format(const ovl::Hardware& h, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(h.summary(), ctx);
  }
};
