// CUDA Graph capture of every mode: after one eager call of a (problem, plan), the same call captured into a graph
// replays correctly, several times; a call that would allocate or plan during capture throws ovl::Error saying to
// warm up first (core/src/capture.cpp). Loopback world of 8 on one GPU, rank 0's share (the default).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu_test.hpp"
#include "ovl/core/context.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

using test::DeviceMatrix;
using test::rel_error;
using test::run_op;

// A replay computes what the eager call computed, from the same inputs; only the summation order of the
// reductions may differ (tma-push's bulk reduce, the SIMT mover), so bf16 results agree to well within one bf16
// ulp of the values' norm (2^-8 = 0.4%); 1e-2 as in test_overlap.cu.
constexpr double kTolerance = 1e-2;
constexpr int kReplays = 3;

// Every mode with its defaults on 16 communication SMs, plus tma-pull on shared SMs.
std::vector<Plan> plans_for(const Context& ctx, const Problem& p) {
  const Hardware& hw = ctx.hardware();
  std::vector<Plan> v;
  for (Mode mode : {Mode::kSequential, Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    Plan plan = default_plan(mode, p, hw, 16);
    if (mode == Mode::kTileSignal) plan.gemm_sms = hw.spec.sm_count - 16;
    v.push_back(plan);
  }
  Plan shared = default_plan(Mode::kTma, p, hw, 16);
  shared.partitioned = false;
  shared.gemm_sms = hw.spec.sm_count - 16;
  shared.comm_algo = CommAlgo::kTmaPull;
  v.push_back(shared);
  return v;
}

// Owns a captured graph and its executable.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
  }
};

class GraphCaptureTest : public test::HopperTest {
 protected:
  void check_every_mode(Op op) {
    ContextOptions options;
    options.world = World::loopback(8);
    Context ctx(options);
    const int w = ctx.world_size();
    const int64_t m = 1024, n = 768, k = 256;
    const bool ag = op == Op::kAllGatherGemm;
    DeviceMatrix a(ag ? m / w : m, k, 31), b(n, k, 32);
    DeviceMatrix eager(op == Op::kGemmReduceScatter ? m / w : m, n, 0), replayed(eager.rows, n, 0);
    const Problem p = ctx.problem_for(op, a.ref(), b.ref(), eager.ref());
    test::Stream stream;
    for (const Plan& plan : plans_for(ctx, p)) {
      SCOPED_TRACE(p.name() + " plan: " + plan.summary());
      eager.poison(stream);
      run_op(ctx, op, a.ref(), b.ref(), eager.ref(), plan, stream);  // the warm-up, and the expected result
      ctx.synchronize(stream);
      const auto expected = eager.read();

      Graph g;
      ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
      try {
        run_op(ctx, op, a.ref(), b.ref(), replayed.ref(), plan, stream);
      } catch (const Error& e) {
        (void)cudaStreamEndCapture(stream, &g.graph);
        FAIL() << "capture: " << e.what();
      }
      ASSERT_EQ(cudaStreamEndCapture(stream, &g.graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&g.exec, g.graph, 0), cudaSuccess);
      for (int i = 0; i < kReplays; ++i) {
        replayed.poison(stream);  // a replay that skipped a store would show NaN
        ASSERT_EQ(cudaGraphLaunch(g.exec, stream), cudaSuccess);
        ctx.synchronize(stream);
        EXPECT_LT(rel_error(replayed.read(), expected), kTolerance) << "replay " << i;
      }
    }
  }
};

TEST_F(GraphCaptureTest, EveryModeGemmReduceScatterLoopback8) { check_every_mode(Op::kGemmReduceScatter); }
TEST_F(GraphCaptureTest, EveryModeGemmAllReduceLoopback8) { check_every_mode(Op::kGemmAllReduce); }
TEST_F(GraphCaptureTest, EveryModeAllGatherGemmLoopback8) { check_every_mode(Op::kAllGatherGemm); }

// A cold call (no eager call of the shape, or of that plan, yet) during capture throws, naming the remedy; the
// stream's capture is then ended by the caller and the context stays usable.
TEST_F(GraphCaptureTest, ColdCallThrowsWarmUpError) {
  ContextOptions options;
  options.world = World::loopback(8);
  Context ctx(options);
  DeviceMatrix a(1024, 256, 41), b(768, 256, 42), c(128, 768, 0);
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  test::Stream stream;
  const Plan decomposed = default_plan(Mode::kDecomposed, p, ctx.hardware(), 16);
  for (const std::optional<Plan>& plan : {std::optional<Plan>{}, std::optional<Plan>{decomposed}}) {
    SCOPED_TRACE(plan ? plan->summary() : std::string("auto plan"));
    const std::string message =
        test::error_while_capturing(stream, [&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), plan, stream); });
    EXPECT_NE(message.find("CUDA Graph capture"), std::string::npos) << message;
    EXPECT_NE(message.find("run the same call once before capturing"), std::string::npos) << message;
  }
  // Warm: the same call now captures.
  ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), decomposed, stream);
  ctx.synchronize(stream);
  Graph g;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_NO_THROW(ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), decomposed, stream));
  EXPECT_EQ(cudaStreamEndCapture(stream, &g.graph), cudaSuccess);
}

// comm_algo ce is refused during capture (a replay would reuse the call's epoch, which its flags already hold), after
// a correct eager call, with a message naming it; the capture is ended by the caller and the context stays usable.
TEST_F(GraphCaptureTest, CopyEngineIsRefusedDuringCapture) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context ctx(options);
  DeviceMatrix a(1024, 256, 51), b(768, 256, 52), c(512, 768, 0);
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  Plan ce = default_plan(Mode::kTileSignal, p, ctx.hardware(), 16);
  ce.comm_algo = CommAlgo::kCopyEngine;
  test::Stream stream;
  ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), ce, stream);
  ctx.synchronize(stream);
  const std::string message =
      test::error_while_capturing(stream, [&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), ce, stream); });
  EXPECT_NE(message.find("comm_algo ce cannot be captured"), std::string::npos) << message;
  EXPECT_NO_THROW(ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), ce, stream));
  EXPECT_NO_THROW(ctx.synchronize(stream));
}

}  // namespace
}  // namespace ovl
