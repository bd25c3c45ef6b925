// Collective time: launch + latency x steps + bytes x (per-byte cost of the slowest resource).
#include <algorithm>
#include <utility>
#include <vector>

#include "model_detail.hpp"
#include "ovl/error.hpp"
#include "ovl/mover_rules.hpp"

namespace ovl::detail {

CollCoeffs coll_coeffs(Collective c, CommAlgo algo, int world, bool loopback_rank0, bool paced) {
  OVL_CHECK(world >= 1, "collective world = {} must be at least 1", world);
  const double w = world;
  const double f = (w - 1) / w;  // the share of the buffer that crosses the link, per direction
  if (algo == CommAlgo::kCopyEngine) {
    // Copy engines move the link bytes (a read at the source, a write at the destination: 2 f HBM bytes per pass);
    // only the owner's sum runs on CTAs: W slots of 1/W read, 1/W written (1 + 1/W, a world of 1: a copy, 2).
    // AllGather also copies the rank's own rows into its gathered A (2/W); AllReduce gathers the sums (2 f more).
    // One flag step per pass. Any share of the loopback plays the same copies (kRank0: rank 0's of them).
    const double sum = world == 1 ? 2.0 : 1 + 1 / w;
    switch (c) {
      case Collective::kAllReduce:
        return {2 * f, sum, 4 * f + sum, world == 1 ? 0.0 : 2};
      case Collective::kReduceScatter:
        return {f, sum, 2 * f + sum, world == 1 ? 0.0 : 1};
      case Collective::kAllGather:
        return {f, 0.0, 2 * f + 2 / w, world == 1 ? 0.0 : 1};
    }
  }
  if (world == 1) return {0.0, 2.0, 2.0, 0.0};  // a local copy: read once, written once
  if (loopback_rank0 && algo == CommAlgo::kTmaPush) {
    // The loopback emulation of rank 0's share with the push mover (kernels/src/loopback_tma.cu), all of it in
    // rank 0's HBM: rank 0's pieces (1/W of the buffer) zeroed, then each of the W sources read and added into them
    // (a read here, a read-modify-write there: 3 per source byte); AllReduce also copies the W-1 other owners'
    // reduced pieces in (2 f); AllGather copies every owner's rows (2). RS 3 + 1/W, AR 5 - 1/W, AG 2.
    switch (c) {
      case Collective::kAllReduce:
        return {2 * f, 5 - 1 / w, 5 - 1 / w, 2};
      case Collective::kReduceScatter:
        return {f, 3 + 1 / w, 3 + 1 / w, 1};
      case Collective::kAllGather:
        return {f, 2.0, 2.0, 1};
    }
  }
  if (loopback_rank0 && is_nccl(algo) && paced) {
    // The paced play (docs/overlap.md, "Paced loopback"): the SIMT kernel moves loopback_rank0_nccl_bytes in HBM
    // (its CTAs at the SIMT rate) and paces the peers' bytes, the ring's link bytes, to the link; it waits the
    // ring's steps' latencies once per call.
    const double bytes = loopback_rank0_nccl_bytes(c, world);
    const CollCoeffs ring = coll_coeffs(c, CommAlgo::kNcclRing, world, false);
    return {ring.link_bytes, bytes, bytes, ring.steps};
  }
  if (loopback_rank0 && is_nccl(algo)) {
    // The loopback emulation of rank 0's share of an NCCL-algorithm call (loopback_rank0_nccl_bytes): no ring, no
    // steps, all of it in rank 0's HBM. Its per-CTA rate and launch are the SIMT kernel's (loopback_hardware), so
    // the bytes count as link bytes, at min(ctas x that rate, link_GBps = HBM).
    const double bytes = loopback_rank0_nccl_bytes(c, world);
    return {bytes, 0.0, bytes, 0};
  }
  switch (algo) {
    case CommAlgo::kNcclRing:
      // Ring: each GPU sends f S per pass (RS and AG one pass, AR both) in W-1 steps per pass. HBM: read the
      // input, write the output, and the received data once.
      switch (c) {
        case Collective::kAllReduce:
          return {2 * f, 0.0, 2 + 2 * f, 2 * (w - 1)};
        case Collective::kReduceScatter:
          return {f, 0.0, 1 + 1 / w + f, w - 1};
        case Collective::kAllGather:
          return {f, 0.0, 1 + 1 / w, w - 1};
      }
      break;
    case CommAlgo::kNcclNvls:
      // NVLink SHARP: the switch reduces (multimem.ld_reduce) and multicasts (multimem.st), so an AllReduce sends
      // about half the ring's bytes per GPU; RS and AG move the ring's bytes. One step per phase.
      switch (c) {
        case Collective::kAllReduce:
          return {f, 0.0, 2 + f, 2};
        case Collective::kReduceScatter:
          return {f, 0.0, 1 + 1 / w + f, 1};
        case Collective::kAllGather:
          return {f, 0.0, 1 + 1 / w, 1};
      }
      break;
    case CommAlgo::kTmaPush:
      // Push-reduce: each rank copies its own chunk (2/W) and cp.reduce.async.bulk-adds each of the W-1 other
      // chunks into its owner (a read here, a read-modify-write there: 3 (W-1)/W): 3 - 1/W bytes of CTA work per
      // buffer byte. AllGather: read the own chunk once, write it to the W-1 peers (1 per buffer byte), plus the
      // own chunk's copy into the output (2/W). AllReduce = push-reduce, then push the reduced chunk (1). The
      // counts are the kernels' own (bench/bench_collectives.cu, moved_bytes()).
      switch (c) {
        case Collective::kAllReduce:
          return {2 * f, 4 - 1 / w, 4 - 1 / w, 2};
        case Collective::kReduceScatter:
          return {f, 3 - 1 / w, 3 - 1 / w, 1};
        case Collective::kAllGather:
          return {f, 1 + 2 / w, 1 + 2 / w, 1};
      }
      break;
    case CommAlgo::kNcclSymmetric:
      // NCCL's symmetric kernels on symmetric windows (no multicast: NVLS off): ReduceScatter loads chunk r from
      // every peer's window and sums (LD), AllGather stores the own chunk into every peer's window (ST), AllReduce
      // does both (RSxLD_AGxST). Link bytes as the ring's, one barrier per phase; HBM: every input byte read once
      // and every output byte written once, by whichever rank touches it. The CTAs count link bytes (NCCL's).
      switch (c) {
        case Collective::kAllReduce:
          return {2 * f, 0.0, 2.0, 2};
        case Collective::kReduceScatter:
          return {f, 0.0, 1 + 1 / w, 1};
        case Collective::kAllGather:
          return {f, 0.0, 1 + 1 / w, 1};
      }
      break;
    case CommAlgo::kTmaPull:
    case CommAlgo::kSimt:  // the pull protocol with plain loads and stores, at its own per-CTA rate
      // Pull-reduce: rank r reads chunk r from all W ranks (W chunks per output chunk, W-1 over the link), sums
      // them on chip, writes one chunk: 1 + 1/W bytes per buffer byte; ready flag then read = 2 latencies.
      // AllGather: the own chunk's copy (2/W) plus a read and a write of each of the W-1 other chunks: 2.
      switch (c) {
        case Collective::kAllReduce:
          return {2 * f, 1 + 1 / w + 2 * f, 1 + 1 / w + 2 * f, 4};
        case Collective::kReduceScatter:
          return {f, 1 + 1 / w, 1 + 1 / w, 2};
        case Collective::kAllGather:
          return {f, 2.0, 2.0, 2};
      }
      break;
  }
  OVL_FAIL("unknown collective or algorithm");
}

namespace {
PerByte per_byte_one_node(const CollCoeffs& k, Collective c, CommAlgo algo, int world, int ctas, const PacedCall& call,
                          const Hardware& hw, double hbm_GBps) {
  PerByte t;
  t.shared = k.hbm_bytes / hbm_GBps;
  if (algo == CommAlgo::kCopyEngine) {
    // The copies (at the copy engines' rate, within HBM), then the owner's sum on `ctas` CTAs: one after the other.
    const double copies = k.link_bytes > 0 ? k.link_bytes / copy_engine_GBps(hw) : 0.0;
    const double sum = k.cta_bytes > 0 ? k.cta_bytes / std::min(hbm_GBps, ctas * hw.fit.per_cta_copy_GBps) : 0.0;
    t.shared = std::max(t.shared, copies) + sum;
  } else if (world > 1 && (hw.emulation.paced || measured_link_call(hw, algo, call.bytes))) {
    // The link's rate for the call (its bytes, its launched CTAs: LinkProfile::paced_cta_GBps), so together min(link,
    // ctas x the transport's per-CTA rate), or the measured busbw of such a call, when the CTAs' shares are even and
    // all of them run. A paced loopback: each CTA paces its link bytes so, and moves its HBM bytes at its own rate (an
    // NCCL algorithm is the SIMT kernel, nccl_per_cta_GBps = its rate on a kRank0 profile). A real world over a
    // measured link: the table's busbw (an overlapped mode's rate factors applied to it, Hardware::overlapped_comm)
    // holds the transport's own CTA and protocol limits; its HBM traffic stays shared with the GEMM.
    if (hw.emulation.paced) {
      const double moved = is_nccl(algo) ? hw.fit.nccl_per_cta_GBps : per_cta_GBps(algo, hw);
      t.shared = std::max(t.shared, k.cta_bytes / (ctas * moved));
    }
    if (k.link_bytes > 0)
      t.link = k.link_bytes / (ctas * hw.link->paced_cta_GBps(algo, call.launched_ctas, c, call.bytes));
  } else if (is_nccl(algo)) {
    // NCCL's CTAs (ring channels, or the symmetric kernels' blocks) each move their per-CTA rate until the link (at
    // NCCL's protocol efficiency) caps them.
    const double rate = std::min(hw.effective_link_GBps() * hw.fit.nccl_efficiency, ctas * per_cta_GBps(algo, hw));
    if (k.link_bytes > 0) t.shared = std::max(t.shared, k.link_bytes / rate);
  } else {
    // TMA / SIMT: bandwidth = min(ctas x the algorithm's per-CTA rate, link, HBM share), each with its
    // data-movement factor. A world of one is a local copy, at the plain copy's per-CTA rate.
    const double per_cta = world == 1 ? hw.fit.per_cta_copy_GBps : per_cta_GBps(algo, hw);
    t.shared = std::max(t.shared, k.cta_bytes / (ctas * per_cta));
    if (k.link_bytes > 0) t.shared = std::max(t.shared, k.link_bytes / hw.effective_link_GBps());
  }
  t.shared /= kBytesPerUsPerGBps;
  t.link /= kBytesPerUsPerGBps;
  return t;
}
}  // namespace

CollCost coll_cost(Collective c, CommAlgo algo, int world, int nodes, int ctas, const PacedCall& call,
                   const Hardware& hw, double hbm_GBps) {
  // nccl-symmetric on no CTA (CtaPolicy::kZero, collective_ctas): NCCL's copy-engine AllGather.
  const bool copy_engines = priced_algo(algo, ctas) != algo;
  OVL_CHECK(ctas >= 1 || copy_engines, "collective ctas = {} must be at least 1", ctas);
  OVL_CHECK(!copy_engines || c == Collective::kAllGather,
            "nccl-symmetric on 0 CTAs (CTA policy zero) moves an AllGather with the copy engines, not a {}",
            to_string(c));
  OVL_CHECK(nodes >= 1 && world % nodes == 0, "collective nodes = {} must divide world = {}", nodes, world);
  OVL_CHECK(hbm_GBps > 0, "collective HBM bandwidth {} GB/s must be positive", hbm_GBps);
  CollCost cost;
  cost.launch_us = is_nccl(algo) ? hw.fit.nccl_launch_us : hw.fit.tma_launch_us;
  if (world == 1 && is_nccl(algo)) {
    // NCCL with one rank: a device copy at HBM speed.
    cost.per_byte.shared = 2.0 / hbm_GBps / kBytesPerUsPerGBps;
    return cost;
  }
  OVL_CHECK(nodes == 1 || !algo_traits(algo).one_node,
            "collective algorithm {} works within one node; world {} spans {} nodes", to_string(algo), world, nodes);
  if (nodes == 1) {
    // Copy engines: ce's copies of an AllGather (the own rows' copy included), between NCCL's ready and completion
    // flags.
    const CollCoeffs k = priced_coeffs(c, algo, ctas, world, hw.emulation.loopback_rank0, hw.emulation.paced);
    const CommAlgo priced = priced_algo(algo, ctas);
    const auto& link = hw.link;
    const bool measured = measured_link_call(hw, priced, call.bytes);
    if (measured) cost.launch_us = 0;  // the table's time holds it
    cost.latency_us =
        measured || (link && link->latency_measured(priced, call.bytes)) ? 0.0 : k.steps * hw.fit.link_latency_us;
    cost.per_byte = per_byte_one_node(k, c, priced, world, ctas, call, hw, hbm_GBps);
    return cost;
  }
  // Hierarchical: within each node of g GPUs a reduce-scatter / all-gather over the link, and among the nodes the
  // same collective on S / g bytes per GPU over the network (each GPU's own NIC), which is the bottleneck.
  const int g = world / nodes;
  const double n = nodes;
  const double fn = (n - 1) / n;
  // NCCL only (checked above): the loopback rank-0 traffic (TMA push) does not apply.
  const CollCoeffs rs = coll_coeffs(Collective::kReduceScatter, algo, g, /*loopback_rank0=*/false);
  const CollCoeffs ag = coll_coeffs(Collective::kAllGather, algo, g, /*loopback_rank0=*/false);
  const double net_rate = std::min(hw.spec.net_GBps * hw.fit.nccl_efficiency, ctas * hw.fit.nccl_per_cta_GBps);
  double intra = 0, net_bytes = 0, net_steps = 0, hbm_bytes = 0;
  switch (c) {
    case Collective::kAllReduce:
      intra = per_byte_one_node(rs, Collective::kReduceScatter, algo, g, ctas, call, hw, hbm_GBps).at() +
              per_byte_one_node(ag, Collective::kAllGather, algo, g, ctas, call, hw, hbm_GBps).at();
      net_bytes = 2 * fn / g;
      net_steps = 2 * (n - 1);
      cost.latency_us = (rs.steps + ag.steps) * hw.fit.link_latency_us;
      hbm_bytes = rs.hbm_bytes + ag.hbm_bytes;
      break;
    case Collective::kReduceScatter:
      intra = per_byte_one_node(rs, Collective::kReduceScatter, algo, g, ctas, call, hw, hbm_GBps).at();
      net_bytes = fn / g;
      net_steps = n - 1;
      cost.latency_us = rs.steps * hw.fit.link_latency_us;
      hbm_bytes = rs.hbm_bytes;
      break;
    case Collective::kAllGather:
      intra = per_byte_one_node(ag, Collective::kAllGather, algo, g, ctas, call, hw, hbm_GBps).at();
      net_bytes = fn / g;
      net_steps = n - 1;
      cost.latency_us = ag.steps * hw.fit.link_latency_us;
      hbm_bytes = ag.hbm_bytes;
      break;
  }
  cost.latency_us += net_steps * hw.fit.net_latency_us;
  cost.per_byte.shared =
      std::max(intra + net_bytes / net_rate / kBytesPerUsPerGBps, hbm_bytes / hbm_GBps / kBytesPerUsPerGBps);
  return cost;
}

}  // namespace ovl::detail

namespace ovl {

double loopback_rank0_nccl_bytes(Collective c, int world) {
  OVL_CHECK(world >= 1, "collective world = {} must be at least 1", world);
  const double w = world;
  switch (c) {
    case Collective::kAllReduce:
      return 1 + 1 / w + 2 * (w - 1) / w;
    case Collective::kReduceScatter:
      return 1 + 1 / w;
    case Collective::kAllGather:
      return 2.0;
  }
  OVL_FAIL("unknown collective");
}

std::vector<LoopbackCall> loopback_rank0_calls(const Problem& problem, const Plan& plan) {
  const std::vector<UnitRows> units = unit_rows(problem, plan);
  const int w = std::max(1, problem.world);
  std::vector<LoopbackCall> out(units.size());
  for (size_t i = 0; i < units.size(); ++i) {
    const int64_t r0 = units[i].begin, r1 = units[i].end;
    LoopbackCall& call = out[i];
    if (r1 <= r0) {  // a group inside one tile row (tile-major output): the executor gives it no rows, no pieces
      if (problem.op == Op::kGemmReduceScatter) call.factor = 0;
      continue;
    }
    for (int r = 0; r < w; ++r) call.pieces += owner_rows(problem, r0, r1, r).rows() > 0;
    if (problem.op == Op::kGemmReduceScatter) {
      // Rank 0 reduces only its own block's rows of the unit.
      const int64_t inside = owner_rows(problem, r0, r1, 0).rows();
      call.factor = double(w) * double(inside) / double(r1 - r0);
      call.pieces = inside > 0 ? 1 : 0;
    }
  }
  return out;
}

namespace {

// One owner's piece of a loopback call as the TMA mover cuts it (kernels/src/loopback_tma.cu, Units): `chunks`
// chunks of `cap` bytes (the last one shorter), `per_chunk` units each.
struct MoverPiece {
  double bytes = 0, cap = 0;
  int64_t chunks = 0;
  int per_chunk = 1;  // push sums: W, one unit per source (source 0 first: rank 0's own, no link bytes)
  double link = 0;    // link bytes per byte of a unit (push sums: of a unit of a peer's source)
  int64_t units() const { return chunks * per_chunk; }
  // Link bytes of the piece's first k units.
  double prefix(int64_t k) const {
    const int64_t q = k / per_chunk, s = k % per_chunk;
    const double whole = std::min(double(q) * cap, bytes);  // chunks [0, q)
    if (per_chunk == 1) return link * whole;
    const double part = q < chunks ? std::min(cap, bytes - double(q) * cap) : 0.0;  // chunk q: sources [0, s)
    return link * (double(per_chunk - 1) * whole + double(std::max<int64_t>(0, s - 1)) * part);
  }
};

}  // namespace

double tma_mover_link_load(const Problem& problem, int64_t row_begin, int64_t row_end, CommAlgo algo, int ctas) {
  OVL_CHECK(is_tma_mover(algo),
            "tma_mover_link_load: comm_algo {} is not a TMA mover (tma-push or tma-pull)", to_string(algo));
  OVL_CHECK(ctas >= 1, "tma_mover_link_load: ctas = {} must be at least 1", ctas);
  const int w = problem.world;
  if (w <= 1) return 1.0;  // nothing crosses a link
  const Collective coll = collective_of(problem.op);
  const int64_t row_bytes =
      (problem.op == Op::kAllGatherGemm ? problem.k : problem.n) * dtype_bytes(problem.comm_dtype());
  // Rank 0's pieces (dev::plan_piece): ReduceScatter its own sum; AllReduce its own sum, then the peers' sums copied
  // in; AllGather every owner's rows, copied.
  std::vector<MoverPiece> pieces;
  for (int r = 0; r < w; ++r) {
    const int64_t bytes = owner_rows(problem, row_begin, row_end, r).rows() * row_bytes;
    if (bytes == 0 || (coll == Collective::kReduceScatter && r != 0)) continue;
    const bool sum = coll != Collective::kAllGather && r == 0;
    MoverPiece p;
    p.bytes = double(bytes);
    p.cap = double(kTmaMoverStageBytes);
    // The kernels' own rules (ovl/mover_rules.hpp).
    if (sum && algo == CommAlgo::kTmaPull) {  // one unit: W slots of pull_slot_bytes
      p.cap = double(pull_slot_bytes(std::uint32_t(kTmaMoverStageBytes), w));
      p.link = link_bytes_per_byte(true, 0, w);
    } else if (sum) {  // W units, one per source (prefix(): source 0 carries no link bytes)
      p.per_chunk = w;
      p.link = link_bytes_per_byte(false, 1, w);
    } else {  // a copy, from the owner
      p.link = link_bytes_per_byte(false, r, w);
    }
    p.chunks = (bytes + int64_t(p.cap) - 1) / int64_t(p.cap);
    pieces.push_back(p);
  }
  int64_t total = 0;
  for (const MoverPiece& p : pieces) total += p.units();
  // Link bytes of the first k units, for k that never decreases from one call to the next.
  size_t i = 0;
  int64_t first = 0;
  double before = 0;
  auto prefix = [&](int64_t k) {
    for (; i < pieces.size() && k >= first + pieces[i].units(); ++i) {
      before += pieces[i].prefix(pieces[i].units());
      first += pieces[i].units();
    }
    return i < pieces.size() ? before + pieces[i].prefix(k - first) : before;
  };
  double lo = prefix(0), most = 0;
  for (int c = 0; c < ctas; ++c) {
    const double hi = prefix(total * (c + 1) / ctas);
    most = std::max(most, hi - lo);
    lo = hi;
  }
  return lo > 0 ? ctas * most / lo : 1.0;
}

std::vector<CallAdjust> call_adjustments(const Problem& problem, const Plan& plan, const Hardware& hw) {
  const std::vector<LoopbackCall> calls = loopback_rank0_calls(problem, plan);
  std::vector<CallAdjust> out(calls.size());
  const bool nccl = is_nccl(plan.comm_algo);
  const bool mover = is_tma_mover(plan.comm_algo);
  // An NCCL unit that a real world moves owner by owner loads each link with all of its bytes (nccl_unit_link_load):
  // the real world's factor on its bytes, and the paced stand-in's link load (Resources::collective_unit).
  const auto nccl_units = [&](double CallAdjust::*field) {
    const std::vector<UnitRows> units = unit_rows(problem, plan);
    for (size_t i = 0; i < units.size() && i < out.size(); ++i) {
      out[i].*field = nccl_unit_link_load(problem, units[i].begin, units[i].end);
      out[i].call_bytes = nccl_unit_call_bytes(problem, units[i].begin, units[i].end);
    }
    return out;
  };
  // A TMA mover's call is one streaming launch over the buffer (the tma executor's run_ranges in a real world,
  // Resources::loopback_args in loopback): a link's table prices it at that call's busbw.
  if (mover && problem.world > 1)
    for (CallAdjust& a : out) a.call_bytes = double(problem.comm_bytes());
  if (!hw.emulation.loopback && problem.world > 1 && nccl) return nccl_units(&CallAdjust::factor);
  if (!hw.emulation.loopback_rank0 || problem.nodes() > 1 || !(nccl || mover)) return out;
  for (size_t i = 0; i < calls.size(); ++i) {
    out[i].factor = calls[i].factor;
    if (nccl) out[i].extra_us = calls[i].pieces * hw.fit.loopback_piece_us;
  }
  if (!hw.emulation.paced) return out;
  if (nccl) return nccl_units(&CallAdjust::link_load);
  if (!mover) return out;
  const int ctas = signaled_comm_ctas(plan, hw);  // the CTAs the executor launches the mover with
  // The load depends on the owners' row counts only: a call whose counts are the previous call's (equal groups, the
  // common case) has its load.
  const std::vector<UnitRows> units = unit_rows(problem, plan);
  std::vector<int64_t> rows(size_t(problem.world)), last;
  for (size_t i = 0; i < units.size(); ++i) {
    for (int r = 0; r < problem.world; ++r)
      rows[size_t(r)] = owner_rows(problem, units[i].begin, units[i].end, r).rows();
    out[i].link_load = i > 0 && rows == last
                           ? out[i - 1].link_load
                           : tma_mover_link_load(problem, units[i].begin, units[i].end, plan.comm_algo, ctas);
    last = rows;
  }
  return out;
}

bool measured_link_call(const Hardware& hw, CommAlgo algo, double call_bytes) {
  return hw.link && !hw.emulation.loopback && hw.link->measured_table(algo, call_bytes) != nullptr;
}

double link_steps(Collective c, CommAlgo algo, int world) {
  return detail::coll_coeffs(c, algo == CommAlgo::kNcclNvls ? CommAlgo::kNcclRing : algo, world, false).steps;
}

double cta_bytes_per_link_byte(Collective c, CommAlgo algo, int world, bool loopback_rank0) {
  if (is_nccl(algo) || world <= 1) return 1.0;
  const detail::CollCoeffs k = detail::coll_coeffs(c, algo, world, loopback_rank0);
  return k.link_bytes > 0 ? k.cta_bytes / k.link_bytes : 1.0;
}

double per_cta_GBps(CommAlgo algo, const Hardware& hw) {
  switch (algo) {
    case CommAlgo::kNcclRing:
    case CommAlgo::kNcclNvls:
      return hw.fit.nccl_per_cta_GBps;
    case CommAlgo::kTmaPush:
      return hw.fit.tma_push_per_cta_GBps;
    case CommAlgo::kTmaPull:
      return hw.fit.tma_pull_per_cta_GBps;
    case CommAlgo::kCopyEngine:
      return hw.fit.per_cta_copy_GBps;  // the owner's sum: the only CTA work of ce
    case CommAlgo::kNcclSymmetric:
      return hw.fit.nccl_symmetric_per_cta_GBps;
    case CommAlgo::kSimt:
      return hw.fit.simt_per_cta_GBps;
  }
  OVL_FAIL("unknown collective algorithm");
}

double copy_engine_GBps(const Hardware& hw) {
  return hw.fit.copy_engine_GBps > 0 ? std::min(hw.fit.copy_engine_GBps, hw.effective_link_GBps())
                                     : hw.effective_link_GBps();
}

}  // namespace ovl
