// SymmetricBuffer: cudaMalloc per virtual rank (loopback), per device with peer access (threads), or cuMemCreate
// with POSIX file-descriptor handles mapped into every process (MPI, NCCL id).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/core/driver_api.hpp"
#include "world_internal.hpp"

namespace ovl {

namespace {
constexpr std::size_t kMaxSymmetricBytes = std::size_t(1) << 40;

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

CUmemAllocationProp cumem_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// A file descriptor, closed when it goes out of scope.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// Undoes a cuMem mapping in reverse order: unmaps `va` (when mapped), frees the reserved range (when va != 0) and
// releases the handle (when != 0). Logs each failure through log(what, code), never throws.
template <typename Log>
void unmap_and_release(CUdeviceptr va, std::size_t bytes, CUmemGenericAllocationHandle handle, bool mapped,
                       Log&& log) noexcept {
  const DriverApi& drv = driver_api();
  if (mapped)
    if (CUresult e = drv.cuMemUnmap(va, bytes); e != CUDA_SUCCESS) log("cuMemUnmap", int(e));
  if (va != 0)
    if (CUresult e = drv.cuMemAddressFree(va, bytes); e != CUDA_SUCCESS) log("cuMemAddressFree", int(e));
  if (handle != 0)
    if (CUresult e = drv.cuMemRelease(handle); e != CUDA_SUCCESS) log("cuMemRelease", int(e));
}

// One rank's allocation as this process sees it while the MPI constructor builds it: the handle (made here, or
// imported from the owner's descriptor), the address range reserved for it, whether the handle is mapped there.
// Until disown() hands them to the SymmetricBuffer, the destructor undoes what was done, in reverse order, so a
// constructor that throws half-way leaks nothing. It logs, never throws.
struct CuMemMapping {
  CUmemGenericAllocationHandle handle = 0;  // 0: none yet
  CUdeviceptr va = 0;                       // 0: nothing reserved yet
  std::size_t bytes = 0;                    // of the reserved range
  bool mapped = false;

  CuMemMapping() = default;
  CuMemMapping(const CuMemMapping&) = delete;
  CuMemMapping& operator=(const CuMemMapping&) = delete;
  ~CuMemMapping() {
    unmap_and_release(va, bytes, handle, mapped, [](const char* what, int code) {
      std::fprintf(stderr, "ovl: SymmetricBuffer constructor cleanup: %s failed (%d)\n", what, code);
    });
  }
  // The handle, which the caller (with the mapping at `va`) now owns.
  CUmemGenericAllocationHandle disown() {
    mapped = false;
    va = 0;
    return std::exchange(handle, 0);
  }
};

// One collective step of the MPI constructor: every rank reports whether its local part failed (`failure` set) and
// shares `value`. A rank that failed rethrows its own error, the others throw naming it, so no rank goes on to the
// next collective call (fd exchange, all-gather) and waits there forever for one that gave up. Every rank's value.
std::vector<std::size_t> agree(const World& world, const std::exception_ptr& failure, std::size_t value,
                               const char* step) {
  const std::size_t mine[2] = {failure ? std::size_t(0) : std::size_t(1), value};
  const auto all = world.all_gather(std::as_bytes(std::span<const std::size_t>(mine)));
  std::vector<std::size_t> values(all.size());
  std::vector<int> failed;
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::size_t theirs[2] = {0, 0};
    std::memcpy(theirs, all[r].data(), sizeof(theirs));
    if (theirs[0] == 0) failed.push_back(int(r));
    values[r] = theirs[1];
  }
  if (failure) std::rethrow_exception(failure);
  OVL_CHECK(failed.empty(), "SymmetricBuffer: rank(s) {} failed to {}, so rank {} gives up too",
            fmt::join(failed, ", "), step, world.rank());
  return values;
}
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
        for (int r = 0; r < n; ++r) OVL_CUDA_CHECK(cudaMalloc(&ptrs_[r], alloc_));
        detail::enqueue_and_wait(nullptr, [&](cudaStream_t s) {  // every rank's buffer zeroed, one wait
          for (void* p : ptrs_) OVL_CUDA_CHECK(cudaMemsetAsync(p, 0, alloc_, s));
        });
      } catch (...) {
        for (void* p : ptrs_)
          if (p) cudaFree(p);
        ptrs_.clear();
        throw;
      }
      break;
    }
    case World::Backend::kThreads: {
      alloc_ = round_up(bytes, 16);
      void* mine = nullptr;
      OVL_CUDA_CHECK(cudaMalloc(&mine, alloc_));
      try {
        fill_now(mine, 0, alloc_);
        // Same process: a device pointer is valid on every device with peer access (unified addressing). A rank
        // that failed before this all-gather abandons the barriers (run_per_rank does), so this throws, not hangs.
        const auto all = world.all_gather(std::as_bytes(std::span<void* const>(&mine, 1)));
        for (int r = 0; r < n; ++r) std::memcpy(&ptrs_[r], all[r].data(), sizeof(void*));
      } catch (...) {
        (void)cudaFree(mine);  // no destructor runs for a constructor that throws
        throw;
      }
      break;
    }
    case World::Backend::kMpi:
    case World::Backend::kNccl: {
      // Each step's local part is caught and voted on (agree) before the next collective call, so a rank that
      // fails stops every rank instead of leaving them waiting. Until the last vote, what this rank made is owned
      // by `maps` and the descriptors, and freed when they go out of scope.
      const int device = world.device();
      std::vector<CuMemMapping> maps(static_cast<std::size_t>(n));
      CuMemMapping& own = maps[std::size_t(rank_)];
      std::size_t granularity = 0;
      std::exception_ptr failure;
      // step 0: the size; every rank must map the same one, compared before anything is created.
      try {
        const DriverApi& drv = require_virtual_memory();
        const CUmemAllocationProp prop = cumem_prop(device);
        OVL_CU_CHECK(drv.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
        OVL_CHECK(granularity > 0, "cuMem allocation granularity 0 on device {}", device);
        alloc_ = round_up(bytes, granularity);
      } catch (...) {
        failure = std::current_exception();
      }
      const std::vector<std::size_t> sizes = agree(world, failure, alloc_, "find the allocation granularity");
      for (int r = 0; r < n; ++r) {
        OVL_CHECK(sizes[r] == alloc_,
                  "SymmetricBuffer: rank {} allocates {} bytes, rank {} allocates {} (sizes must match)", r, sizes[r],
                  rank_, alloc_);
      }
      // step 1: our allocation, exported as a descriptor.
      UniqueFd own_fd;
      try {
        const DriverApi& drv = driver_api();
        const CUmemAllocationProp prop = cumem_prop(device);
        CUmemGenericAllocationHandle handle = 0;
        OVL_CU_CHECK(drv.cuMemCreate(&handle, alloc_, &prop, 0));
        own.handle = handle;
        int fd = -1;
        OVL_CU_CHECK(drv.cuMemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        own_fd = UniqueFd(fd);
      } catch (...) {
        failure = std::current_exception();
      }
      (void)agree(world, failure, 0, "create or export its allocation");
      // step 2: every rank's descriptor (ours stays in own_fd). Not voted on: exchange_fds is itself a collective
      // over sockets, so a rank that fails inside it can still leave the others blocked there, and the descriptors
      // it received before failing are not closed (a known gap; world_fd.cpp would need timeouts and its own
      // cleanup).
      const std::vector<int> fds = detail::exchange_fds(world, own_fd.get());
      std::vector<UniqueFd> peer_fds(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r)
        if (r != rank_) peer_fds[std::size_t(r)] = UniqueFd(fds[std::size_t(r)]);
      // step 3: import the peers' allocations, map all of them, zero ours.
      std::vector<unsigned long long> handles(static_cast<std::size_t>(n), 0);
      try {
        const DriverApi& drv = driver_api();
        CUmemAccessDesc access{};
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id = device;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        for (int r = 0; r < n; ++r) {
          CuMemMapping& m = maps[std::size_t(r)];
          // Each field is set once its step has succeeded, so the cleanup undoes exactly what was done.
          if (r != rank_) {
            void* fd = reinterpret_cast<void*>(static_cast<std::intptr_t>(peer_fds[std::size_t(r)].get()));
            CUmemGenericAllocationHandle handle = 0;
            OVL_CU_CHECK(drv.cuMemImportFromShareableHandle(&handle, fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
            m.handle = handle;
            peer_fds[std::size_t(r)] = UniqueFd();  // the handle keeps the memory: the descriptor is done
          }
          CUdeviceptr va = 0;
          OVL_CU_CHECK(drv.cuMemAddressReserve(&va, alloc_, granularity, 0, 0));
          m.va = va;
          m.bytes = alloc_;
          OVL_CU_CHECK(drv.cuMemMap(m.va, alloc_, 0, m.handle, 0));
          m.mapped = true;
          OVL_CU_CHECK(drv.cuMemSetAccess(m.va, alloc_, &access, 1));
        }
        fill_now(reinterpret_cast<void*>(own.va), 0, alloc_);
      } catch (...) {
        failure = std::current_exception();
      }
      // Also the barrier: every rank has zeroed its buffer before anyone writes into a peer's.
      (void)agree(world, failure, 0, "map the buffers");
      for (int r = 0; r < n; ++r) {
        ptrs_[r] = reinterpret_cast<void*>(maps[std::size_t(r)].va);
        handles[std::size_t(r)] = maps[std::size_t(r)].disown();
      }
      handles_ = std::move(handles);
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
      case World::Backend::kMpi:
      case World::Backend::kNccl: {
        if (state_->backend == World::Backend::kNccl) {
          state_->nccl_barrier(rank_);
        } else {
#if defined(OVL_HAVE_MPI)
          MPI_Barrier(state_->mpi_comm);
#endif
        }
        for (std::size_t r = 0; r < ptrs_.size(); ++r)
          unmap_and_release(reinterpret_cast<CUdeviceptr>(ptrs_[r]), alloc_, r < handles_.size() ? handles_[r] : 0,
                            true, log);
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
