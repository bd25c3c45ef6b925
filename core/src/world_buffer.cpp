// SymmetricBuffer: cudaMalloc per virtual rank (loopback), per device with peer access (threads), or cuMemCreate
// with POSIX file-descriptor handles mapped into every process (MPI).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/core/driver_api.hpp"
#include "world_internal.hpp"

namespace ovl {

namespace {
constexpr std::size_t kMaxSymmetricBytes = std::size_t(1) << 40;

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

#if defined(OVL_HAVE_MPI)
CUmemAllocationProp cumem_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}
#endif
}  // namespace

SymmetricBuffer::SymmetricBuffer(const World& world, std::size_t bytes) : state_(world.state()), rank_(world.rank()), bytes_(bytes) {
  OVL_CHECK(state_ != nullptr, "SymmetricBuffer on an empty World");
  OVL_CHECK(bytes > 0, "SymmetricBuffer of bytes = 0");
  OVL_CHECK(bytes <= kMaxSymmetricBytes, "SymmetricBuffer of bytes = {} exceeds {}", bytes, kMaxSymmetricBytes);
  const int n = world.size();
  ptrs_.assign(n, nullptr);
  OVL_CUDA_CHECK(cudaSetDevice(world.device()));
  switch (world.backend()) {
    case World::Backend::kLoopback: {
      // 16-byte multiple: TMA sizes and the tail handling never read past the allocation.
      alloc_ = round_up(bytes, 16);
      try {
        for (int r = 0; r < n; ++r) {
          OVL_CUDA_CHECK(cudaMalloc(&ptrs_[r], alloc_));
          OVL_CUDA_CHECK(cudaMemset(ptrs_[r], 0, alloc_));
        }
      } catch (...) {
        for (void* p : ptrs_)
          if (p) cudaFree(p);
        ptrs_.clear();
        throw;
      }
      OVL_CUDA_CHECK(cudaDeviceSynchronize());
      break;
    }
    case World::Backend::kThreads: {
      alloc_ = round_up(bytes, 16);
      void* mine = nullptr;
      OVL_CUDA_CHECK(cudaMalloc(&mine, alloc_));
      OVL_CUDA_CHECK(cudaMemset(mine, 0, alloc_));
      OVL_CUDA_CHECK(cudaDeviceSynchronize());
      // Same process: a device pointer is valid on every device with peer access (unified addressing).
      const auto all = world.all_gather(std::as_bytes(std::span<void* const>(&mine, 1)));
      for (int r = 0; r < n; ++r) std::memcpy(&ptrs_[r], all[r].data(), sizeof(void*));
      break;
    }
    case World::Backend::kMpi: {
#if defined(OVL_HAVE_MPI)
      const DriverApi& drv = require_virtual_memory();
      const int device = world.device();
      CUmemAllocationProp prop = cumem_prop(device);
      std::size_t granularity = 0;
      OVL_CU_CHECK(drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
      OVL_CHECK(granularity > 0, "cuMem allocation granularity 0 on device {}", device);
      alloc_ = round_up(bytes, granularity);
      // Every rank must map the same size: compare before creating anything.
      const auto sizes = world.all_gather(std::as_bytes(std::span<const std::size_t>(&alloc_, 1)));
      for (int r = 0; r < n; ++r) {
        std::size_t s = 0;
        std::memcpy(&s, sizes[r].data(), sizeof(s));
        OVL_CHECK(s == alloc_, "SymmetricBuffer: rank {} allocates {} bytes, rank {} allocates {} (sizes must match)", r, s,
                  rank_, alloc_);
      }
      CUmemGenericAllocationHandle handle = 0;
      OVL_CU_CHECK(drv.cuMemCreate(&handle, alloc_, &prop, 0));
      int fd = -1;
      OVL_CU_CHECK(drv.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      const std::vector<int> fds = detail::exchange_fds(*state_, fd);
      handles_.assign(n, 0);
      CUmemAccessDesc access{};
      access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access.location.id = device;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      for (int r = 0; r < n; ++r) {
        if (r == rank_) {
          handles_[r] = handle;
        } else {
          CUmemGenericAllocationHandle h = 0;
          OVL_CU_CHECK(drv.cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<std::intptr_t>(fds[r])),
                                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
          ::close(fds[r]);
          handles_[r] = h;
        }
        CUdeviceptr va = 0;
        OVL_CU_CHECK(drv.cuMemAddressReserve(&va, alloc_, granularity, 0, 0));
        OVL_CU_CHECK(drv.cuMemMap(va, alloc_, 0, handles_[r], 0));
        OVL_CU_CHECK(drv.cuMemSetAccess(va, alloc_, &access, 1));
        ptrs_[r] = reinterpret_cast<void*>(va);
      }
      ::close(fd);
      OVL_CUDA_CHECK(cudaMemset(ptrs_[rank_], 0, alloc_));
      OVL_CUDA_CHECK(cudaDeviceSynchronize());
      world.barrier();  // everyone zeroed before anyone writes into a peer
#else
      OVL_FAIL("MPI backend without OVL_HAVE_MPI");
#endif
      break;
    }
  }
}

SymmetricBuffer::~SymmetricBuffer() { release(); }

SymmetricBuffer::SymmetricBuffer(SymmetricBuffer&& o) noexcept
    : state_(std::move(o.state_)), rank_(o.rank_), bytes_(o.bytes_), alloc_(o.alloc_), ptrs_(std::move(o.ptrs_)),
      handles_(std::move(o.handles_)) {
  o.ptrs_.clear();
  o.handles_.clear();
  o.bytes_ = o.alloc_ = 0;
}

SymmetricBuffer& SymmetricBuffer::operator=(SymmetricBuffer&& o) noexcept {
  if (this != &o) {
    release();
    state_ = std::move(o.state_);
    rank_ = o.rank_;
    bytes_ = o.bytes_;
    alloc_ = o.alloc_;
    ptrs_ = std::move(o.ptrs_);
    handles_ = std::move(o.handles_);
    o.ptrs_.clear();
    o.handles_.clear();
    o.bytes_ = o.alloc_ = 0;
  }
  return *this;
}

void* SymmetricBuffer::peer_ptr(int owner_rank) const {
  OVL_CHECK(owner_rank >= 0 && owner_rank < int(ptrs_.size()), "peer_ptr({}): rank outside the world of {}", owner_rank,
            ptrs_.size());
  return ptrs_[owner_rank];
}

// Collective: synchronize our device, wait for every rank (no peer still touches the memory), then free.
void SymmetricBuffer::release() noexcept {
  if (ptrs_.empty() || state_ == nullptr) return;
  auto log = [](const char* what, int code) { std::fprintf(stderr, "ovl: SymmetricBuffer release: %s failed (%d)\n", what, code); };
  const int device = state_->devices[rank_];
  if (cudaSetDevice(device) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) log("device synchronize", int(cudaGetLastError()));
  try {
    switch (state_->backend) {
      case World::Backend::kLoopback:
        for (void* p : ptrs_)
          if (p && cudaFree(p) != cudaSuccess) log("cudaFree", int(cudaGetLastError()));
        break;
      case World::Backend::kThreads:
        state_->thread_barrier();
        if (cudaFree(ptrs_[rank_]) != cudaSuccess) log("cudaFree", int(cudaGetLastError()));
        break;
      case World::Backend::kMpi: {
#if defined(OVL_HAVE_MPI)
        MPI_Barrier(state_->mpi_comm);
        const DriverApi& drv = driver_api();
        for (std::size_t r = 0; r < ptrs_.size(); ++r) {
          const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptrs_[r]);
          if (CUresult e = drv.cuMemUnmap(va, alloc_); e != CUDA_SUCCESS) log("cuMemUnmap", int(e));
          if (CUresult e = drv.cuMemAddressFree(va, alloc_); e != CUDA_SUCCESS) log("cuMemAddressFree", int(e));
          if (r < handles_.size())
            if (CUresult e = drv.cuMemRelease(handles_[r]); e != CUDA_SUCCESS) log("cuMemRelease", int(e));
        }
#endif
        break;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ovl: SymmetricBuffer release: %s\n", e.what());
  }
  ptrs_.clear();
  handles_.clear();
}

}  // namespace ovl
