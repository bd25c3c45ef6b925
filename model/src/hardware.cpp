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

namespace ovl {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kKiB = 1024.0;

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

// Fitted efficiencies and overheads shared by the Hopper profiles. Sources:
//  - cublas_efficiency 0.795: makes the model's cuBLAS 8192^3 bf16 on 132 SMs come out at the 780 TFLOP/s
//    of an early H200 measurement; 15.5 fractional waves of 128x256 tiles, 4 us launch, 0.5 us
//    per tile stored (tests/model/test_estimate_gemm.cpp checks it).
//  - cublas_partition_penalty 0.06: cuBLAS on a green-context partition is ~6% slower than proportional
//    scaling; with it the model gives 124 SMs 1.13x (measured 1.14x) and 116 SMs 1.21x (measured 1.19x) the
//    full-device time (an early H200 measurement; the test checks both within 2%).
//  - gemm_efficiency 0.80: our persistent wgmma GEMM assumed at cuBLAS's full-wave rate until measured.
//  - nccl_efficiency 0.80: NCCL ring AllReduce busbw ~360 GB/s of 450 GB/s on 8x H100 SXM (nccl-tests,
//    NVLS off), the usual published figure.
//  - nccl_per_cta_GBps 20: one NCCL channel (CTA) with the Simple protocol moves ~20 GB/s on NVLink; ~18
//    channels saturate the ring (NCCL's own default on NVSwitch systems is 16-32 channels).
//  - nccl_launch_us 8, link_latency_us 0.7: small-message ring AllReduce on 8 GPUs ~ 8 + 14 x 0.7 = 18 us,
//    the order nccl-tests reports for 8-byte AllReduce on DGX H100. Guesses until calibrated.
//  - launch_us 4, tma_launch_us 4, tile_epilogue_us 0.5: a launch + ramp into a running stream; the
//    epilogue store of a 64 KB tile mostly hides behind the next tile's main loop. Guesses.
//  - hbm_contention 1, shared_sm_penalty 1: the contention terms at face value until calibrated.
Hardware hopper_common() {
  Hardware h;
  h.sm_granularity = 8;  // minSmPartitionSize 8, smCoscheduledAlignment 8 (sm_90; ovl info)
  h.clock_ghz = 1.83;    // the clock implied by the datasheet 989.4 TFLOP/s = 132 SMs x 4096 FLOP/clk x 1.83 GHz
  h.matrix_tflops_per_sm = 989.4 / 132.0;  // H100/H200 SXM datasheet: 989.4 TFLOP/s dense bf16 over 132 SMs
  h.smem_per_sm_bytes = 228 * kKiB;        // Hopper tuning guide: 228 KB per SM (227 KB opt-in per block)
  h.link_GBps = 450;          // NVLink 4: 18 links x 25 GB/s per direction = 450 GB/s (900 GB/s bidirectional)
  h.link_latency_us = 0.7;    // see above
  h.per_cta_copy_GBps = 100;  // measured on the H200: ~100 GB/s per CTA (read + written), SIMT or 1-warp TMA ring
  // Our collective kernels per CTA, measured on the H200 (loopback world 8, bf16). tma-push: the tma mode's previous
  // mover, fitted with its per-group cost (tma_group_us below) on the overlap fit shapes (the bare ring moves
  // ~115-120). pull and SIMT: "moved_GBps_per_cta" of an earlier bench_collectives run at 1..32 CTAs. Kept although
  // the current kernels measure more (the current mover fits 100.8 GB/s and 2.49 us; the standalone push collectives
  // move 98-123, pull 27-48; docs/performance.md): refitting them with the older GEMM parameters below mis-ranked more
  // held-out problems ("Tried and not kept" there). One rate prices both push kernels.
  h.tma_push_per_cta_GBps = 95;  // the tma mode's push mover (fitted 95.3)
  h.tma_pull_per_cta_GBps = 15;  // tma-pull AllReduce 16, ReduceScatter 14 (AllGather, no adds: 40-42)
  h.simt_per_cta_GBps = 32;      // simt AllReduce 30-34, ReduceScatter 29-32, AllGather 29-34
  h.net_GBps = 50;            // DGX H100/H200: one ConnectX-7 400 Gb/s NIC per GPU = 50 GB/s per direction
  h.net_latency_us = 5;       // InfiniBand NDR small message through NCCL's net proxy: a few us. Guess.
  h.gemm_efficiency = 0.80;
  h.cublas_efficiency = 0.795;
  h.cublas_partition_penalty = 0.06;
  h.launch_us = 4.0;
  h.tile_epilogue_us = 0.5;
  h.cublas_tile_epilogue_us = 0.5;
  h.clock_knee_sms = 132;  // with clock_exponent 0: a constant clock (unmeasured on the H100)
  h.clock_exponent = 0.0;
  h.nccl_efficiency = 0.80;
  h.nccl_per_cta_GBps = 20.0;
  h.nccl_launch_us = 8.0;
  h.tma_launch_us = 4.0;
  h.tma_group_us = 3.4;  // the tma mode's mover, per tile group and CTA (fitted 3.37, with the push rate above)
  h.hbm_contention = 1.0;
  h.shared_sm_penalty = 1.0;
  return h;
}

Hardware h200_sxm() {
  Hardware h = hopper_common();
  h.name = "H200 SXM";
  h.sm_count = 132;        // cuDeviceGetDevResource smCount 132
  h.hbm_GBps = 4200;       // measured: D2D cudaMemcpy ~4.2 TB/s read + written (HBM3e nominal 4.8 TB/s)
  h.l2_bytes = 60 * kMiB;  // 60 MB L2 (ovl info)
  // GEMM parameters calibrated on an early H200 bench_gemm run (the register-epilogue kernel):
  // `scripts/validate-h200.sh` fits them on the shapes 8192x8192x8192, 8192x8192x2048, 8192x4096x1024 (ovl,
  // ovl-nosignal, cublas; 132..32 SMs) and validates on three other shapes. They replace the guesses of
  // hopper_common():
  //  - the matrix clock falls as more SMs are busy (power limit): one tile's matrix time scales as
  //    (max(busy, 74) / 132)^0.49, i.e. 32..74 busy SMs run 1.33x faster per SM than all 132;
  //  - at 132 busy SMs our kernel reaches 0.702 of the 989.4 TFLOP/s datasheet peak and cuBLAS 0.710;
  //  - our epilogue (not overlapped with the next tile's main loop) costs 2.91 us per tile, cuBLAS's 1.48 us;
  //  - launch 1.53 us between back-to-back GEMMs in one stream;
  //  - cuBLAS on green-context partitions: no penalty beyond its clock-scaled rate (fitted < 0, held at 0). The
  //    1.14x at 124 SMs of an early measurement was not reproduced in this run (1.03x).
  // Kept on purpose after the staged epilogue (9eb9134), whose data fit tile_epilogue_us 1.52 and
  // gemm_efficiency 0.722: with those the overlap predictors mis-rank 7 of 10 held-out problems, because cuBLAS
  // runs faster inside bench_overlap than in bench_gemm, and these older values happen to compensate. The current
  // kernel's values made the overlap predictions worse too, on one H200 and on two (docs/performance.md, "Tried and
  // not kept"). Refit once that gap is understood. operator_gemm_factor (the power-state term that closes it for
  // calibrated profiles) stays 1 here: fitted on these older values (0.87) it barely moves the held-out overlap
  // error.
  h.gemm_efficiency = 0.702;
  h.tile_epilogue_us = 2.91;
  h.cublas_efficiency = 0.710;
  h.cublas_tile_epilogue_us = 1.48;
  h.cublas_partition_penalty = 0.0;
  h.launch_us = 1.53;
  h.clock_knee_sms = 74;
  h.clock_exponent = 0.49;
  return h;
}

Hardware h100_sxm() {
  Hardware h = hopper_common();
  h.name = "H100 SXM";
  h.sm_count = 132;        // H100 SXM5 datasheet / whitepaper: 132 SMs
  h.hbm_GBps = 2930;       // HBM3 3.35 TB/s nominal x 0.875 (the measured/nominal ratio of the H200, 4.2/4.8)
  h.l2_bytes = 50 * kMiB;  // Hopper whitepaper: 50 MB L2 on H100 SXM5
  return h;
}

Hardware a100_sxm() {
  Hardware h;
  h.name = "A100 SXM";
  h.sm_count = 108;                        // A100 whitepaper: 108 SMs
  h.sm_granularity = 4;                    // cuDevSmResourceSplitByCount docs: sm_8x minimum 4 SMs (aligned to 2)
  h.clock_ghz = 1.41;                      // A100 datasheet boost clock
  h.matrix_tflops_per_sm = 312.0 / 108.0;  // datasheet: 312 TFLOP/s dense bf16 = 108 x 2048 FLOP/clk x 1.41 GHz
  h.hbm_GBps = 1785;                       // HBM2e 2039 GB/s nominal (80 GB) x 0.875, as for the H100
  h.l2_bytes = 40 * kMiB;                  // A100 whitepaper: 40 MB L2
  h.smem_per_sm_bytes = 164 * kKiB;        // Ampere tuning guide: 164 KB per SM
  h.link_GBps = 300;                       // NVLink 3: 12 links x 25 GB/s per direction
  h.link_latency_us = 0.9;                 // guess, a little above NVLink 4
  h.per_cta_copy_GBps = 60;                // guess: no TMA, SIMT copy per SM at lower clock and bandwidth
  h.tma_push_per_cta_GBps = 34;            // guesses: the H200's collective/copy ratios (0.56, 0.15, 0.32) x 60
  h.tma_pull_per_cta_GBps = 9;
  h.simt_per_cta_GBps = 19;
  h.net_GBps = 25;                         // DGX A100: one HDR 200 Gb/s NIC per GPU
  h.net_latency_us = 5;
  h.gemm_efficiency = 0.80;  // guesses, as for Hopper (A100 cuBLAS reaches ~80% of 312)
  h.cublas_efficiency = 0.80;
  h.cublas_partition_penalty = 0.06;
  h.nccl_efficiency = 0.80;
  h.nccl_per_cta_GBps = 15.0;
  h.nccl_launch_us = 8.0;
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
      "gemm eff {:.3f}, cublas eff {:.3f} (partition penalty {:.3f}), clock (max(busy, {:.0f}) / {})^{:.3f}, "
      "operator GEMM x{:.3f}, "
      "launch {:.2f} us, epilogue {:.2f} us/tile (cublas {:.2f}), "
      "nccl eff {:.2f} ({:.0f} GB/s per CTA, launch {:.1f} us, per group {:.2f} us; loopback per piece {:.2f} us), "
      "tma launch {:.1f} us (per group {:.2f} us), "
      "overlapped comm rates x{:.3f} (nccl) / x{:.3f} (tma push), x{:.3f} beside the GEMM, hbm contention {:.2f}, "
      "shared-SM penalty {:.2f}",
      name, sm_count, sm_granularity, matrix_tflops_per_sm, matrix_tflops(), clock_ghz, hbm_GBps, l2_bytes / kMiB,
      link_GBps, link_latency_us, per_cta_copy_GBps, tma_push_per_cta_GBps, tma_pull_per_cta_GBps, simt_per_cta_GBps,
      net_GBps, net_latency_us, gemm_efficiency, cublas_efficiency, cublas_partition_penalty, clock_knee_sms, sm_count,
      clock_exponent, operator_gemm_factor, launch_us, tile_epilogue_us, cublas_tile_epilogue_us, nccl_efficiency,
      nccl_per_cta_GBps, nccl_launch_us, nccl_group_us, loopback_piece_us, tma_launch_us, tma_group_us,
      overlap_nccl_rate_factor, overlap_tma_rate_factor, beside_gemm_rate_factor, hbm_contention, shared_sm_penalty);
}

Hardware Hardware::overlapped_comm() const {
  Hardware h = *this;
  h.nccl_per_cta_GBps *= overlap_nccl_rate_factor;
  h.tma_push_per_cta_GBps *= overlap_tma_rate_factor;
  return h;
}

Hardware Hardware::beside_gemm_comm() const {
  Hardware h = overlapped_comm();
  h.nccl_per_cta_GBps *= beside_gemm_rate_factor;
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
  if (is("h200")) return h200_sxm();
  if (is("h100")) return h100_sxm();
  if (is("a100")) return a100_sxm();
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
  if (n.find("h200") != std::string::npos) return h200_sxm();
  if (n.find("h100") != std::string::npos) return h100_sxm();
  if (n.find("a100") != std::string::npos) return a100_sxm();
  OVL_FAIL("no built-in hardware profile for device \"{}\" (built-in: h200, h100, a100)", device_name);
}

std::string_view to_string(LoopbackShare share) {
  switch (share) {
    case LoopbackShare::kRank0: return "rank0";
    case LoopbackShare::kWholeWorld: return "whole-world";
  }
  return "?";
}

LoopbackShare parse_loopback_share(std::string_view text) {
  if (text == "rank0") return LoopbackShare::kRank0;
  if (text == "whole-world") return LoopbackShare::kWholeWorld;
  OVL_FAIL("unknown loopback share '{}' (expected rank0 or whole-world)", text);
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
