// World: who the ranks are, which GPU each one drives, its NCCL communicators, and symmetric buffers whose every
// rank's copy is addressable (loads, stores, atomics, TMA) from every rank.
//
// Three backends behind one type:
//   loopback  World::loopback(N, device): ONE object that stands for all N virtual ranks on one GPU. Collectives
//             on it are called once and play every rank (num_local_ranks() == size()). No NCCL when N > 1.
//   threads   World::threads({d0, d1, ...}): one process, one World per GPU (rank i on devices[i]), peer access
//             enabled, NCCL communicators made by one ncclGetUniqueId and a group of ncclCommInitRankConfig.
//             Each rank's World is then used by its own host thread (run_per_rank), exactly like one process per
//             GPU: collective calls and SymmetricBuffer construction/destruction are collective over the ranks.
//   mpi       World::mpi(comm): one process per GPU (device = node-local rank % GPUs), the NCCL unique id sent by
//             MPI_Bcast, symmetric buffers made with cuMemCreate and exchanged as POSIX file descriptors.
//   nccl      World::from_nccl_id(id, rank, size, device): one process per GPU started by someone else (torchrun,
//             torch.distributed), which made the NCCL unique id on rank 0 and sent it to every rank. The host-side
//             barrier and all-gather run over the NCCL communicator itself; symmetric buffers as for mpi.
// So the same call works for every backend: each caller drives the ranks [first_local_rank(),
// first_local_rank() + num_local_ranks()) of its World.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#if defined(OVL_HAVE_MPI)
#include <mpi.h>
#endif

namespace ovl {

struct WorldOptions {
  // One NCCL communicator per entry: 0 = NCCL's own CTA choice; k > 0 = ncclConfig_t minCTAs = maxCTAs = k, so
  // NCCL and our kernels can be compared at equal SMs. Communicators are made when the World is made.
  std::vector<int> nccl_cta_bounds{0};
  // False: no NCCL communicators at all (the TMA collectives need none).
  bool create_nccl = true;
};

namespace detail {
struct WorldState;
}

class World {
 public:
  enum class Backend { kLoopback, kThreads, kMpi, kNccl };

  static World loopback(int ranks, int device = 0, const WorldOptions& options = {});
  static std::vector<World> threads(const std::vector<int>& devices, const WorldOptions& options = {});
#if defined(OVL_HAVE_MPI)
  static World mpi(MPI_Comm comm, const WorldOptions& options = {});
#endif
  // A new NCCL unique id (ncclGetUniqueId), as bytes to send to every rank (128 of them).
  static std::vector<std::byte> new_nccl_id();
  // This process's rank of a world whose ranks each call this with the same id (made by new_nccl_id on one of them)
  // at about the same time: ncclCommInitRank for the first of WorldOptions::nccl_cta_bounds (whose communicator then
  // carries barrier() and all_gather()), and one more communicator per further bound, its id sent over the first.
  // Ranks may be on several hosts, but symmetric buffers (mode tma) need every rank on one.
  static World from_nccl_id(std::span<const std::byte> id, int rank, int size, int device,
                            const WorldOptions& options = {});

  // This process's rank of a world whose NCCL communicator the caller made (torch.distributed, an application's own):
  // borrowed, not destroyed with the World, and NCCL's own CTA choice (WorldOptions do not apply). Collective: every
  // rank calls it at about the same time (the ranks' devices are exchanged over the communicator). Its thread-block
  // clusters are the caller's too: make it with ncclConfig_t::cgaClusterSize = 1, as ovl makes its own, or NCCL's
  // default clusters of 4 wait beside the GEMM for SMs it holds (docs/overlap.md, "NCCL's thread-block clusters").
  static World from_nccl_comm(ncclComm_t comm);

  World() = default;  // an empty World (valid() is false)
  bool valid() const { return state_ != nullptr; }

  int rank() const { return rank_; }  // loopback: 0, the first of the ranks it plays
  int size() const;
  int device() const;
  Backend backend() const;
  bool is_loopback() const { return backend() == Backend::kLoopback; }
  int first_local_rank() const { return rank_; }
  int num_local_ranks() const;  // size() in loopback, else 1
  // The communicator made for `cta_bound` (see WorldOptions); null in a loopback world of more than one rank.
  // Throws when the World has no communicator for that bound.
  ncclComm_t nccl_comm(int cta_bound = 0) const;
  const std::vector<int>& nccl_cta_bounds() const;

  // Host-side collectives over the World's callers (no-ops in loopback): a barrier, and an all-gather of bytes.
  void barrier() const;
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) const;

  const std::shared_ptr<detail::WorldState>& state() const { return state_; }

 private:
  World(std::shared_ptr<detail::WorldState> state, int rank) : state_(std::move(state)), rank_(rank) {}
  std::shared_ptr<detail::WorldState> state_;
  int rank_ = 0;
};

// Threads backend: runs fn(world) for every rank's World on its own host thread with that rank's device current;
// joins them and rethrows the first exception. Works for any backend (runs fn once for a single World).
void run_per_rank(std::vector<World>& worlds, const std::function<void(World&)>& fn);

// The same number of bytes on every rank; peer_ptr(r) is rank r's copy, valid for loads, stores, atomics and
// TMA on this World's device. Zero-filled when made. Construction and destruction are collective (every rank of a
// threads/MPI World makes and drops its buffers in the same order); the destructor synchronizes the device and
// waits for every rank before freeing, so no peer still reads or writes the memory.
class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  SymmetricBuffer(const World& world, std::size_t bytes);
  ~SymmetricBuffer();
  SymmetricBuffer(SymmetricBuffer&& other) noexcept;
  SymmetricBuffer& operator=(SymmetricBuffer&& other) noexcept;
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;

  std::size_t bytes() const { return bytes_; }            // as requested
  std::size_t allocated_bytes() const { return alloc_; }  // rounded up (16 B, or the cuMem granularity)
  int size() const { return int(ptrs_.size()); }
  void* peer_ptr(int owner_rank) const;
  void* local_ptr() const { return peer_ptr(rank_); }  // loopback: rank 0's copy
  template <typename T>
  T* peer(int owner_rank) const {
    return static_cast<T*>(peer_ptr(owner_rank));
  }
  bool empty() const { return ptrs_.empty(); }

 private:
  void release() noexcept;
  std::shared_ptr<detail::WorldState> state_;
  int rank_ = 0;
  std::size_t bytes_ = 0, alloc_ = 0;
  std::vector<void*> ptrs_;
  // cuMem (MPI backend): one reserved range per peer and the handles mapped into it.
  std::vector<unsigned long long> handles_;
};

}  // namespace ovl
