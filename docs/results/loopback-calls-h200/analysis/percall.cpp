// Per-call dump of bench_overlap loopback cases: for each case and each unit (group / chunk / whole call) of the plan,
// the rows, the model's bytes and per-call estimate (calibrated profile and built-in h200, both through
// loopback_hardware(..., 8, kRank0)), and the bytes rank 0's SIMT play reads and writes (executor_device.hpp
// plan_piece + context.cpp range table, replicated here).
// Input: lines "name<TAB>t_comm_us" on stdin. Output: TSV on stdout.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>
#include <algorithm>
#include "ovl/tools/bench_names.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/estimate.hpp"
#include "model_detail.hpp"  // model/src: detail::coll_cost

using namespace ovl;

struct PerCall { double fixed, per_byte; };

static PerCall model_call(const BenchCase& bc, const Problem& p, const Plan& plan, const Hardware& hwL) {
  const Collective coll = collective_of(p.op);
  if (plan.mode == Mode::kSequential) {
    auto c = detail::coll_cost(coll, plan.comm_algo, p.world, p.nodes(), plan.comm_ctas, hwL, hwL.hbm_GBps);
    return {c.launch_us + c.latency_us, c.us_per_byte};
  }
  auto idle = detail::coll_cost(coll, plan.comm_algo, p.world, p.nodes(), plan.comm_ctas,
                                comm_hardware(hwL, plan.mode, false), hwL.hbm_GBps);
  double fixed = idle.launch_us + idle.latency_us;
  if (plan.mode != Mode::kDecomposed) fixed += hwL.nccl_group_us;
  return {fixed, idle.us_per_byte};
}

int main(int argc, char** argv) {
  const Hardware cal = load_hardware(argv[1]);
  const Hardware bi = builtin_hardware("h200");
  std::string name; double t_comm;
  std::printf("name\tmode\top\tm\tn\tk\tcomm_sms\tctas\tunits\tunit\tr0\tr1\tmodel_bytes\tread_bytes\twrite_bytes\treduce_read\tcopy_bytes\tcal_us\tbi_us\tt_comm_us\tpieces\n");
  while (std::cin >> name >> t_comm) {
    auto bcq = parse_bench_name(name);
    if (!bcq || bcq->kind != BenchKind::kOverlap) continue;
    const BenchCase& bc = *bcq;
    const Problem p = bc.problem();
    const Hardware hc = loopback_hardware(cal, p.world, LoopbackShare::kRank0);
    const Hardware hb = loopback_hardware(bi, p.world, LoopbackShare::kRank0);
    const Plan plan = bc.plan(hc);
    if (plan.comm_algo == CommAlgo::kTmaPush || plan.comm_algo == CommAlgo::kTmaPull) continue;
    const PerCall mc = model_call(bc, p, plan, hc), mb = model_call(bc, p, plan, hb);
    // units (context.cpp plan_state)
    std::vector<int64_t> rb, re;
    std::vector<double> model_bytes;
    const double total = double(p.comm_bytes());
    if (plan.mode == Mode::kSequential) { rb = {0}; re = {p.m}; model_bytes = {total}; }
    else if (plan.mode == Mode::kDecomposed) {
      for (int c = 0; c < plan.chunks; ++c) { rb.push_back(p.m * c / plan.chunks); re.push_back(p.m * (c + 1) / plan.chunks); model_bytes.push_back(total / plan.chunks); }
    } else {
      const int64_t tn = plan.tiles_n(p), tm = plan.tiles_m(p);
      int64_t tile = 0;
      for (int t : plan.tile_groups) {
        const int64_t tr0 = tile / tn, tr1 = (tile + t) / tn; tile += t;
        rb.push_back(std::min<int64_t>(tr0 * plan.tile.m, p.m)); re.push_back(std::min<int64_t>(tr1 * plan.tile.m, p.m));
        model_bytes.push_back(total * double(t) / double(tm * tn));
      }
    }
    const int w = p.world; const int64_t mb_rows = p.m / w; const double eb = 2.0;
    int ctas = plan.comm_ctas;  // executor: decomposed / tile-signal comm_ctas; green: min(comm_ctas, partition comm SMs) = comm_ctas here
    for (size_t u = 0; u < rb.size(); ++u) {
      const int64_t r0 = rb[u], r1 = re[u];
      double rd = 0, wr = 0, red = 0, cp = 0; std::string pieces;
      for (int r = 0; r < w; ++r) {
        if (p.op == Op::kGemmAllReduce) {
          const int64_t elems = (r1 - r0) * p.n;
          const int64_t piece = ((elems + w - 1) / w + 7) / 8 * 8;
          const int64_t b0 = std::min(elems, piece * r), b1 = std::min(elems, piece * (r + 1));
          const double c = double(b1 - b0) * eb;
          if (r == 0) { rd += w * c; wr += c; red += w * c; pieces += "R" + std::to_string(b1 - b0) + ","; } else { rd += c; wr += c; cp += c; if (b1 > b0) pieces += "C" + std::to_string(b1 - b0) + ","; }
        } else {
          const int64_t a0 = std::max(r0, mb_rows * r), a1 = std::min(r1, mb_rows * (r + 1));
          if (a1 <= a0) continue;
          if (p.op == Op::kGemmReduceScatter) {
            if (r != 0) continue;
            const double c = double(a1 - a0) * p.n * eb; rd += w * c; wr += c; red += w * c; pieces += "R" + std::to_string((a1 - a0) * p.n) + ",";
          } else {
            const double c = double(a1 - a0) * p.k * eb; rd += c; wr += c; cp += c; pieces += "C" + std::to_string((a1 - a0) * p.k) + ",";
          }
        }
      }
      std::printf("%s\t%s\t%s\t%ld\t%ld\t%ld\t%d\t%d\t%zu\t%zu\t%ld\t%ld\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.4f\t%.4f\t%.4f\t%s\n", name.c_str(),
                  std::string(to_string(plan.mode)).c_str(), std::string(to_string(collective_of(p.op))).c_str(), (long)p.m, (long)p.n, (long)p.k,
                  bc.comm_sms, ctas, rb.size(), u, (long)r0, (long)r1, model_bytes[u], rd, wr, red, cp,
                  mc.fixed + model_bytes[u] * mc.per_byte, mb.fixed + model_bytes[u] * mb.per_byte, t_comm, pieces.empty() ? "-" : pieces.c_str());
    }
  }
}
