// The automatic plan against not overlapping, on held-out problems (shapes no fit, test or benchmark list uses), as
// a user meets it: a loopback world of 8 on one GPU (or, OVL_BENCH_WORLD=threads, a real World of every visible GPU,
// one host thread per rank, each rank with its own random data), bf16, B as N x K, fresh random data, everything
// through the Context API. For each problem:
//   sequential_us      the baseline: the best measured of sim::sequential_candidates (cuBLAS, then NCCL or its loopback
//                      stand-in); a sequential plan with ovl's TMA collective is one of the candidates below
//   auto_predicted_us  the measured time of the plan Tuning::kPredicted chooses
//   auto_measured_us   the measured time of the plan Tuning::kMeasured chooses (its tuning_ms beside it)
//   best_measured_us   the fastest of every plan timed: the planner's 8 best, the sequential candidates, both choices
// all timed together by Context::measure (a warm-up run, then interleaved rounds; the median of each), twice: a
// plan's time is the mean of its two medians (first_us, second_us); repeat_spread is the largest relative difference
// between the two timings of one plan (the evaluation's own noise) and repeat_top1 whether both found the same plan
// fastest. Also the predicted sequential time, the regret of each choice, whether the predicted choice was the
// fastest and the times measured tuning saw for its candidates (tuning_candidates: measured_us, and confirmed_us for
// those its confirmation timed again).
//
// In a real world every timing is collective (Context::measure: the slowest rank's time, the same plan on every rank),
// so every rank computes the same row; rank 0's is written.
//
//   bench_autoplan [--out FILE.json] [--profile FILE] [--world W] [--quick]
// --world: the loopback world's size (8); a real world's is the number of visible GPUs (at most 8).
// Writes {"context": {...}, "problems": [{"problem", "sequential_us", "auto_predicted_us", "auto_measured_us",
// "best_measured_us", "tuning_ms", ...}], "summary": {...}} and prints a table. Each problem and each plan timed is
// written as its JSON too (problem_json, plan_json: what ovl simulate --plan reads). Exit 1 when no GPU.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ovl/core/context.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/sim/planner.hpp"

namespace {

using namespace ovl;

struct Held {
  Op op;
  int64_t m, n, k;
};

// Mixed M, N, K; N not a multiple of 256 in half of them; K from 1024 to 16384; all three ops.
const Held kProblems[] = {
    {Op::kGemmAllReduce, 4096, 5248, 3072},      {Op::kGemmAllReduce, 6144, 12288, 1536},
    {Op::kGemmAllReduce, 12288, 7168, 2048},     {Op::kGemmAllReduce, 16384, 4096, 14336},
    {Op::kGemmAllReduce, 2048, 9600, 8192},      {Op::kGemmReduceScatter, 8192, 5248, 4608},
    {Op::kGemmReduceScatter, 4096, 14336, 1024}, {Op::kGemmReduceScatter, 12288, 3200, 16384},
    {Op::kGemmReduceScatter, 16384, 8448, 6144}, {Op::kGemmReduceScatter, 6144, 2880, 12288},
    {Op::kAllGatherGemm, 8192, 3968, 4096},      {Op::kAllGatherGemm, 4096, 13696, 2048},
    {Op::kAllGatherGemm, 16384, 6144, 1024},     {Op::kAllGatherGemm, 12288, 4672, 5120},
};

// count bf16 values uniform in [-1, 1) from rng, on the device.
DeviceBuffer random_bf16(int64_t count, std::mt19937& rng) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& h : host) {
    const float f = dist(rng);
    uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    h = uint16_t((u + 0x7FFF + ((u >> 16) & 1)) >> 16);  // bf16, round to nearest even
  }
  DeviceBuffer d(host.size() * 2);
  OVL_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path = "bench_autoplan.json", profile;
  int world = 8;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--out")
      out_path = next();
    else if (arg == "--profile")
      profile = next();
    else if (arg == "--world")
      world = std::stoi(next());
    else if (arg == "--quick")
      quick = true;
    else if (arg == "--help" || arg == "-h") {
      std::cout << "bench_autoplan [--out FILE.json] [--profile FILE] [--world W] [--quick]\n";
      return 0;
    } else {
      std::cerr << "bench_autoplan: unknown argument " << arg << "\n";
      return 2;
    }
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::cerr << "bench_autoplan: no GPU\n";
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    OVL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    OVL_CHECK(bench::world_kind() != bench::WorldKind::kMpi,
              "OVL_BENCH_WORLD = mpi: bench_autoplan drives a real world from one process (threads)");
    std::vector<World> worlds;
    if (bench::real_world()) {
      worlds = World::threads(bench::visible_gpu_ids(8));
      world = int(worlds.size());
    } else {
      worlds.push_back(World::loopback(world));
    }
    for (const Held& h : kProblems)  // AllGather's A and ReduceScatter's C are M / world rows per rank
      OVL_CHECK(h.op == Op::kGemmAllReduce || h.m % world == 0,
                "bench_autoplan: a world of {} does not divide M = {} of {} (worlds of 1, 2, 4 or 8 do)", world, h.m,
                to_string(h.op));
    // One rank's contexts and stream (loopback: the one rank that plays the world).
    struct Rank {
      std::unique_ptr<Context> pred, meas, eval;
      cudaStream_t stream = nullptr;
    };
    std::vector<Rank> ranks(worlds.size());
    ContextOptions base;
    base.plan_cache = "";
    base.loopback_fixed_inputs = true;  // the same inputs in every timed call
    if (!profile.empty()) base.hardware = load_hardware(profile);
    run_per_rank(worlds, [&](World& w) {
      ContextOptions pred_o = base, meas_o = base, eval_o = base;
      pred_o.world = meas_o.world = eval_o.world = w;
      pred_o.tuning = Tuning::kPredicted;
      meas_o.tuning = Tuning::kMeasured;
      eval_o.tuning = Tuning::kPredicted;
      eval_o.tuning_budget_ms = 3000;  // the evaluation's own timing: Context::measure's most rounds (15) of every plan
      Rank& r = ranks[size_t(w.rank())];
      r.pred = std::make_unique<Context>(pred_o);
      r.meas = std::make_unique<Context>(meas_o);
      r.eval = std::make_unique<Context>(eval_o);
      OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    });
    nlohmann::json rows = nlohmann::json::array();
    fmt::print("{:<50} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>7} {:>6} {:<}\n", "problem", "seq_us", "pred_us",
               "meas_us", "best_us", "tune_ms", "x_pred", "x_meas", "top1", "predicted plan");
    int n = 0;
    for (const Held& h : kProblems) {
      if (quick && n >= 3) break;
      const int problem_index = n++;
      run_per_rank(worlds, [&](World& w) {
        Rank& rank = ranks[size_t(w.rank())];
        Context &pred = *rank.pred, &meas = *rank.meas, &eval = *rank.eval;
        const cudaStream_t stream = rank.stream;
        std::mt19937 rng(20261205u + 1000u * unsigned(problem_index) + unsigned(w.rank()));
        const int64_t a_rows = h.op == Op::kAllGatherGemm ? h.m / world : h.m;
        const int64_t c_rows = h.op == Op::kGemmReduceScatter ? h.m / world : h.m;
        const auto a = random_bf16(a_rows * h.k, rng), b = random_bf16(h.n * h.k, rng),
                   c = random_bf16(c_rows * h.n, rng);
        const TensorRef ta{a.get(), a_rows, h.k}, tb{b.get(), h.n, h.k, DType::kBF16, BLayout::kNxK},
            tc{c.get(), c_rows, h.n};
        const Problem p = eval.problem_for(h.op, ta, tb, tc);
        const PlanChoice by_prediction = pred.plan_for(h.op, ta, tb, tc, stream);
        const PlanChoice by_measurement = meas.plan_for(h.op, ta, tb, tc, stream);
        // Every plan to time: the planner's 8 best (those this context runs), the sequential candidates, both choices.
        sim::PlannerOptions po;
        po.can_run = [&](const Plan& plan) { return eval.can_run(p, plan); };
        const sim::PlanResult r = sim::plan(p, eval.planning_hardware(), po);
        std::vector<Plan> plans;
        std::vector<double> predicted;
        auto add = [&](const Plan& plan, double us) {
          for (const Plan& q : plans)
            if (q == plan) return;
          plans.push_back(plan);
          predicted.push_back(us);
        };
        for (size_t i = 0; i < r.alternatives.size() && plans.size() < 8; ++i)
          add(r.alternatives[i].plan, r.alternatives[i].predicted_us);
        const std::vector<Plan> baseline = sim::sequential_candidates(p, eval.planning_hardware());
        for (const Plan& s : baseline) add(s, 0);
        add(by_prediction.plan, by_prediction.predicted_us);
        add(by_measurement.plan, by_measurement.predicted_us);
        const PlanChoice timed = eval.measure(h.op, ta, tb, tc, plans, stream);
        const PlanChoice again = eval.measure(h.op, ta, tb, tc, plans, stream);
        // A plan's time: the mean of its two timings' medians (30 rounds in all); the fastest plan by that time.
        std::vector<double> us(plans.size());
        size_t fastest = 0;
        double seq = INFINITY, spread = 0;
        nlohmann::json cands = nlohmann::json::array();
        for (size_t i = 0; i < plans.size(); ++i) {
          const double t = timed.candidates[i].measured_us, t2 = again.candidates[i].measured_us;
          us[i] = (t + t2) / 2;
          if (us[i] < us[fastest]) fastest = i;
          // The baseline only: a sequential plan with ovl's TMA collective is a candidate like the overlapped ones.
          if (std::find(baseline.begin(), baseline.end(), plans[i]) != baseline.end()) seq = std::min(seq, us[i]);
          spread = std::max(spread, std::fabs(t2 / t - 1));
          cands.push_back({{"plan", plans[i].summary()},
                           {"plan_json", plans[i]},  // the Plan itself, so no tool rebuilds it from the summary
                           {"predicted_us", predicted[i]},
                           {"measured_us", us[i]},
                           {"first_us", t},
                           {"second_us", t2}});
        }
        auto time_of = [&](const Plan& plan) {
          for (size_t i = 0; i < plans.size(); ++i)
            if (plans[i] == plan) return us[i];
          return std::nan("");
        };
        nlohmann::json tuned = nlohmann::json::array();
        for (const TunedCandidate& t : by_measurement.candidates)
          tuned.push_back({{"plan", t.plan.summary()},
                           {"plan_json", t.plan},
                           {"measured_us", t.measured_us},
                           {"confirmed_us", t.confirmed_us}});
        const double t_pred = time_of(by_prediction.plan), t_meas = time_of(by_measurement.plan);
        const double best = us[fastest];
        const bool top1 = by_prediction.plan == plans[fastest];
        if (w.rank() == 0) {  // the timings are collective (the slowest rank's); tuning_ms is rank 0's
          rows.push_back({{"problem", p.name()},
                          {"problem_json", p},
                          {"sequential_us", seq},
                          {"auto_predicted_us", t_pred},
                          {"auto_measured_us", t_meas},
                          {"best_measured_us", best},
                          {"tuning_ms", by_measurement.tuning_ms},
                          {"predicted_sequential_us", r.sequential_us},
                          {"predicted_plan", by_prediction.plan.summary()},
                          {"predicted_plan_us", by_prediction.predicted_us},
                          {"measured_plan", by_measurement.plan.summary()},
                          {"best_plan", plans[fastest].summary()},
                          {"top1", top1},
                          {"repeat_spread", spread},
                          // Whether the second timing's fastest plan is the first's: how often the measurement agrees
                          // with itself on top-1 bounds how often any prediction can.
                          {"repeat_top1", again.plan == timed.plan},
                          {"candidates", cands},
                          {"tuning_candidates", tuned}});
          fmt::print("{:<50} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.0f} {:>6.3f}x {:>6.3f}x {:>6} {}\n", p.name(),
                     seq, t_pred, t_meas, best, by_measurement.tuning_ms, seq / t_pred, seq / t_meas,
                     top1 ? "yes" : "no", by_prediction.plan.summary());
          std::fflush(stdout);
        }
        pred.release_caches();
        meas.release_caches();
        eval.release_caches();
      });
    }
    // Summary: the aims' quantities.
    double min_pred = INFINITY, min_meas = INFINITY, regret_sum = 0, regret_max = 0, seq_err_sum = 0,
           meas_regret_max = 0, spread_max = 0;
    int top1 = 0, repeat_top1 = 0;
    for (const auto& row : rows) {
      const double seq = row["sequential_us"], tp = row["auto_predicted_us"], tm = row["auto_measured_us"],
                   best = row["best_measured_us"], pseq = row["predicted_sequential_us"];
      min_pred = std::min(min_pred, seq / tp);
      min_meas = std::min(min_meas, seq / tm);
      regret_sum += tp / best - 1;
      regret_max = std::max(regret_max, tp / best - 1);
      meas_regret_max = std::max(meas_regret_max, tm / best - 1);
      seq_err_sum += std::fabs(pseq - seq) / seq;
      top1 += row["top1"].get<bool>() ? 1 : 0;
      spread_max = std::max(spread_max, row["repeat_spread"].get<double>());
      repeat_top1 += row["repeat_top1"].get<bool>() ? 1 : 0;
    }
    const double count = double(rows.size());
    const nlohmann::json summary = {{"problems", rows.size()},
                                    {"min_speedup_auto_predicted", min_pred},
                                    {"min_speedup_auto_measured", min_meas},
                                    {"top1_auto_predicted", top1 / count},
                                    {"mean_regret_auto_predicted", regret_sum / count},
                                    {"max_regret_auto_predicted", regret_max},
                                    {"max_regret_auto_measured", meas_regret_max},
                                    {"mean_sequential_error", seq_err_sum / count},
                                    {"max_repeat_spread", spread_max},
                                    {"repeat_top1", repeat_top1 / count}};
    fmt::print("\n{}\n", summary.dump(1));
    const nlohmann::json doc = {
        {"context",
         {{"gpu", prop.name},
          {"sm_count", prop.multiProcessorCount},
          {"world_backend", bench::to_string(bench::world_kind())},
          {"loopback_share", bench::real_world() ? "none" : "rank0"},
          {"world", world},
          {"profile", profile.empty() ? std::string("built-in") : profile},
          // A paced loopback (OVL_LINK_PROFILE, read by the Contexts): the link's name.
          {"link_profile", ranks[0].eval->link_profile() ? ranks[0].eval->link_profile()->name : "none"},
          // What the planner priced with (the profile's fitted values, the link's): runs of one version under
          // different profiles stay apart.
          {"planning_hardware", ranks[0].eval->planning_hardware()},
          {"ovl_version", std::string(library_version())}}},
        {"problems", rows},
        {"summary", summary}};
    std::ofstream(out_path) << doc.dump(1) << "\n";
    // Each rank's Contexts end on its own thread: freeing a real World's symmetric buffers is collective.
    run_per_rank(worlds, [&](World& w) {
      Rank& r = ranks[size_t(w.rank())];
      r.pred.reset();
      r.meas.reset();
      r.eval.reset();
      (void)cudaStreamDestroy(r.stream);
    });
  } catch (const std::exception& e) {
    std::cerr << "bench_autoplan: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
