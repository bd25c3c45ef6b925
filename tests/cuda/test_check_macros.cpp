// The CUDA check macros turn error codes into ovl::Error with the API, the call and the library's message.
// No GPU is needed: the codes are passed in directly.
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"

namespace {

TEST(CheckMacros, CudaSuccessDoesNotThrow) { EXPECT_NO_THROW(OVL_CUDA_CHECK(cudaSuccess)); }

TEST(CheckMacros, CudaErrorNamesApiCallAndError) {
  try {
    OVL_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no throw";
  } catch (const ovl::Error& e) {
    EXPECT_EQ(e.api(), "cuda");
    EXPECT_EQ(e.call(), "cudaErrorInvalidValue");
    EXPECT_NE(e.message().find("cudaErrorInvalidValue"), std::string::npos) << e.message();
  }
}

TEST(CheckMacros, DriverErrorNamesTheCode) {
  try {
    OVL_CU_CHECK(CUDA_ERROR_INVALID_VALUE);
    FAIL() << "no throw";
  } catch (const ovl::Error& e) {
    EXPECT_EQ(e.api(), "cu");
    // With a driver the text is the driver's ("invalid argument (1)"); without one, "CUresult 1".
    EXPECT_NE(e.message().find("1"), std::string::npos) << e.message();
  }
}

TEST(CheckMacros, NcclErrorNamesTheResult) {
  try {
    OVL_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "no throw";
  } catch (const ovl::Error& e) {
    EXPECT_EQ(e.api(), "nccl");
    EXPECT_EQ(e.call(), "ncclInvalidArgument");
    EXPECT_FALSE(e.message().empty());
  }
}

TEST(CheckMacros, NcclSuccessDoesNotThrow) { EXPECT_NO_THROW(OVL_NCCL_CHECK(ncclSuccess)); }

}  // namespace
