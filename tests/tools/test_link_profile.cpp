// LinkProfile: JSON round trip and errors, the built-ins against their shipped files, and the paced loopback profile
// (loopback_hardware with a link): the link rate, the per-CTA caps, NCCL's measured busbw by call size and CTAs,
// NCCL's CTA count, the collective's closed form, and calibration reading the link from a benchmark file's context.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "expect_error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/link_profile.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/sim/simulate.hpp"
#include "ovl/tools/calibrate.hpp"

namespace ovl {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

TEST(LinkProfile, BuiltinsValidateAndRoundTrip) {
  for (const std::string& name : builtin_link_profile_names()) {
    const LinkProfile p = builtin_link_profile(name);
    EXPECT_EQ(p.name, name);
    EXPECT_FALSE(p.source.empty());
    EXPECT_NO_THROW(p.validate());
    const LinkProfile back = nlohmann::json(p).get<LinkProfile>();
    EXPECT_EQ(nlohmann::json(back).dump(), nlohmann::json(p).dump()) << name;
  }
  // nvlink4-node8: NCCL's 24 channels reach the ~370 GB/s busbw of an 8-GPU ring; the line rate is 450.
  const LinkProfile node = builtin_link_profile("nvlink4-node8");
  EXPECT_DOUBLE_EQ(node.link_GBps, 450);
  EXPECT_NEAR(node.nccl_ctas * node.nccl_per_cta_GBps, 370, 1e-9);
  test::expect_error_naming([] { builtin_link_profile("nvlink5"); }, "nvlink5");
}

TEST(LinkProfile, JsonErrorsNameTheField) {
  const nlohmann::json good = builtin_link_profile("h200x2");
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = good;
    j[key] = std::move(v);
    return j;
  };
  auto without = [&](const char* key) {
    nlohmann::json j = good;
    j.erase(key);
    return j;
  };
  for (const char* key : {"name", "source", "link_GBps", "nccl_ctas", "nccl_per_cta_GBps", "tma_push_per_cta_GBps",
                          "tma_pull_per_cta_GBps", "simt_per_cta_GBps", "latency_us"}) {
    test::expect_error_naming([&] { (void)without(key).get<LinkProfile>(); }, key);
  }
  test::expect_error_naming([&] { (void)with("link_GBps", -1).get<LinkProfile>(); }, "link_GBps");
  test::expect_error_naming([&] { (void)with("tma_pull_per_cta_GBps", 0).get<LinkProfile>(); },
                            "tma_pull_per_cta_GBps");
  test::expect_error_naming([&] { (void)with("simt_per_cta_GBps", "fast").get<LinkProfile>(); }, "simt_per_cta_GBps");
  test::expect_error_naming([&] { (void)with("nccl_ctas", 0).get<LinkProfile>(); }, "nccl_ctas");
  test::expect_error_naming([&] { (void)with("nccl_ctas", 2.5).get<LinkProfile>(); }, "nccl_ctas");
  test::expect_error_naming([&] { (void)with("latency_us", -0.1).get<LinkProfile>(); }, "latency_us");
  test::expect_error_naming([&] { (void)with("link_gbps", 1).get<LinkProfile>(); }, "link_gbps");
  test::expect_error_naming([&] { (void)with("name", "").get<LinkProfile>(); }, "name");
  EXPECT_NO_THROW((void)with("_link_GBps", "a note").get<LinkProfile>());
  EXPECT_NO_THROW((void)with("comment", "a note").get<LinkProfile>());
}

TEST(LinkProfile, AHardwareProfileValidatesItsLink) {
  Hardware h = loopback_hardware(builtin_hardware("h200"), 8, LoopbackShare::kRank0, builtin_link_profile("h200x2"));
  EXPECT_NO_THROW(h.validate());
  h.link->tma_pull_per_cta_GBps = 0;  // was priced as an unlimited rate
  test::expect_error_naming([&] { h.validate(); }, "\"tma_pull_per_cta_GBps\" = 0");
}

TEST(LinkProfile, FromArgTakesANameOrAFile) {
  EXPECT_EQ(link_profile_from_arg("nvlink4-node8").name, "nvlink4-node8");
  const std::string path = ::testing::TempDir() + "/slow_link.json";
  nlohmann::json j = builtin_link_profile("h200x2");
  j["name"] = "slow";
  j["link_GBps"] = 50;
  std::ofstream(path) << j.dump();
  EXPECT_DOUBLE_EQ(link_profile_from_arg(path).link_GBps, 50);
  j["latency_us"] = "x";
  std::ofstream(path) << j.dump();
  test::expect_error_naming([&] { link_profile_from_arg(path); }, "latency_us");
  test::expect_error_naming([&] { link_profile_from_arg(path + ".missing"); }, ".missing");
  std::remove(path.c_str());
}

TEST(LinkProfile, PacedRatePerCtaIsTheShareOfTheLinkOrTheTransportsRate) {
  const LinkProfile p = builtin_link_profile("nvlink4-node8");
  ASSERT_FALSE(p.nccl_busbw.has_value());
  const auto ar = Collective::kAllReduce;
  // 8 CTAs: 450 / 8 = 56 per CTA is above every transport's rate, so the transport's binds, whatever the call's size.
  for (double bytes : {1.0, 64 * kMiB}) {
    EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kTmaPush, 8, ar, bytes), 23.0);
    EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kTmaPull, 8, ar, bytes), 19.4);
    EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kNcclRing, 8, ar, bytes), 370.0 / 24);
  }
  // 32 CTAs: 450 / 32 = 14.06 is below them: the link's share binds.
  EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kTmaPush, 32, ar, 64 * kMiB), 450.0 / 32);
  EXPECT_THROW(p.paced_cta_GBps(CommAlgo::kTmaPush, 0, ar, 64 * kMiB), Error);
  // Every transport waits its steps' latency.
  EXPECT_FALSE(p.latency_measured(CommAlgo::kNcclRing, 64 * kMiB));
  EXPECT_EQ(p.measured_table(CommAlgo::kTmaPush, 64 * kMiB), nullptr);
}

// h200x2 carries NCCL's and the TMA movers' measured busbw: a call is priced by its size and CTAs.
TEST(LinkProfile, CallsFollowTheMeasuredBusbw) {
  const LinkProfile p = builtin_link_profile("h200x2");
  ASSERT_TRUE(p.nccl_busbw.has_value());
  const BusbwTable& t = *p.nccl_busbw;
  // At a measured point, the measurement (results/h200x2/bench_collectives.json): AllReduce of 1 GiB on 32 CTAs
  // 345.8 GB/s, ReduceScatter of 64 MiB on 16 CTAs 184.3, AllGather of 4 MiB on NCCL's own 24 CTAs 80.9.
  EXPECT_NEAR(t.GBps(Collective::kAllReduce, 32, 1024 * kMiB), 345.8, 1e-9);
  EXPECT_NEAR(p.paced_cta_GBps(CommAlgo::kNcclRing, 16, Collective::kReduceScatter, 64 * kMiB), 184.3 / 16, 1e-9);
  EXPECT_NEAR(t.GBps(Collective::kAllGather, 24, 4 * kMiB), 80.9, 1e-9);
  // Between points: the time linear in the size (32 MiB: a third of the way from 16 to 64, each size's time its
  // size over its busbw) and the rate linear in CTAs (12: halfway from 8 to 16).
  EXPECT_NEAR(t.GBps(Collective::kAllReduce, 32, 32 * kMiB), 32 / (2.0 / 3 * 16 / 228.0 + 1.0 / 3 * 64 / 286.9), 1e-9);
  EXPECT_GT(t.GBps(Collective::kAllReduce, 32, 32 * kMiB), (228.0 + 286.9) / 2);  // above the mean of the rates
  EXPECT_NEAR(t.GBps(Collective::kAllReduce, 12, 64 * kMiB), (156.2 + 240.6) / 2, 1e-9);
  // Beyond the table: the edge's rate; below its smallest size, that size's time.
  EXPECT_NEAR(t.GBps(Collective::kAllReduce, 64, 4096 * kMiB), 345.8, 1e-9);
  EXPECT_NEAR(t.GBps(Collective::kAllReduce, 32, 0.25 * kMiB), 75.0 / 4, 1e-9);
  EXPECT_THROW((void)t.GBps(Collective::kAllReduce, 0, kMiB), Error);
  EXPECT_THROW((void)t.GBps(Collective::kAllReduce, 8, 0), Error);
  // Small calls are slower than the large ones the fitted link rate stands for.
  EXPECT_LT(t.GBps(Collective::kAllReduce, 16, 2 * kMiB), 0.5 * t.GBps(Collective::kAllReduce, 16, 1024 * kMiB));
  // Each transport by its own table (the SIMT collective has none).
  EXPECT_EQ(p.measured_table(CommAlgo::kNcclRing, kMiB), &*p.nccl_busbw);
  EXPECT_EQ(p.measured_table(CommAlgo::kTmaPush, kMiB), &*p.tma_push_busbw);
  EXPECT_EQ(p.measured_table(CommAlgo::kTmaPull, kMiB), &*p.tma_pull_busbw);
  EXPECT_EQ(p.measured_table(CommAlgo::kSimt, kMiB), nullptr);
  // NCCL's measured calls hold their steps: no latency on top; the TMA movers' streams keep theirs (each group
  // arrives a latency after it is sent).
  EXPECT_TRUE(p.latency_measured(CommAlgo::kNcclRing, kMiB));
  EXPECT_FALSE(p.latency_measured(CommAlgo::kTmaPush, kMiB));
  // A call no table holds (call_bytes 0: an ncclReduce / ncclBroadcast per owner): the per-CTA rule.
  EXPECT_EQ(p.measured_table(CommAlgo::kNcclRing, 0), nullptr);
  EXPECT_FALSE(p.latency_measured(CommAlgo::kNcclRing, 0));
  EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kNcclRing, 8, Collective::kReduceScatter, 0), p.nccl_per_cta_GBps);
  EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kTmaPush, 8, Collective::kAllReduce, 0), p.tma_push_per_cta_GBps);
  // The TMA movers by their own tables (coll/tma-push and coll/tma-pull of the same file): AllReduce of 1 GiB on 16
  // CTAs 273.4 GB/s (17.1 a CTA, where the per-CTA rule gave min(345.8 / 16, 23.0) = 21.6), ReduceScatter of 64 MiB
  // on 8 CTAs 92.7 by pull.
  EXPECT_NEAR(p.paced_cta_GBps(CommAlgo::kTmaPush, 16, Collective::kAllReduce, 1024 * kMiB), 273.4 / 16, 1e-9);
  EXPECT_NEAR(p.paced_cta_GBps(CommAlgo::kTmaPull, 8, Collective::kReduceScatter, 64 * kMiB), 92.7 / 8, 1e-9);
  // The model prices the stand-in's call so: an AllReduce of 64 MiB on 32 CTAs, its link bytes (the buffer, at W = 2)
  // at 286.9 GB/s after the kernel's launch, no step latency.
  const Hardware h200 = builtin_hardware("h200");
  const Hardware paced = loopback_hardware(h200, 2, LoopbackShare::kRank0, p);
  const double s = 64 * kMiB;
  EXPECT_NEAR(estimate_collective(Collective::kAllReduce, int64_t(s), 2, CommAlgo::kNcclRing, 32, paced).us,
              h200.fit.tma_launch_us + s / 286.9e3, 1e-6);
}

TEST(LinkProfile, BusbwTableErrorsNameTheField) {
  const nlohmann::json good = builtin_link_profile("h200x2");
  auto with = [&](const std::string& key, nlohmann::json v) {
    nlohmann::json j = good;
    j["nccl_busbw"][key] = std::move(v);
    return j;
  };
  test::expect_error_naming([&] { (void)with("sizes_MiB", {4, 1}).get<LinkProfile>(); }, "sizes_MiB");
  test::expect_error_naming([&] { (void)with("ctas", {1, 2.5}).get<LinkProfile>(); }, "ctas");
  test::expect_error_naming([&] { (void)with("allreduce", {{1.0}}).get<LinkProfile>(); }, "allreduce");
  nlohmann::json negative = good;
  negative["nccl_busbw"]["allgather"][1][2] = -3;
  test::expect_error_naming([&] { (void)negative.get<LinkProfile>(); }, "allgather");
  nlohmann::json short_row = good;
  short_row["nccl_busbw"]["reducescatter"][0].erase(0);
  test::expect_error_naming([&] { (void)short_row.get<LinkProfile>(); }, "reducescatter");
  nlohmann::json missing = good;
  missing["nccl_busbw"].erase("allgather");
  test::expect_error_naming([&] { (void)missing.get<LinkProfile>(); }, "allgather");
  test::expect_error_naming([&] { (void)with("broadcast", {{1.0}}).get<LinkProfile>(); }, "broadcast");
  // The TMA tables are checked alike, the error naming the table.
  nlohmann::json tma = good;
  tma["tma_pull_busbw"]["allreduce"][0][0] = 0;
  test::expect_error_naming([&] { (void)tma.get<LinkProfile>(); }, "tma_pull_busbw.allreduce");
  tma = good;
  tma["tma_push_busbw"] = 3;
  test::expect_error_naming([&] { (void)tma.get<LinkProfile>(); }, "tma_push_busbw");
  EXPECT_NO_THROW((void)with("_note", "a note").get<LinkProfile>());
  // Without the table, the parametric rule.
  nlohmann::json none = good;
  none.erase("nccl_busbw");
  none.erase("tma_push_busbw");
  const LinkProfile p = none.get<LinkProfile>();
  EXPECT_FALSE(p.nccl_busbw.has_value());
  EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kNcclRing, 8, Collective::kAllReduce, kMiB), p.nccl_per_cta_GBps);
  EXPECT_DOUBLE_EQ(p.paced_cta_GBps(CommAlgo::kTmaPush, 8, Collective::kAllReduce, kMiB), p.tma_push_per_cta_GBps);
  EXPECT_NE(p.measured_table(CommAlgo::kTmaPull, kMiB), nullptr);
  // A round trip keeps every table.
  const LinkProfile back = nlohmann::json(builtin_link_profile("h200x2")).get<LinkProfile>();
  ASSERT_TRUE(back.tma_push_busbw && back.tma_pull_busbw);
  EXPECT_EQ(back.tma_pull_busbw->reducescatter, builtin_link_profile("h200x2").tma_pull_busbw->reducescatter);
}

TEST(PacedLoopback, HardwareTakesTheLinkAndNcclsCtaCount) {
  const Hardware h200 = builtin_hardware("h200");
  const LinkProfile link = builtin_link_profile("nvlink4-node8");
  const Hardware paced = loopback_hardware(h200, 8, LoopbackShare::kRank0, link);
  ASSERT_TRUE(paced.link.has_value() && paced.emulation.paced);
  EXPECT_DOUBLE_EQ(paced.spec.link_GBps, 450);
  EXPECT_DOUBLE_EQ(paced.fit.link_latency_us, 0.7);
  EXPECT_TRUE(paced.emulation.loopback_rank0);
  EXPECT_EQ(nccl_default_ctas(paced), 24);
  EXPECT_EQ(nccl_default_ctas(h200), kDefaultNcclCtas);
  EXPECT_FALSE(loopback_hardware(h200, 8, LoopbackShare::kRank0).emulation.paced);
  test::expect_error_naming([&] { loopback_hardware(h200, 8, LoopbackShare::kWholeWorld, link); }, "whole-world");
  // JSON never carries it (a measurement's context does).
  EXPECT_FALSE(nlohmann::json(paced).contains("link_profile"));
}

TEST(PacedLoopback, CollectiveIsPricedOnTheLink) {
  const Hardware h200 = builtin_hardware("h200");
  const LinkProfile link = builtin_link_profile("nvlink4-node8");
  const Hardware paced = loopback_hardware(h200, 8, LoopbackShare::kRank0, link);
  const double s = 64 * kMiB;
  // An NCCL-algorithm RS on NCCL's 24 CTAs (the SIMT kernel): 7/8 of the buffer crosses the link at min(450,
  // 24 x 370/24) = 370 GB/s; its HBM work (1.125 S at 24 x 32 = 768 GB/s) is faster; 7 ring steps of 0.7 us after a
  // plain kernel launch.
  const CommEstimate rs =
      estimate_collective(Collective::kReduceScatter, int64_t(s), 8, CommAlgo::kNcclRing, 24, paced);
  EXPECT_NEAR(rs.us, h200.fit.tma_launch_us + 7 * 0.7 + 0.875 * s / 370e3, 1e-6);
  // AllReduce: 2 x 7/8 of the buffer, 14 steps.
  const CommEstimate ar = estimate_collective(Collective::kAllReduce, int64_t(s), 8, CommAlgo::kNcclRing, 24, paced);
  EXPECT_NEAR(ar.us, h200.fit.tma_launch_us + 14 * 0.7 + 1.75 * s / 370e3, 1e-6);
  // tma-push RS on 8 CTAs: 7/8 S on the link at 8 x 23 = 184 GB/s binds (the mover's 3.125 S at 8 x 95 = 760 is
  // faster); one step.
  const CommEstimate push =
      estimate_collective(Collective::kReduceScatter, int64_t(s), 8, CommAlgo::kTmaPush, 8, paced);
  EXPECT_NEAR(push.us, h200.fit.tma_launch_us + 0.7 + 0.875 * s / 184e3, 1e-6);
  // On 132 CTAs the link's 450 GB/s binds, not 132 x 23.
  const CommEstimate wide =
      estimate_collective(Collective::kReduceScatter, int64_t(s), 8, CommAlgo::kTmaPush, 132, paced);
  EXPECT_NEAR(wide.us, h200.fit.tma_launch_us + 0.7 + 0.875 * s / 450e3, 1e-6);
  // The unpaced loopback runs at HBM speed: several times faster.
  const Hardware free = loopback_hardware(h200, 8, LoopbackShare::kRank0);
  EXPECT_GT(rs.us,
            3 * estimate_collective(Collective::kReduceScatter, int64_t(s), 8, CommAlgo::kNcclRing, 132, free).us);
}

TEST(PacedLoopback, SequentialBaselineRunsOnNcclsCtaCount) {
  const Hardware paced =
      loopback_hardware(builtin_hardware("h200"), 8, LoopbackShare::kRank0, builtin_link_profile("nvlink4-node8"));
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 4096, 8);
  // Whatever comm_sms the bench's name carries (the device's SM count), the collective runs on NCCL's 24 CTAs.
  for (int c : {0, 8, 132}) {
    const Plan seq = default_plan(Mode::kSequential, p, paced, c);
    EXPECT_EQ(seq.comm_ctas, 24) << c;
    // The model: cuBLAS on every SM, then the collective alone on those CTAs.
    const ModeEstimate e = estimate(p, seq, paced);
    EXPECT_NEAR(e.total_us, e.gemm_alone_us + e.comm_alone_us, 1e-6);
    EXPECT_NEAR(e.comm_alone_us,
                estimate_collective(Collective::kAllReduce, p.comm_bytes(), 8, CommAlgo::kNcclRing, 24, paced).us,
                1e-6);
  }
  // Other modes keep the plan's comm_sms.
  EXPECT_EQ(default_plan(Mode::kDecomposed, p, paced, 16).comm_ctas, 16);
}

TEST(PacedLoopback, CalibrationReadsTheLinkFromTheContext) {
  const LinkProfile link = builtin_link_profile("h200x2");
  nlohmann::json doc = {
      {"context",
       {{"world_backend", "loopback"}, {"loopback_share", "rank0"}, {"link_profile", nlohmann::json(link).dump()}}},
      {"benchmarks",
       {{{"name", "overlap/sequential/gemm-allreduce/8192x8192x1024/world:2/comm_sms:132/iterations:5/manual_time"},
         {"real_time", 900.0},
         {"time_unit", "us"}}}}};
  const std::vector<Measurement> ms = read_measurements({doc});
  ASSERT_EQ(ms.size(), 1u);
  ASSERT_TRUE(ms[0].link.has_value());
  EXPECT_EQ(ms[0].link->name, "h200x2");
  const Hardware h = measurement_hardware(ms[0], builtin_hardware("h200"));
  ASSERT_TRUE(h.link.has_value());
  EXPECT_DOUBLE_EQ(h.spec.link_GBps, link.link_GBps);
  // The baseline is predicted with its collective on NCCL's CTA count.
  const auto predicted = predict_us(ms[0].bench, h);
  ASSERT_TRUE(predicted.has_value());
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 2);
  EXPECT_NEAR(*predicted, estimate(p, default_plan(Mode::kSequential, p, h, 24), h).total_us, 1e-6);
  // A bad profile in the context is an error naming the field.
  doc["context"]["link_profile"] = R"({"name": "x"})";
  test::expect_error_naming([&] { read_measurements({doc}); }, "link_profile");
  // So is one nested past the loaders' depth limit (it overflowed the parser's stack before).
  doc["context"]["link_profile"] = std::string(100000, '[') + std::string(100000, ']');
  test::expect_error_naming_all([&] { read_measurements({doc}); }, {"link_profile", "100000 levels deep"});
}

// A real world over a measured link (with_link): the calls its tables hold take the table's time, no launch or step
// latency on top (the measured time holds them); an overlapped mode's rate factors scale the tables; every call
// the tables do not hold keeps the profile's rules.
TEST(MeasuredLink, RealWorldCallsTakeTheTablesTime) {
  const Hardware h200 = builtin_hardware("h200");
  const LinkProfile link = builtin_link_profile("h200x2");
  const Hardware linked = with_link(h200, link);
  EXPECT_EQ(linked.name, "H200 SXM over h200x2");
  EXPECT_FALSE(linked.emulation.loopback || linked.emulation.paced);
  test::expect_error_naming([&] { (void)with_link(loopback_hardware(h200, 2), link); }, "loopback");
  // NCCL's AllReduce of 64 MiB on 16 CTAs at world 2 (link bytes = the buffer): 240.6 GB/s measured.
  const double s = 64 * kMiB;
  EXPECT_NEAR(estimate_collective(Collective::kAllReduce, int64_t(s), 2, CommAlgo::kNcclRing, 16, linked).us,
              s / 240.6e3, 1e-6);
  EXPECT_GT(std::abs(estimate_collective(Collective::kAllReduce, int64_t(s), 2, CommAlgo::kNcclRing, 16, h200).us -
                     s / 240.6e3),
            1.0);
  // TMA push's AllReduce of 1 GiB on 16 CTAs: 273.4 GB/s.
  EXPECT_NEAR(estimate_collective(Collective::kAllReduce, int64_t(1024 * kMiB), 2, CommAlgo::kTmaPush, 16, linked).us,
              1024 * kMiB / 273.4e3, 1e-6);
  // No table for the SIMT collective or NCCL's symmetric kernels: the profile's rules, as without the link.
  for (CommAlgo a : {CommAlgo::kSimt, CommAlgo::kNcclSymmetric})
    EXPECT_DOUBLE_EQ(estimate_collective(Collective::kAllReduce, int64_t(s), 2, a, 16, linked).us,
                     estimate_collective(Collective::kAllReduce, int64_t(s), 2, a, 16, h200).us);
  // The overlapped modes' factors scale a real world's tables (not a paced loopback's, whose tables are its pace).
  Hardware slow = linked;
  slow.fit.overlap_nccl_rate_factor = 0.8;
  slow.fit.beside_gemm_rate_factor = 0.5;
  const Hardware beside = comm_hardware(slow, Mode::kTileSignal, true);
  EXPECT_NEAR(beside.link->nccl_busbw->GBps(Collective::kAllReduce, 16, s), 240.6 * 0.8 * 0.5, 1e-9);
  EXPECT_NEAR(beside.link->tma_push_busbw->GBps(Collective::kAllReduce, 16, 1024 * kMiB), 273.4 * 0.5, 1e-9);
  Hardware paced = loopback_hardware(h200, 2, LoopbackShare::kRank0, link);
  paced.fit.beside_gemm_rate_factor = 0.5;
  EXPECT_NEAR(comm_hardware(paced, Mode::kTileSignal, true).link->nccl_busbw->GBps(Collective::kAllReduce, 16, s),
              240.6, 1e-9);
}

// The simulator prices the sequential plan's call as the model does: the table's time after the GEMM.
TEST(MeasuredLink, SimulatorAndModelAgreeOnTheSequentialCall) {
  const Hardware linked = with_link(builtin_hardware("h200"), builtin_link_profile("h200x2"));
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 4096, 2);
  const Plan plan = default_plan(Mode::kSequential, p, linked, 0);
  const double model = estimate(p, plan, linked).total_us;
  const double sim = sim::simulate(p, plan, linked).total_us;
  EXPECT_NEAR(sim, model, 0.01 * model);
  const Hardware plain = builtin_hardware("h200");
  EXPECT_GT(std::abs(sim - sim::simulate(p, default_plan(Mode::kSequential, p, plain, 0), plain).total_us), 1.0);
}

}  // namespace
}  // namespace ovl
