// Problem: names, validation (each bad field named), sizes, JSON round trip.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/problem.hpp"

namespace ovl {
namespace {

Problem ar8192() {
  Problem p;
  p.op = Op::kGemmAllReduce;
  p.m = p.n = p.k = 8192;
  p.world = 8;
  return p;
}

using test::expect_error_naming;

TEST(Problem, NamesRoundTrip) {
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) EXPECT_EQ(parse_op(to_string(op)), op);
  for (DType d : {DType::kBF16, DType::kFP16, DType::kFP32, DType::kE4M3, DType::kE5M2}) {
    EXPECT_EQ(parse_dtype(to_string(d)), d);
  }
  EXPECT_EQ(parse_dtype("e4m3"), DType::kE4M3);
  for (BLayout l : {BLayout::kKxN, BLayout::kNxK}) EXPECT_EQ(parse_b_layout(to_string(l)), l);
  expect_error_naming([] { parse_op("gemm-allgather"); }, "gemm-allgather");
  expect_error_naming([] { parse_dtype("int8"); }, "int8");
  expect_error_naming([] { parse_b_layout("tn"); }, "tn");
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kFP32), 4);
  EXPECT_EQ(dtype_bytes(DType::kE4M3), 1);
  EXPECT_EQ(dtype_bytes(DType::kE5M2), 1);
}

// FP8 inputs, bf16 or fp16 output: the AllGather moves FP8 A (half bf16's bytes), the AllReduce / ReduceScatter the
// output's sums; the name and the JSON carry the output type.
TEST(Problem, Fp8TrafficAndValidation) {
  Problem ar = ar8192();
  const int64_t bf16_ar = ar.comm_bytes();
  ar.dtype = DType::kE4M3;
  EXPECT_NO_THROW(ar.validate());
  EXPECT_EQ(ar.output_dtype(), DType::kBF16);
  EXPECT_EQ(ar.comm_dtype(), DType::kBF16);
  EXPECT_EQ(ar.comm_bytes(), bf16_ar);
  ar.out_dtype = DType::kFP16;
  EXPECT_EQ(ar.comm_dtype(), DType::kFP16);
  EXPECT_EQ(ar.comm_bytes(), bf16_ar);
  EXPECT_EQ(ar.name(), "gemm-allreduce/8192x8192x8192/e4m3-fp16/nt/world:8");
  Problem ag = ar8192();
  ag.op = Op::kAllGatherGemm;
  const int64_t bf16_ag = ag.comm_bytes();
  ag.dtype = DType::kE5M2;
  EXPECT_EQ(ag.comm_dtype(), DType::kE5M2);
  EXPECT_EQ(ag.comm_bytes() * 2, bf16_ag);
  EXPECT_EQ(ag.name(), "allgather-gemm/8192x8192x8192/e5m2-bf16/nt/world:8");
  ag.k = 8200;  // a multiple of 8, not of 16: FP8 rows of 8200 bytes are not 16-byte multiples
  expect_error_naming([&] { ag.validate(); }, "\"k\" = 8200 must be a multiple of 16 for dtype e5m2");
  ag.k = 8192;
  // The GEMM runs e4m3 A only, and FP8 B as N x K only.
  expect_error_naming([&] { ag.validate(); }, "\"dtype\" = e5m2: FP8 A must be e4m3");
  ag.dtype = DType::kE4M3;
  ag.b_layout = BLayout::kKxN;
  expect_error_naming([&] { ag.validate(); }, "\"b_layout\" = nn with dtype e4m3: FP8 wgmma reads B K-major only");
  ag.b_layout = BLayout::kNxK;
  EXPECT_NO_THROW(ag.validate());
  ag.out_dtype = DType::kE4M3;
  expect_error_naming([&] { ag.validate(); }, "\"out_dtype\" = e4m3 is not bf16 or fp16");
  // bf16 / fp16 inputs: C is the inputs' type, whatever out_dtype says (it is not in the name or the JSON).
  Problem fp16 = ar8192();
  fp16.dtype = DType::kFP16;
  fp16.out_dtype = DType::kE4M3;
  EXPECT_NO_THROW(fp16.validate());
  EXPECT_EQ(fp16.output_dtype(), DType::kFP16);
  EXPECT_EQ(fp16.name(), "gemm-allreduce/8192x8192x8192/fp16/nt/world:8");
  nlohmann::json j;
  to_json(j, fp16);
  EXPECT_FALSE(j.contains("out_dtype"));
  ar.dtype = DType::kE4M3;
  to_json(j, ar);
  Problem back;
  from_json(j, back);
  EXPECT_EQ(back.dtype, DType::kE4M3);
  EXPECT_EQ(back.out_dtype, DType::kFP16);
  EXPECT_EQ(back.name(), ar.name());
  // fp32 is a collective's type, not a GEMM input: refused by name (the GEMM and the Context refuse it too).
  Problem fp32 = ar8192();
  fp32.dtype = DType::kFP32;
  expect_error_naming([&] { fp32.validate(); }, "\"dtype\" = fp32");
}

TEST(Problem, SizesAndName) {
  const Problem p = ar8192();
  EXPECT_NO_THROW(p.validate());
  // AllReduce buffer: the M x N partial product, 8192 x 8192 x 2 bytes = 128 MiB.
  EXPECT_EQ(p.comm_bytes(), int64_t(128) << 20);
  EXPECT_DOUBLE_EQ(p.gemm_flops(), 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_EQ(p.nodes(), 1);
  EXPECT_EQ(p.name(), "gemm-allreduce/8192x8192x8192/bf16/nt/world:8");
  EXPECT_EQ(fmt::format("{}", p), p.name());
  Problem ag = p;
  ag.op = Op::kAllGatherGemm;
  ag.k = 4096;
  EXPECT_EQ(ag.comm_bytes(), int64_t(8192) * 4096 * 2);  // AllGather buffer: M x K
  Problem two_nodes = p;
  two_nodes.world = 16;
  EXPECT_EQ(two_nodes.nodes(), 2);
}

TEST(Problem, EachBadFieldIsNamed) {
  struct Case {
    const char* field;
    void (*mutate)(Problem&);
  };
  const Case cases[] = {
      {"\"m\"", [](Problem& p) { p.m = 0; }},
      {"\"n\"", [](Problem& p) { p.n = -8; }},
      {"\"n\"", [](Problem& p) { p.n = 8190; }},  // not a multiple of 8
      {"\"k\"", [](Problem& p) { p.k = 0; }},
      {"\"k\"", [](Problem& p) { p.k = 100; }},
      {"\"world\"", [](Problem& p) { p.world = 0; }},
      {"\"gpus_per_node\"", [](Problem& p) { p.gpus_per_node = 0; }},
      {"\"m\"",
       [](Problem& p) {
         p.op = Op::kGemmReduceScatter;
         p.m = 8190;
       }},                                              // M not divisible by world
      {"\"world\"", [](Problem& p) { p.world = 12; }},  // spans nodes but not a multiple of 8
  };
  for (const auto& c : cases) {
    Problem p = ar8192();
    c.mutate(p);
    expect_error_naming([&] { p.validate(); }, c.field);
  }
}

TEST(Problem, JsonRoundTripAndErrors) {
  Problem p = ar8192();
  p.op = Op::kGemmReduceScatter;
  p.dtype = DType::kFP16;
  p.b_layout = BLayout::kKxN;
  const nlohmann::json j = p;
  const Problem q = j.get<Problem>();
  EXPECT_EQ(q.name(), p.name());
  EXPECT_EQ(q.gpus_per_node, p.gpus_per_node);
  for (const char* field : {"op", "m", "n", "k", "world"}) {
    nlohmann::json missing = j;
    missing.erase(field);
    expect_error_naming([&] { (void)missing.get<Problem>(); }, field);
    nlohmann::json bad = j;
    bad[field] = field == std::string("op") ? nlohmann::json(7) : nlohmann::json("abc");
    expect_error_naming([&] { (void)bad.get<Problem>(); }, field);
  }
  nlohmann::json neg = j;
  neg["m"] = -1;
  expect_error_naming([&] { (void)neg.get<Problem>(); }, "\"m\" = -1");
  nlohmann::json wraps = j;  // above INT64_MAX: reported as itself, not as the negative value it would wrap to
  wraps["m"] = uint64_t(1) << 63;
  expect_error_naming([&] { (void)wraps.get<Problem>(); }, "\"m\" = 9223372036854775808 is out of range");
  nlohmann::json huge = j;
  huge["world"] = kMaxWorld * 2;
  huge["m"] = 8192 * 16;
  expect_error_naming([&] { (void)huge.get<Problem>(); }, "largest supported world");
}

}  // namespace
}  // namespace ovl
