// LinkProfile: what one GPU's links to its peers carry, as a paced loopback emulation plays it (docs/overlap.md,
// "Paced loopback") and as the model and the simulator price it (docs/model.md). Plain data with a JSON form; the
// built-in profiles also ship as files (model/profiles/*.json, installed under share/ovl/profiles), each number
// with its source.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ovl/types.hpp"

namespace ovl {

// Rates count link bytes: the bytes that cross one direction of a GPU's links (what busbw measures: busbw = algbw x
// 2(W-1)/W for AllReduce, x (W-1)/W for ReduceScatter / AllGather, nccl-tests' rule).

// A transport's bus bandwidth as measured on the profile's world (bench_collectives' coll/<algo> cases): per
// collective, a row per CTA count and a column per buffer size (nccl-tests' size: the whole buffer of an AllReduce,
// the W parts of a ReduceScatter's input or an AllGather's output). A call's time is its link bytes at this rate: the
// measured times hold the steps' latencies, a transport's rate on calls of a few MiB and how its CTAs share the link
// (TMA push reaches 29 GB/s on 1 CTA and 17 GB/s a CTA on 16 on two H200s), which min(link, CTAs x a per-CTA rate)
// does not (docs/overlap.md, "Paced loopback").
struct BusbwTable {
  std::vector<double> sizes_MiB;                                         // strictly increasing, positive
  std::vector<int> ctas;                                                 // strictly increasing, at least 1
  std::vector<std::vector<double>> allreduce, reducescatter, allgather;  // GB/s [ctas][size], positive

  // The busbw of a call of `bytes` buffer bytes on `ctas` CTAs: between two measured sizes the call's time is linear
  // in its bytes (a latency plus the bytes at a rate), and the rate linear in CTAs between measured counts; below the
  // smallest size, that size's time (a rate in proportion to the bytes); beyond the largest size or CTA count, the
  // edge's rate. Throws ovl::Error on ctas < 1 or bytes <= 0.
  double GBps(Collective c, int ctas, double bytes) const;
  void scale(double factor);  // every rate times factor (an overlapped mode's rate factors); throws on factor <= 0
  void validate(const std::string& profile, std::string_view field) const;  // throws ovl::Error naming the field
};

struct LinkProfile {
  std::string name;                  // "nvlink4-node8"
  std::string source;                // where the numbers come from (provenance)
  double link_GBps = 0;              // one GPU's links, per direction, GB/s
  int nccl_ctas = 24;                // CTAs (channels) NCCL runs a collective on by its own choice
  double nccl_per_cta_GBps = 0;      // link bytes per second one NCCL ring channel (CTA) carries
  double tma_push_per_cta_GBps = 0;  // ... one CTA of the TMA push collective
  double tma_pull_per_cta_GBps = 0;  // ... one CTA of the TMA pull collective
  double simt_per_cta_GBps = 0;      // ... one CTA of the SIMT collective (bench_collectives' simt)
  double latency_us = 0;             // per step of a collective (a ring step, a flag round trip)
  // Optional: each transport measured on this link, which then prices its calls (NCCL's algorithms: nccl_busbw).
  std::optional<BusbwTable> nccl_busbw, tma_push_busbw, tma_pull_busbw;

  // Throws ovl::Error naming the field: rates must be positive and finite, nccl_ctas >= 1, latency >= 0, a name.
  void validate() const;
  // The link bytes per second one CTA of `algo` may move in a call of collective `c` over `call_bytes` buffer bytes
  // when `ctas` CTAs share the link. A call `measured` prices: the table's busbw for the call, over `ctas`; any
  // other: min(link_GBps / ctas, the algorithm's per-CTA rate; NCCL algorithms and the copy engine:
  // nccl_per_cta_GBps). The paced movers, the model and the simulator use this one.
  double paced_cta_GBps(CommAlgo algo, int ctas, Collective c, double call_bytes) const;
  // The table that prices a call of `algo` over `call_bytes`: nccl_busbw for NCCL (kNcclRing: NCCL's own algorithm
  // choice, as bench_collectives' coll/nccl measures it; not NVLS or the symmetric kernels), tma_push_busbw /
  // tma_pull_busbw for the TMA movers; none without that table or for call_bytes = 0 (an ncclReduce / ncclBroadcast
  // per owner, which no table holds).
  const BusbwTable* measured_table(CommAlgo algo, double call_bytes) const;
  // Whether the call's steps' latencies are in its measured time, so that it waits no latency_us per step on top:
  // an NCCL call the table prices (each such call is one of the table's calls). A TMA mover keeps its latency: it
  // streams a call's groups, and each group arrives a latency after it is sent (the release of its rows), which the
  // table's whole-buffer rate does not say.
  bool latency_measured(CommAlgo algo, double call_bytes) const;
  std::string summary() const;  // one line
};

// Built-ins: "nvlink4-node8" (an 8-GPU NVLink-4 NVSwitch node), "h200x2" (fitted from the 2-H200 runs).
LinkProfile builtin_link_profile(std::string_view name);  // throws ovl::Error on an unknown name
std::vector<std::string> builtin_link_profile_names();
// A built-in name, else a JSON file path (errors name the file and the field).
LinkProfile link_profile_from_arg(const std::string& name_or_path);
LinkProfile load_link_profile(const std::string& path);
// Env OVL_LINK_PROFILE (a built-in name or a file), read once per call; nullopt when unset or empty.
std::optional<LinkProfile> link_profile_from_env();

void to_json(nlohmann::json& j, const LinkProfile& p);
// Every field is required; a missing, mistyped or out-of-range field throws ovl::Error naming it. Unknown keys are
// errors except "comment" and keys starting with "_" (notes beside the numbers).
void from_json(const nlohmann::json& j, LinkProfile& p);

}  // namespace ovl
