// Problem: names, validation and JSON.
#include "ovl/model/problem.hpp"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "json_fields.hpp"
#include "ovl/error.hpp"

namespace ovl {

std::string_view to_string(Op op) { return name_in(kOpNames, op); }
std::string_view to_string(BLayout layout) { return name_in(kBLayoutNames, layout); }

Op parse_op(std::string_view text) { return parse_name(kOpNames, text, "op"); }
DType parse_dtype(std::string_view text) { return parse_name(kDTypeNames, text, "dtype"); }
BLayout parse_b_layout(std::string_view text) { return parse_name(kBLayoutNames, text, "B layout"); }

void Problem::validate() const {
  OVL_CHECK(m > 0, "problem field \"m\" = {} must be positive", m);
  OVL_CHECK(n > 0, "problem field \"n\" = {} must be positive", n);
  OVL_CHECK(k > 0, "problem field \"k\" = {} must be positive", k);
  // Each size fits the kernels' 32-bit indices, and every matrix's bytes fit in 64 bits (no overflow downstream).
  for (const auto& [name, v] : {std::pair{"m", m}, std::pair{"n", n}, std::pair{"k", k}}) {
    OVL_CHECK(v < kMaxProblemDim, "problem field \"{}\" = {} exceeds the largest supported size {}", name, v,
              kMaxProblemDim - 1);
  }
  constexpr int64_t kMaxElements = int64_t{1} << 40;  // 2 TB of bf16: larger than any GPU's memory
  OVL_CHECK(m * n <= kMaxElements && m * k <= kMaxElements && n * k <= kMaxElements,
            "problem {}x{}x{}: a matrix has more than 2^40 elements", m, n, k);
  // 16-byte rows for TMA and vectorized loads: K (A's row) and N (C's row) in multiples of 8 elements.
  OVL_CHECK(k % 8 == 0, "problem field \"k\" = {} must be a multiple of 8 (16-byte rows)", k);
  OVL_CHECK(n % 8 == 0, "problem field \"n\" = {} must be a multiple of 8 (16-byte rows)", n);
  OVL_CHECK(dtype != DType::kFP32,
            "problem field \"dtype\" = fp32: the GEMM takes bf16, fp16 or e4m3 inputs (dtype fp32 is for collectives)");
  OVL_CHECK(!is_fp8(dtype) || k % 16 == 0, "problem field \"k\" = {} must be a multiple of 16 for dtype {} (16-byte rows)",
            k, to_string(dtype));
  // FP8: the GEMM runs e4m3 A (x e4m3 or e5m2 B) and reads B K-major only (wgmma), so B is N x K.
  OVL_CHECK(!is_fp8(dtype) || dtype == DType::kE4M3,
            "problem field \"dtype\" = {}: FP8 A must be e4m3 (the GEMM runs e4m3 x e4m3 and e4m3 x e5m2)",
            to_string(dtype));
  OVL_CHECK(!is_fp8(dtype) || b_layout == BLayout::kNxK,
            "problem field \"b_layout\" = {} with dtype {}: FP8 wgmma reads B K-major only (B as N x K, nt)",
            to_string(b_layout), to_string(dtype));
  OVL_CHECK(!is_fp8(dtype) || out_dtype == DType::kBF16 || out_dtype == DType::kFP16,
            "problem field \"out_dtype\" = {} is not bf16 or fp16 (the output of FP8 inputs)", to_string(out_dtype));
  OVL_CHECK(world >= 1, "problem field \"world\" = {} must be at least 1", world);
  // Far above any tensor-parallel group; the model's loopback pricing grows with the world.
  OVL_CHECK(world <= kMaxWorld, "problem field \"world\" = {} exceeds the largest supported world {}", world,
            kMaxWorld);
  OVL_CHECK(gpus_per_node >= 1, "problem field \"gpus_per_node\" = {} must be at least 1", gpus_per_node);
  if (op != Op::kGemmAllReduce) {
    OVL_CHECK(m % world == 0, "problem field \"m\" = {} must be divisible by world = {} for {}", m, world,
              to_string(op));
  }
  if (world > gpus_per_node) {
    OVL_CHECK(world % gpus_per_node == 0,
              "problem field \"world\" = {} spans nodes and must be a multiple of gpus_per_node = {}", world,
              gpus_per_node);
  }
}

Problem make_problem(Op op, int64_t m, int64_t n, int64_t k, int world) {
  Problem p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.world = world;
  return p;
}

int64_t Problem::comm_bytes() const { return (op == Op::kAllGatherGemm ? m * k : m * n) * dtype_bytes(comm_dtype()); }

std::string Problem::name() const {
  const std::string types =
      is_fp8(dtype) ? fmt::format("{}-{}", to_string(dtype), to_string(out_dtype)) : std::string(to_string(dtype));
  return fmt::format("{}/{}x{}x{}/{}/{}/world:{}", to_string(op), m, n, k, types, to_string(b_layout), world);
}

void to_json(nlohmann::json& j, const Problem& p) {
  j = nlohmann::json{{"op", to_string(p.op)},
                     {"m", p.m},
                     {"n", p.n},
                     {"k", p.k},
                     {"dtype", to_string(p.dtype)},
                     {"b_layout", to_string(p.b_layout)},
                     {"world", p.world},
                     {"gpus_per_node", p.gpus_per_node}};
  if (is_fp8(p.dtype)) j["out_dtype"] = to_string(p.out_dtype);
}

void from_json(const nlohmann::json& j, Problem& p) {
  using detail::read_int;
  using detail::read_string;
  OVL_CHECK(j.is_object(), "problem JSON must be an object, got {}", json_excerpt(j));
  Problem q;
  q.op = parse_op(read_string(j, "op", "problem"));
  q.m = read_int(j, "m", "problem");
  q.n = read_int(j, "n", "problem");
  q.k = read_int(j, "k", "problem");
  if (j.contains("dtype")) q.dtype = parse_dtype(read_string(j, "dtype", "problem"));
  if (j.contains("out_dtype")) q.out_dtype = parse_dtype(read_string(j, "out_dtype", "problem"));
  if (j.contains("b_layout")) q.b_layout = parse_b_layout(read_string(j, "b_layout", "problem"));
  q.world = detail::read_int32(j, "world", "problem");
  if (j.contains("gpus_per_node")) q.gpus_per_node = detail::read_int32(j, "gpus_per_node", "problem");
  for (const auto& [key, value] : j.items()) {
    static constexpr std::string_view kFields[] = {
        "op", "m", "n", "k", "dtype", "out_dtype", "b_layout", "world", "gpus_per_node"};
    OVL_CHECK(std::find(std::begin(kFields), std::end(kFields), key) != std::end(kFields),
              "problem field \"{}\" = {} is not a Problem field", key, json_excerpt(value));
  }
  q.validate();
  p = q;
}

}  // namespace ovl
