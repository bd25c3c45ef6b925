// NCCL's symmetric memory (comm_algo nccl-symmetric; docs/overlap.md, "NCCL's symmetric kernels"): a communicator
// made with a CTA policy, and buffers every rank allocates with ncclMemAlloc and registers as symmetric windows of it,
// which NCCL's symmetric kernels (NCCL 2.27+) and, under CTA policy zero, its copy-engine AllGather (NCCL 2.28+, CUDA
// driver 12.5+) read and write. A build against an older NCCL compiles and refuses them by name
// (nccl_symmetric_refusal). NVLink multicast is no part of it: where NCCL_NVLS_ENABLE=0 (as the project's runs set)
// NCCL picks the kernels that load and store through peer mappings.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "ovl/core/world.hpp"
#include "ovl/model/plan.hpp"

namespace ovl {

// "" when this build, the NCCL library loaded and the environment let NCCL's symmetric kernels run under `policy`,
// else why not, naming the version, the driver or the variable: NCCL older than 2.27 (at build or at run time);
// policy zero without NCCL 2.28 or a CUDA driver of 12.5; NCCL_CTA_POLICY set to another policy than `policy` (NCCL
// gives every communicator it makes the variable's policy, whatever the config asks for) or to a value ovl does not
// read; NCCL_WIN_ENABLE=0 or NCCL_CUMEM_ENABLE=0 (no symmetric windows). What NCCL decides inside a communicator
// (ranks without direct peer access run its ordinary kernels) cannot be asked; NCCL_DEBUG=INFO shows it.
std::string nccl_symmetric_refusal(CtaPolicy policy);

namespace detail {
// What an NCCL_CTA_POLICY value (null: unset) does under NCCL `nccl_version` (an NCCL_VERSION code): no policy when
// unset or empty; the policy NCCL gives every communicator it makes (a number: 0 default, 1 efficiency, 2 zero, any
// other the default, as NCCL resets it; from NCCL 2.29 also those names); else why ovl cannot tell which (a
// combination "A|B", a word that NCCL does not read). nccl_symmetric_refusal reads the variable once, through this.
struct EnvCtaPolicy {
  std::optional<CtaPolicy> policy;
  std::string error;
};
EnvCtaPolicy parse_nccl_cta_policy(const char* text, int nccl_version);
}  // namespace detail

// A communicator over the ranks of `parent`, split off it with ncclConfig_t::CTAPolicy = policy and minCTAs = maxCTAs
// = ctas (the symmetric kernels then run on exactly min(ctas, kNcclSymmetricMaxCtas) CTAs). Collective: every rank of
// `parent` makes one at about the same time. Throws ovl::Error with nccl_symmetric_refusal's reason where that is not
// empty. Finalized and destroyed with the object (after every NcclSymmetricBuffer registered on it).
class NcclSymmetricComm {
 public:
  NcclSymmetricComm(ncclComm_t parent, CtaPolicy policy, int ctas);
  ~NcclSymmetricComm();
  NcclSymmetricComm(const NcclSymmetricComm&) = delete;
  NcclSymmetricComm& operator=(const NcclSymmetricComm&) = delete;
  ncclComm_t get() const { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

// `bytes` of device memory from ncclMemAlloc (cuMem, as NCCL's windows need), registered as a symmetric window
// (NCCL_WIN_COLL_SYMMETRIC) of every communicator register_on() was called with. Registration is collective over the
// communicator's ranks: every rank registers buffers of the same sizes in the same order, and passes NCCL pointers at
// the same offsets into them. The destructor synchronizes the device and waits for every rank of `world` (none for an
// empty World or a world of 1), so no peer still reads or writes this rank's memory, then deregisters and frees.
class NcclSymmetricBuffer {
 public:
  NcclSymmetricBuffer(const World& world, std::size_t bytes);
  ~NcclSymmetricBuffer();
  NcclSymmetricBuffer(const NcclSymmetricBuffer&) = delete;
  NcclSymmetricBuffer& operator=(const NcclSymmetricBuffer&) = delete;

  // Registers the buffer as a symmetric window of `comm` (made on this buffer's device), once per communicator.
  void register_on(ncclComm_t comm);
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  World world_;
  int device_ = 0;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  std::map<ncclComm_t, void*> windows_;  // communicator -> its ncclWindow_t
};

}  // namespace ovl
