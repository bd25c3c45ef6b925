// The device-free checks Context runs on a call's tensors (ovl/tensor_checks.hpp): each bad case is an ovl::Error
// whose message names the tensor and the value. The FP8 refusals that need a device (where a scale lives):
// tests/gpu/test_overlap_fp8.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "ovl/tensor_checks.hpp"

namespace ovl {
namespace {

using test::expect_error_naming_all;

const void* at(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(TensorChecks, SpanCoversRowsTimesColsElements) {
  const TensorSpan t = tensor_span("gemm_all_reduce", "A", at(0x10000), 1024, 256, 2);
  EXPECT_EQ(t.begin, 0x10000u);
  EXPECT_EQ(t.bytes, 1024u * 256u * 2u);
  EXPECT_EQ(t.end(), 0x10000u + 1024u * 256u * 2u);
}

TEST(TensorChecks, ZeroNegativeAndHugeSizesNameTheTensor) {
  expect_error_naming_all([] { tensor_span("api", "A", at(0x1000), 0, 256, 2); },
                          {"api: A has shape 0 x 256", "positive"});
  expect_error_naming_all([] { tensor_span("api", "B", at(0x1000), 64, -8, 2); }, {"B has shape 64 x -8"});
  // Over int32: cuBLAS and the GEMM kernels take int dimensions.
  expect_error_naming_all([] { tensor_span("api", "C", at(0x1000), int64_t{1} << 31, 8, 2); },
                          {"C has shape 2147483648 x 8", "32-bit"});
  expect_error_naming_all([] { tensor_span("api", "A", at(0x1000), 8, INT64_MAX, 2); }, {"A has shape 8 x", "32-bit"});
  EXPECT_NO_THROW(tensor_span("api", "A", at(0x1000), kMaxTensorDim, 8, 2));
}

TEST(TensorChecks, RangeThatWrapsTheAddressSpaceIsRefused) {
  expect_error_naming_all([] { tensor_span("api", "A", at(UINTPTR_MAX - 100), 64, 64, 2); }, {"A at", "address space"});
}

TEST(TensorChecks, OverlapIsDetectedByteExactly) {
  const TensorSpan a{"A", 1000, 100}, c_touching{"C", 1100, 50}, c_last_byte{"C", 1099, 50}, c_inside{"C", 1010, 10},
      c_around{"C", 900, 400}, empty{"C", 1050, 0};
  EXPECT_FALSE(spans_overlap(a, c_touching));  // [1000, 1100) and [1100, 1150) share no byte
  EXPECT_TRUE(spans_overlap(a, c_last_byte));
  EXPECT_TRUE(spans_overlap(a, c_inside));
  EXPECT_TRUE(spans_overlap(c_around, a));
  EXPECT_FALSE(spans_overlap(a, empty));
  EXPECT_NO_THROW(check_no_overlap("api", c_touching, a));
}

TEST(TensorChecks, OutputAliasingAnInputNamesBothAndTheBytes) {
  const TensorSpan a = tensor_span("gemm_all_reduce", "A", at(0x100000), 1024, 256, 2);
  const TensorSpan c_same = tensor_span("gemm_all_reduce", "C", at(0x100000), 1024, 768, 2);
  expect_error_naming_all(
      [&] { check_no_overlap("gemm_all_reduce", c_same, a); },
      {"gemm_all_reduce: C [0x100000,", "overlaps A [0x100000, 0x180000)", "in 524288 bytes", "alias"});
  // Partial: C starts in A's last row.
  const TensorSpan c_tail = tensor_span("gemm_all_reduce", "C", at(0x100000 + 1023 * 512), 16, 256, 2);
  expect_error_naming_all([&] { check_no_overlap("gemm_all_reduce", c_tail, a); }, {"overlaps A", "in 512 bytes"});
}

TEST(TensorChecks, TensorLargerThanItsAllocationIsRefused) {
  const TensorSpan c = tensor_span("api", "C", at(0x200000), 1024, 768, 2);  // 1572864 bytes
  EXPECT_NO_THROW(check_inside_allocation("api", c, 0x200000, 1572864));
  EXPECT_NO_THROW(check_inside_allocation("api", c, 0x1FF000, 1572864 + 0x1000));
  expect_error_naming_all([&] { check_inside_allocation("api", c, 0x200000, 1572864 - 2); },
                          {"C needs 1572864 bytes", "has 1572862 bytes left"});
  expect_error_naming_all([&] { check_inside_allocation("api", c, 0x300000, 4096); }, {"not inside the allocation"});
}

// The element types the operators take: bf16 / fp16 alike for A, B, C and no scales; FP8 A e4m3, B e4m3 or e5m2 stored
// N x K, both with scales, C bf16 or fp16 without one.
TEST(TensorChecks, OperandTypesAndScalesNameTheTensor) {
  const float* s = reinterpret_cast<const float*>(uintptr_t{0x1000});  // never read: only its presence and alignment
  const DType bf16 = DType::kBF16, fp16 = DType::kFP16, e4m3 = DType::kE4M3, e5m2 = DType::kE5M2;
  const BLayout nt = BLayout::kNxK;
  auto check = [](OperandType a, OperandType b, BLayout layout, OperandType c) {
    return [=] { check_operand_types("gemm_all_reduce", a, b, layout, c); };
  };
  EXPECT_NO_THROW(check({"A", bf16, nullptr}, {"B", bf16, nullptr}, BLayout::kKxN, {"C", bf16, nullptr})());
  EXPECT_NO_THROW(check({"A", e4m3, s}, {"B", e4m3, s}, nt, {"C", bf16, nullptr})());
  EXPECT_NO_THROW(check({"A", e4m3, s}, {"B", e5m2, s}, nt, {"C", fp16, nullptr})());
  // bf16 / fp16.
  expect_error_naming_all(check({"A", DType::kFP32, nullptr}, {"B", bf16, nullptr}, nt, {"C", bf16, nullptr}),
                          {"gemm_all_reduce: A dtype fp32 is not supported"});
  expect_error_naming_all(check({"A", bf16, nullptr}, {"B", bf16, nullptr}, nt, {"C", fp16, nullptr}),
                          {"C dtype fp16 differs from A's dtype bf16"});
  expect_error_naming_all(check({"A", bf16, nullptr}, {"B", bf16, s}, nt, {"C", bf16, nullptr}),
                          {"B has a scale", "bf16 is not FP8"});
  // FP8: the pairs the GEMM runs, C's type, B's layout, the scales.
  expect_error_naming_all(check({"A", e5m2, s}, {"B", e4m3, s}, nt, {"C", bf16, nullptr}),
                          {"A dtype e5m2: FP8 A must be e4m3"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", bf16, nullptr}, nt, {"C", bf16, nullptr}),
                          {"B dtype bf16 with e4m3 A"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e4m3, s}, nt, {"C", e4m3, nullptr}),
                          {"C dtype e4m3", "bf16 or fp16"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e4m3, s}, nt, {"C", DType::kFP32, nullptr}), {"C dtype fp32"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e4m3, s}, BLayout::kKxN, {"C", bf16, nullptr}),
                          {"kKxN", "K-major"});
  expect_error_naming_all(check({"A", e4m3, nullptr}, {"B", e4m3, s}, nt, {"C", bf16, nullptr}),
                          {"A (dtype e4m3) has no scale"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e5m2, nullptr}, nt, {"C", bf16, nullptr}),
                          {"B (dtype e5m2) has no scale"});
  const float* odd = reinterpret_cast<const float*>(uintptr_t{0x1002});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e4m3, odd}, nt, {"C", bf16, nullptr}),
                          {"B scale 0x1002 is not 4-byte aligned"});
  expect_error_naming_all(check({"A", e4m3, s}, {"B", e4m3, s}, nt, {"C", bf16, s}), {"C has a scale"});
}

}  // namespace
}  // namespace ovl
