// The numeric fields of a Hardware profile's two parts as tables (JSON name, member, what validate() requires).
#pragma once

#include "ovl/model/hardware.hpp"

namespace ovl::hardware_fields {

// What validate() requires of a numeric field.
enum class Rule {
  kPositive,     // > 0
  kNonNegative,  // >= 0
  kFraction,     // (0, 1]
  kUnit,         // [0, 1]
};

template <typename Part>
struct DoubleField {
  const char* name;
  double Part::*member;
  Rule rule;
};
struct IntField {
  const char* name;
  int DeviceSpec::*member;
};

// Every numeric field of the two parts JSON carries, in declaration order: JSON I/O, validation,
// hardware_field_names(), the field-by-field tests and the Python binding all walk these tables, so a new field cannot
// be forgotten by one of them.
inline constexpr IntField kSpecIntFields[] = {
    {"sm_count", &DeviceSpec::sm_count},
    {"sm_granularity", &DeviceSpec::sm_granularity},
    {"compute_capability", &DeviceSpec::compute_capability},
};
inline constexpr DoubleField<DeviceSpec> kSpecFields[] = {
    {"clock_ghz", &DeviceSpec::clock_ghz, Rule::kPositive},
    {"matrix_tflops_per_sm", &DeviceSpec::matrix_tflops_per_sm, Rule::kPositive},
    {"hbm_GBps", &DeviceSpec::hbm_GBps, Rule::kPositive},
    {"l2_bytes", &DeviceSpec::l2_bytes, Rule::kPositive},
    {"smem_per_sm_bytes", &DeviceSpec::smem_per_sm_bytes, Rule::kPositive},
    {"link_GBps", &DeviceSpec::link_GBps, Rule::kPositive},
    {"net_GBps", &DeviceSpec::net_GBps, Rule::kPositive},
};
inline constexpr DoubleField<ModelParams> kFitFields[] = {
    {"link_efficiency", &ModelParams::link_efficiency, Rule::kFraction},
    {"link_latency_us", &ModelParams::link_latency_us, Rule::kNonNegative},
    {"net_latency_us", &ModelParams::net_latency_us, Rule::kNonNegative},
    {"per_cta_copy_GBps", &ModelParams::per_cta_copy_GBps, Rule::kPositive},
    {"copy_engine_GBps", &ModelParams::copy_engine_GBps, Rule::kNonNegative},
    {"tma_push_per_cta_GBps", &ModelParams::tma_push_per_cta_GBps, Rule::kPositive},
    {"tma_pull_per_cta_GBps", &ModelParams::tma_pull_per_cta_GBps, Rule::kPositive},
    {"simt_per_cta_GBps", &ModelParams::simt_per_cta_GBps, Rule::kPositive},
    {"gemm_efficiency", &ModelParams::gemm_efficiency, Rule::kFraction},
    {"gemm_l2_miss_cost", &ModelParams::gemm_l2_miss_cost, Rule::kNonNegative},
    {"cublas_efficiency", &ModelParams::cublas_efficiency, Rule::kFraction},
    {"cublas_partition_penalty", &ModelParams::cublas_partition_penalty, Rule::kNonNegative},
    {"launch_us", &ModelParams::launch_us, Rule::kNonNegative},
    {"tile_epilogue_us", &ModelParams::tile_epilogue_us, Rule::kNonNegative},
    {"cublas_tile_epilogue_us", &ModelParams::cublas_tile_epilogue_us, Rule::kNonNegative},
    {"clock_knee_sms", &ModelParams::clock_knee_sms, Rule::kPositive},
    {"clock_exponent", &ModelParams::clock_exponent, Rule::kUnit},
    {"operator_gemm_factor", &ModelParams::operator_gemm_factor, Rule::kPositive},
    {"nccl_efficiency", &ModelParams::nccl_efficiency, Rule::kFraction},
    {"nccl_per_cta_GBps", &ModelParams::nccl_per_cta_GBps, Rule::kPositive},
    {"nccl_symmetric_per_cta_GBps", &ModelParams::nccl_symmetric_per_cta_GBps, Rule::kPositive},
    {"nccl_launch_us", &ModelParams::nccl_launch_us, Rule::kNonNegative},
    {"tma_launch_us", &ModelParams::tma_launch_us, Rule::kNonNegative},
    {"tma_group_us", &ModelParams::tma_group_us, Rule::kNonNegative},
    {"nccl_group_us", &ModelParams::nccl_group_us, Rule::kNonNegative},
    {"loopback_piece_us", &ModelParams::loopback_piece_us, Rule::kNonNegative},
    {"overlap_nccl_rate_factor", &ModelParams::overlap_nccl_rate_factor, Rule::kPositive},
    {"overlap_tma_rate_factor", &ModelParams::overlap_tma_rate_factor, Rule::kPositive},
    {"beside_gemm_rate_factor", &ModelParams::beside_gemm_rate_factor, Rule::kPositive},
    {"hbm_contention", &ModelParams::hbm_contention, Rule::kNonNegative},
    {"shared_sm_penalty", &ModelParams::shared_sm_penalty, Rule::kNonNegative},
};

}  // namespace ovl::hardware_fields
