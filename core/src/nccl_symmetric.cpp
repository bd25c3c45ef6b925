// NCCL's symmetric memory: what this build and the NCCL loaded allow, the communicator with a CTA policy, and the
// ncclMemAlloc'ed buffers registered as its symmetric windows.
#include "ovl/core/nccl_symmetric.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "ovl/core/driver_api.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"
#include "world_internal.hpp"

// The window API (ncclMemAlloc, ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC, ncclConfig_t::CTAPolicy) came with
// NCCL 2.27, CTA policy zero (the copy-engine collectives) with 2.28.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define OVL_NCCL_WINDOWS 1
#else
#define OVL_NCCL_WINDOWS 0
#endif

namespace ovl {
namespace {

constexpr int kWindowsVersion = NCCL_VERSION(2, 27, 0);
constexpr int kZeroVersion = NCCL_VERSION(2, 28, 0);
constexpr int kPolicyNamesVersion = NCCL_VERSION(2, 29, 0);  // NCCL_CTA_POLICY=ZERO etc.; before: numbers only

// "2.28.3" from an NCCL_VERSION code (X * 1000 + Y * 100 + Z up to 2.8, X * 10000 + Y * 100 + Z after).
std::string version_text(int code) {
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

// The NCCL library loaded (ncclGetVersion), read once; 0 when it does not answer.
int loaded_nccl_version() {
  static const int version = [] {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) v = 0;
    return v;
  }();
  return version;
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// NCCL_CTA_POLICY under the NCCL loaded, read once.
const detail::EnvCtaPolicy& env_cta_policy() {
  static const detail::EnvCtaPolicy value =
      detail::parse_nccl_cta_policy(std::getenv("NCCL_CTA_POLICY"), loaded_nccl_version());
  return value;
}

bool env_is_zero(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && std::string_view(text) == "0";
}

#if OVL_NCCL_WINDOWS
int nccl_cta_policy(CtaPolicy policy) {
  switch (policy) {
    case CtaPolicy::kDefault:
      return NCCL_CTA_POLICY_DEFAULT;
    case CtaPolicy::kEfficiency:
      return NCCL_CTA_POLICY_EFFICIENCY;
    case CtaPolicy::kZero:
#if defined(NCCL_CTA_POLICY_ZERO)
      return NCCL_CTA_POLICY_ZERO;
#else
      break;  // nccl_symmetric_refusal refuses it
#endif
  }
  OVL_FAIL("CTA policy {} has no NCCL value in this build", to_string(policy));
}
#endif

}  // namespace

detail::EnvCtaPolicy detail::parse_nccl_cta_policy(const char* text, int nccl_version) {
  EnvCtaPolicy e;
  if (text == nullptr || *text == '\0') return e;
  char* end = nullptr;
  errno = 0;
  const long number = std::strtol(text, &end, 0);
  if (end != text && *end == '\0' && errno == 0) {
    // NCCL resets a number outside 0..2 to the default policy (init.cc, "CTAPolicy %d is not a valid value").
    e.policy = number == 1 ? CtaPolicy::kEfficiency : number == 2 ? CtaPolicy::kZero : CtaPolicy::kDefault;
    return e;
  }
  const bool names = nccl_version >= kPolicyNamesVersion;
  for (const Named<CtaPolicy>& n : kCtaPolicyNames) {
    if (names && same_ignoring_case(text, n.name)) {
      e.policy = n.value;
      return e;
    }
  }
  e.error = fmt::format(
      "NCCL_CTA_POLICY = \"{}\" is not one CTA policy that ovl reads (NCCL {} reads 0 = default, 1 = efficiency, 2 = "
      "zero{}); unset it or set one",
      text, version_text(nccl_version), names ? ", or those names" : "");
  return e;
}

std::string nccl_symmetric_refusal(CtaPolicy policy) {
  if (NCCL_VERSION_CODE < kWindowsVersion) {
    return fmt::format("NCCL's symmetric kernels need NCCL 2.27 or later; this build's nccl.h is NCCL {}",
                       version_text(NCCL_VERSION_CODE));
  }
  const int loaded = loaded_nccl_version();
  if (loaded < kWindowsVersion) {
    return fmt::format("NCCL's symmetric kernels need NCCL 2.27 or later; the NCCL library loaded is {}",
                       version_text(loaded));
  }
  if (policy == CtaPolicy::kZero) {
#if !defined(NCCL_CTA_POLICY_ZERO)
    return fmt::format("cta_policy zero (NCCL's copy-engine collectives) needs NCCL 2.28; this build's nccl.h is {}",
                       version_text(NCCL_VERSION_CODE));
#endif
    if (loaded < kZeroVersion) {
      return fmt::format("cta_policy zero (NCCL's copy-engine collectives) needs NCCL 2.28; the library loaded is {}",
                         version_text(loaded));
    }
    int driver = 0;
    if (driver_api().cuDriverGetVersion != nullptr) driver_api().cuDriverGetVersion(&driver);
    if (driver < 12050) {
      return fmt::format(
          "cta_policy zero: NCCL moves an AllGather with the copy engines only on a CUDA driver of 12.5 or later "
          "(this one: {}.{}); elsewhere it runs its kernels",
          driver / 1000, driver % 1000 / 10);
    }
  }
  const detail::EnvCtaPolicy& env = env_cta_policy();
  if (!env.error.empty()) return env.error;
  if (env.policy && *env.policy != policy) {
    return fmt::format(
        "NCCL_CTA_POLICY gives every communicator NCCL makes CTA policy {}, not the plan's cta_policy {} (unset it, "
        "or plan with cta_policy {})",
        to_string(*env.policy), to_string(policy), to_string(*env.policy));
  }
  for (const char* name : {"NCCL_WIN_ENABLE", "NCCL_CUMEM_ENABLE"}) {
    if (env_is_zero(name)) return fmt::format("{} = 0: NCCL registers no symmetric windows", name);
  }
  return "";
}

NcclSymmetricComm::NcclSymmetricComm(ncclComm_t parent, CtaPolicy policy, int ctas) {
  const std::string why = nccl_symmetric_refusal(policy);
  OVL_CHECK(why.empty(), "comm_algo nccl-symmetric: {}", why);
  OVL_CHECK(parent != nullptr, "NcclSymmetricComm: the parent communicator is null");
  OVL_CHECK(ctas >= 1 && ctas <= kNcclSymmetricMaxCtas, "NcclSymmetricComm: ctas = {} must be in [1, {}]", ctas,
            kNcclSymmetricMaxCtas);
#if OVL_NCCL_WINDOWS
  ncclConfig_t config = detail::nccl_config(ctas);
  config.CTAPolicy = nccl_cta_policy(policy);
  int rank = 0;
  OVL_NCCL_CHECK(ncclCommUserRank(parent, &rank));
  OVL_NCCL_CHECK(ncclCommSplit(parent, 0, rank, &comm_, &config));
#endif
}

NcclSymmetricComm::~NcclSymmetricComm() {
  if (comm_ == nullptr) return;
  const ncclResult_t f = ncclCommFinalize(comm_);
  if (f != ncclSuccess && f != ncclInProgress) std::fprintf(stderr, "ovl: ncclCommFinalize: %s\n", ncclGetErrorString(f));
  const ncclResult_t d = ncclCommDestroy(comm_);
  if (d != ncclSuccess) std::fprintf(stderr, "ovl: ncclCommDestroy: %s\n", ncclGetErrorString(d));
}

NcclSymmetricBuffer::NcclSymmetricBuffer(const World& world, std::size_t bytes) : world_(world), bytes_(bytes) {
  OVL_CHECK(bytes > 0, "NcclSymmetricBuffer of bytes = 0");
#if OVL_NCCL_WINDOWS
  OVL_CUDA_CHECK(cudaGetDevice(&device_));
  OVL_NCCL_CHECK(ncclMemAlloc(&ptr_, bytes));
#else
  OVL_FAIL("comm_algo nccl-symmetric: {}", nccl_symmetric_refusal(CtaPolicy::kDefault));
#endif
}

void NcclSymmetricBuffer::register_on(ncclComm_t comm) {
  if (windows_.count(comm) != 0) return;
#if OVL_NCCL_WINDOWS
  OVL_CUDA_CHECK(cudaSetDevice(device_));
  // A communicator of one rank (or without direct peer access between its ranks) has no symmetric support: NCCL
  // registers the buffer locally and runs its ordinary path.
  ncclWindow_t window = nullptr;
  OVL_NCCL_CHECK(ncclCommWindowRegister(comm, ptr_, bytes_, &window, NCCL_WIN_COLL_SYMMETRIC));
  windows_[comm] = window;
#endif
}

NcclSymmetricBuffer::~NcclSymmetricBuffer() {
#if OVL_NCCL_WINDOWS
  if (ptr_ == nullptr) return;
  // No peer may still read or write this rank's memory: the device is idle, and so is every rank's.
  try {
    OVL_CUDA_CHECK(cudaSetDevice(device_));
    OVL_CUDA_CHECK(cudaDeviceSynchronize());
    if (world_.valid() && world_.size() > 1) world_.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ovl: ~NcclSymmetricBuffer: %s\n", e.what());
  }
  for (const auto& [comm, window] : windows_) {
    if (window == nullptr) continue;
    const ncclResult_t r = ncclCommWindowDeregister(comm, static_cast<ncclWindow_t>(window));
    if (r != ncclSuccess) std::fprintf(stderr, "ovl: ncclCommWindowDeregister: %s\n", ncclGetErrorString(r));
  }
  const ncclResult_t r = ncclMemFree(ptr_);
  if (r != ncclSuccess) std::fprintf(stderr, "ovl: ncclMemFree: %s\n", ncclGetErrorString(r));
#endif
}

}  // namespace ovl
