// Problem: what one overlapped operator computes, independent of how it is run.
#pragma once

#include "ovl/types.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace ovl {

enum class Op {
  kGemmAllReduce,      // row-parallel linear: every rank holds a K-slice, C = sum over ranks of A_r B_r, everywhere
  kGemmReduceScatter,  // same partial products; rank r keeps rows [r M/W, (r+1) M/W) of the sum
  kAllGatherGemm,      // column-parallel linear: rank r holds M/W rows of A; gather A, then C = A B_r (N is local)
};
inline constexpr Named<Op> kOpNames[] = {{Op::kGemmAllReduce, "gemm-allreduce"},
                                         {Op::kGemmReduceScatter, "gemm-reducescatter"},
                                         {Op::kAllGatherGemm, "allgather-gemm"}};
// The GEMM's input type (Problem::dtype, A's). kE4M3, kE5M2: FP8 inputs A and B (1 byte an element; our kernel takes A
// e4m3 and B e4m3 or e5m2, with per-tensor scales), whose GEMM writes its output C in bf16 or fp16
// (Problem::out_dtype): an AllGather before the GEMM moves FP8 A (half bf16's bytes), a ReduceScatter / AllReduce
// after it the output's partial sums (Problem::comm_dtype).
// DType, to_string(DType), dtype_bytes, is_fp8: ovl/types.hpp.
// BLayout: ovl/types.hpp.

std::string_view to_string(Op op);
std::string_view to_string(BLayout layout);
// Parse the names above ("gemm-allreduce", "gemm-reducescatter", "allgather-gemm"; "bf16", "fp16", "fp32", "e4m3",
// "e5m2"; "nn", "nt"); throw ovl::Error naming the bad text.
Op parse_op(std::string_view text);
DType parse_dtype(std::string_view text);
BLayout parse_b_layout(std::string_view text);

// M, N, K are the sizes of the GEMM one rank runs:
//   GemmAllReduce / GemmReduceScatter: A is M x K (the rank's K-slice), the partial product M x N.
//   AllGatherGemm: M is the gathered row count (the rank holds M / world rows of A before the gather).
inline constexpr int kMaxWorld = 1 << 16;  // Problem::validate's bound on world
// Problem::validate's bound on m, n and k (exclusive): each size fits the kernels' 32-bit indices.
inline constexpr int64_t kMaxProblemDim = int64_t{1} << 31;

struct Problem {
  Op op = Op::kGemmAllReduce;
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;      // the GEMM's inputs (A's type; FP8: B is e4m3 or e5m2 alike for the model)
  DType out_dtype = DType::kBF16;  // FP8 inputs only: C's type, kBF16 or kFP16 (otherwise C is `dtype`)
  BLayout b_layout = BLayout::kNxK;
  int world = 1;           // ranks taking part (GPUs)
  int gpus_per_node = 8;   // ranks per node; world > gpus_per_node means several nodes

  // Every field that means something: out_dtype only as C's type (output_dtype()), as the JSON holds it.
  bool operator==(const Problem& o) const {
    return op == o.op && m == o.m && n == o.n && k == o.k && dtype == o.dtype && output_dtype() == o.output_dtype() &&
           b_layout == o.b_layout && world == o.world && gpus_per_node == o.gpus_per_node;
  }

  // Throws ovl::Error naming the bad field and value: sizes <= 0, K or N not a multiple of 8 (16-byte rows; FP8: K
  // a multiple of 16), FP8 with out_dtype not bf16 or fp16,
  // world < 1, M not divisible by world for ReduceScatter / AllGather, world not a multiple of gpus_per_node
  // when it spans nodes.
  void validate() const;

  // C's type: out_dtype for FP8 inputs, else dtype.
  DType output_dtype() const { return is_fp8(dtype) ? out_dtype : dtype; }
  // What the collective moves: A (dtype) for AllGather, the output's partial sums (output_dtype()) for AllReduce and
  // ReduceScatter. FP8 is only ever moved, never summed.
  DType comm_dtype() const { return op == Op::kAllGatherGemm ? dtype : output_dtype(); }

  int nodes() const { return world <= gpus_per_node ? 1 : world / gpus_per_node; }
  double gemm_flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Bytes of the collective's full buffer (the nccl-tests "size"): M x N output for AR/RS, M x K for AG, in
  // comm_dtype() (FP8 A is gathered as FP8).
  int64_t comm_bytes() const;
  // e.g. "gemm-allreduce/8192x8192x8192/bf16/nt/world:8"; FP8 names the output too: ".../e4m3-bf16/nt/...".
  std::string name() const;
};

// The common case spelled out: bf16, B as N x K, 8 GPUs per node. Not validated (call validate()).
Problem make_problem(Op op, int64_t m, int64_t n, int64_t k, int world);

void to_json(nlohmann::json& j, const Problem& p);
void from_json(const nlohmann::json& j, Problem& p);  // validates

}  // namespace ovl

template <>
struct fmt::formatter<ovl::Problem> : fmt::formatter<std::string_view> {
  auto format(const ovl::Problem& p, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(p.name(), ctx);
  }
};
