// Private state of a World (shared by the World handles of one threads backend) and the cuMem helpers of the
// MPI backend. Not installed.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "ovl/core/world.hpp"

namespace ovl::detail {

// The configuration of every NCCL communicator ovl makes (a World's, the nccl-symmetric ones split off it, a Context's
// own for a world of one): blocking; cta_bound > 0: minCTAs = maxCTAs = cta_bound. cgaClusterSize = 1: NCCL launches
// its CTAs one by one, not in clusters of 4 (its default on Hopper). A cluster is placed on SMs of one GPC all at
// once, and beside a GEMM whose persistent CTAs hold all SMs but a few, no GPC has 4 free: the collective then waited
// for the GEMM's end (the 2-H200 runs of tile-signal on 8 and 16 comm SMs overlapped nothing, docs/overlap.md).
// NCCL_CGA_CLUSTER_SIZE in the environment overrides it (NCCL's rule).
ncclConfig_t nccl_config(int cta_bound);
// A communicator of one rank on the current device, made with nccl_config(cta_bound).
ncclComm_t one_rank_nccl_comm(int cta_bound);

struct WorldState {
  World::Backend backend = World::Backend::kLoopback;
  int size = 1;
  std::vector<int> devices;                    // per rank
  std::vector<std::map<int, ncclComm_t>> comms;  // per rank: CTA bound -> communicator (ranks of this process)
  std::vector<int> cta_bounds;

  // threads backend: a reusable barrier and the slots of all_gather.
  std::mutex mutex;
  std::condition_variable cv;
  int arrived = 0;
  unsigned long long generation = 0;
  bool abandoned = false;  // a rank's thread failed: barriers throw instead of waiting for it forever
  std::vector<std::vector<std::byte>> slots;

#if defined(OVL_HAVE_MPI)
  MPI_Comm mpi_comm = MPI_COMM_NULL;
  int mpi_rank = 0;
#endif
  // nccl backend: the communicator and stream of the host-side barrier and all-gather.
  ncclComm_t host_comm = nullptr;
  cudaStream_t host_stream = nullptr;
  bool borrowed_comm = false;  // World::from_nccl_comm: the caller's communicator, not destroyed here

  void thread_barrier();
  // nccl backend: the host-side collectives over host_comm (`rank` is the caller's), synchronous.
  std::vector<std::vector<std::byte>> nccl_all_gather(int rank, std::span<const std::byte> mine);
  void nccl_barrier(int rank);
  // nccl backend: every rank's device into `devices` (symmetric buffers map them; SymmetricBuffer::release reads its
  // own), over host_comm.
  void gather_devices(int rank, int device);
  void abandon_barriers();
  ~WorldState();
};


// Sends `my_fd` to every other rank of a multi-process World (mpi, nccl) and returns the descriptors received
// (index = rank; mine at my rank), over abstract Unix datagram sockets with SCM_RIGHTS (works under any ptrace
// policy, unlike pidfd_getfd). All ranks must be on one host. Collective over the World (its barrier and all-gather).
std::vector<int> exchange_fds(const World& world, int my_fd);

}  // namespace ovl::detail
