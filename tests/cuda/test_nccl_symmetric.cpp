// NCCL's symmetric memory on the CPU (core/include/ovl/core/nccl_symmetric.hpp): how NCCL_CTA_POLICY is read under
// each NCCL version, what nccl_symmetric_refusal says with the NCCL library of this build (and no GPU or driver
// needed), and the communicator's refusals of bad arguments. The GPU tests run the kernels (tests/gpu/test_overlap.cu).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "expect_error.hpp"
#include "ovl/core/driver_api.hpp"
#include "ovl/core/nccl_symmetric.hpp"

namespace ovl {
namespace {

using detail::parse_nccl_cta_policy;

constexpr int kNccl228 = NCCL_VERSION(2, 28, 3);
constexpr int kNccl229 = NCCL_VERSION(2, 29, 0);

TEST(NcclSymmetric, CtaPolicyVariableAsNcclReadsIt) {
  EXPECT_FALSE(parse_nccl_cta_policy(nullptr, kNccl228).policy);
  EXPECT_FALSE(parse_nccl_cta_policy("", kNccl228).policy);
  EXPECT_EQ(parse_nccl_cta_policy("0", kNccl228).policy, CtaPolicy::kDefault);
  EXPECT_EQ(parse_nccl_cta_policy("1", kNccl228).policy, CtaPolicy::kEfficiency);
  EXPECT_EQ(parse_nccl_cta_policy("2", kNccl228).policy, CtaPolicy::kZero);
  EXPECT_EQ(parse_nccl_cta_policy("0x2", kNccl228).policy, CtaPolicy::kZero);  // strtol base 0, as NCCL
  // NCCL sets an invalid number back to the default policy.
  EXPECT_EQ(parse_nccl_cta_policy("7", kNccl228).policy, CtaPolicy::kDefault);
  EXPECT_EQ(parse_nccl_cta_policy("-1", kNccl228).policy, CtaPolicy::kDefault);
  // Names from NCCL 2.29 on (any case); before, and combinations always, are named as unreadable.
  EXPECT_EQ(parse_nccl_cta_policy("zero", kNccl229).policy, CtaPolicy::kZero);
  EXPECT_EQ(parse_nccl_cta_policy("EFFICIENCY", kNccl229).policy, CtaPolicy::kEfficiency);
  const detail::EnvCtaPolicy old = parse_nccl_cta_policy("ZERO", kNccl228);
  EXPECT_FALSE(old.policy);
  EXPECT_NE(old.error.find("\"ZERO\""), std::string::npos) << old.error;
  EXPECT_NE(old.error.find("2.28.3"), std::string::npos) << old.error;
  const detail::EnvCtaPolicy both = parse_nccl_cta_policy("EFFICIENCY|ZERO", kNccl229);
  EXPECT_FALSE(both.policy);
  EXPECT_NE(both.error.find("EFFICIENCY|ZERO"), std::string::npos) << both.error;
}

// This build's NCCL (2.27 or later where the project is built) runs the symmetric kernels under the default and
// efficiency policies unless the environment says otherwise; zero also needs a CUDA driver of 12.5 (none here: the
// refusal names the driver).
TEST(NcclSymmetric, RefusalNamesWhatIsMissing) {
  if (NCCL_VERSION_CODE < NCCL_VERSION(2, 27, 0)) {
    EXPECT_NE(nccl_symmetric_refusal(CtaPolicy::kEfficiency).find("2.27"), std::string::npos);
    return;
  }
  for (const char* name : {"NCCL_CTA_POLICY", "NCCL_WIN_ENABLE", "NCCL_CUMEM_ENABLE"})
    if (std::getenv(name) != nullptr) GTEST_SKIP() << name << " is set in this environment";
  EXPECT_EQ(nccl_symmetric_refusal(CtaPolicy::kDefault), "");
  EXPECT_EQ(nccl_symmetric_refusal(CtaPolicy::kEfficiency), "");
  int driver = 0;
  if (driver_api().cuDriverGetVersion != nullptr) driver_api().cuDriverGetVersion(&driver);
  const std::string zero = nccl_symmetric_refusal(CtaPolicy::kZero);
  if (driver >= 12050) {
    EXPECT_EQ(zero, "");
  } else {
    EXPECT_NE(zero.find("CUDA driver of 12.5"), std::string::npos) << zero;
  }
}

TEST(NcclSymmetric, CommunicatorRefusesBadArguments) {
  if (!nccl_symmetric_refusal(CtaPolicy::kEfficiency).empty()) GTEST_SKIP() << "no symmetric kernels here";
  test::expect_error_naming([] { NcclSymmetricComm c(nullptr, CtaPolicy::kEfficiency, 16); }, "parent communicator");
  auto any = reinterpret_cast<ncclComm_t>(std::uintptr_t(16));  // never used: the CTA count is refused first
  test::expect_error_naming([&] { NcclSymmetricComm c(any, CtaPolicy::kEfficiency, 65); }, "ctas = 65");
  test::expect_error_naming([&] { NcclSymmetricComm c(any, CtaPolicy::kEfficiency, 0); }, "ctas = 0");
}

}  // namespace
}  // namespace ovl
