// World backends (loopback, threads, MPI, NCCL id) and the host-side barrier / all-gather they share.
#include "ovl/core/world.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <thread>

#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/device_buffer.hpp"
#include "world_internal.hpp"

namespace ovl {

namespace detail {

void WorldState::thread_barrier() {
  std::unique_lock lock(mutex);
  OVL_CHECK(!abandoned, "threads World: another rank failed, so this barrier would never complete");
  const unsigned long long gen = generation;
  if (++arrived == size) {
    arrived = 0;
    ++generation;
    cv.notify_all();
  } else {
    cv.wait(lock, [&] { return generation != gen || abandoned; });
    OVL_CHECK(!abandoned, "threads World: another rank failed, so this barrier would never complete");
  }
}

void WorldState::abandon_barriers() {
  std::lock_guard lock(mutex);
  abandoned = true;
  cv.notify_all();
}

std::vector<std::vector<std::byte>> WorldState::nccl_all_gather(int rank, std::span<const std::byte> mine) {
  // NCCL moves device memory: stage the bytes through one buffer of size x bytes, gather in place, copy back.
  const std::size_t bytes = std::max<std::size_t>(mine.size(), 1);
  OVL_CUDA_CHECK(cudaSetDevice(devices[std::size_t(rank)]));
  const DeviceBuffer staging(bytes * std::size_t(size));
  std::byte* buffer = staging.as<std::byte>();
  std::vector<std::byte> flat(bytes * std::size_t(size));
  std::byte* own = buffer + bytes * std::size_t(rank);
  if (!mine.empty()) copy_now(own, mine.data(), mine.size(), cudaMemcpyHostToDevice, host_stream);
  OVL_NCCL_CHECK(ncclAllGather(own, buffer, bytes, ncclChar, host_comm, host_stream));
  copy_now(flat.data(), buffer, flat.size(), cudaMemcpyDeviceToHost, host_stream);
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size));
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto first = flat.begin() + std::ptrdiff_t(r * bytes);
    all[r].assign(first, first + std::ptrdiff_t(mine.size()));
  }
  return all;
}

void WorldState::gather_devices(int rank, int device) {
  const auto all = nccl_all_gather(rank, std::as_bytes(std::span(&device, 1)));
  for (std::size_t r = 0; r < all.size(); ++r) std::memcpy(&devices[r], all[r].data(), sizeof(int));
}

void WorldState::nccl_barrier(int rank) {
  const std::byte token{1};
  (void)nccl_all_gather(rank, std::span(&token, 1));
}

WorldState::~WorldState() {
  if (host_stream != nullptr) {
    const cudaError_t e = cudaStreamDestroy(host_stream);
    if (e != cudaSuccess) std::fprintf(stderr, "ovl: cudaStreamDestroy: %s\n", cudaGetErrorString(e));
  }
  // Finalize every communicator of this process in one group (one thread may own several), then destroy.
  std::vector<ncclComm_t> all;
  if (borrowed_comm) comms.clear();
  for (auto& per_rank : comms)
    for (auto& [bound, comm] : per_rank)
      if (comm != nullptr) all.push_back(comm);
  if (!all.empty()) {
    ncclGroupStart();
    for (ncclComm_t c : all) {
      const ncclResult_t r = ncclCommFinalize(c);
      if (r != ncclSuccess && r != ncclInProgress) std::fprintf(stderr, "ovl: ncclCommFinalize: %s\n", ncclGetErrorString(r));
    }
    ncclGroupEnd();
    for (ncclComm_t c : all) ncclCommDestroy(c);
  }
#if defined(OVL_HAVE_MPI)
  if (mpi_comm != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&mpi_comm);
  }
#endif
}

ncclConfig_t nccl_config(int cta_bound) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.cgaClusterSize = 1;
  if (cta_bound > 0) {
    config.minCTAs = cta_bound;
    config.maxCTAs = cta_bound;
  }
  return config;
}

ncclComm_t one_rank_nccl_comm(int cta_bound) {
  ncclUniqueId id;
  OVL_NCCL_CHECK(ncclGetUniqueId(&id));
  ncclConfig_t config = nccl_config(cta_bound);
  ncclComm_t comm = nullptr;
  OVL_NCCL_CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  return comm;
}

}  // namespace detail

namespace {

std::vector<int> checked_bounds(const WorldOptions& options) {
  std::vector<int> bounds;
  if (!options.create_nccl) return bounds;
  std::set<int> seen;
  for (int b : options.nccl_cta_bounds) {
    OVL_CHECK(b >= 0 && b <= 64 * 1024, "nccl_cta_bounds entry {} is negative or absurd", b);
    if (seen.insert(b).second) bounds.push_back(b);
  }
  return bounds;
}

void check_device(int device) {
  int count = 0;
  OVL_CUDA_CHECK(cudaGetDeviceCount(&count));
  OVL_CHECK(device >= 0 && device < count, "device {} does not exist ({} CUDA devices)", device, count);
}

}  // namespace

World World::loopback(int ranks, int device, const WorldOptions& options) {
  OVL_CHECK(ranks >= 1 && ranks <= 8, "loopback world of {} ranks: ranks must be 1..8", ranks);
  check_device(device);
  auto state = std::make_shared<detail::WorldState>();
  state->backend = Backend::kLoopback;
  state->size = ranks;
  state->devices.assign(ranks, device);
  state->comms.resize(1);
  // NCCL needs distinct GPUs: a loopback world of one rank gets a one-rank communicator, larger ones none.
  if (ranks == 1) {
    state->cta_bounds = checked_bounds(options);
    OVL_CUDA_CHECK(cudaSetDevice(device));
    for (int bound : state->cta_bounds) state->comms[0][bound] = detail::one_rank_nccl_comm(bound);
  }
  return World(std::move(state), 0);
}

std::vector<World> World::threads(const std::vector<int>& devices, const WorldOptions& options) {
  const int n = int(devices.size());
  OVL_CHECK(n >= 1 && n <= 8, "threads world of {} devices: needs 1..8", n);
  std::set<int> distinct(devices.begin(), devices.end());
  OVL_CHECK(int(distinct.size()) == n, "threads world: devices {} are not distinct (use a loopback world)", fmt::join(devices, ","));
  for (int d : devices) check_device(d);
  auto state = std::make_shared<detail::WorldState>();
  state->backend = Backend::kThreads;
  state->size = n;
  state->devices = devices;
  state->comms.resize(n);
  state->slots.resize(n);
  state->cta_bounds = checked_bounds(options);

  // Peer access between every pair (loads, stores, atomics and TMA on cudaMalloc'ed peer memory).
  for (int i = 0; i < n; ++i) {
    OVL_CUDA_CHECK(cudaSetDevice(devices[i]));
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      OVL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, devices[i], devices[j]));
      OVL_CHECK(can != 0, "device {} cannot access device {} as a peer", devices[i], devices[j]);
      const cudaError_t err = cudaDeviceEnablePeerAccess(devices[j], 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      else OVL_CUDA_CHECK(err);
    }
  }
  // One communicator per CTA bound: one unique id, then a group of ncclCommInitRankConfig, one per device.
  for (int bound : state->cta_bounds) {
    ncclUniqueId id;
    OVL_NCCL_CHECK(ncclGetUniqueId(&id));
    std::vector<ncclComm_t> comms(n, nullptr);
    ncclConfig_t config = detail::nccl_config(bound);
    detail::NcclGroup group;
    for (int i = 0; i < n; ++i) {
      OVL_CUDA_CHECK(cudaSetDevice(devices[i]));
      OVL_NCCL_CHECK(ncclCommInitRankConfig(&comms[i], n, id, i, &config));
    }
    group.end();
    for (int i = 0; i < n; ++i) state->comms[i][bound] = comms[i];
  }
  OVL_CUDA_CHECK(cudaSetDevice(devices[0]));
  std::vector<World> worlds;
  for (int i = 0; i < n; ++i) worlds.push_back(World(state, i));
  return worlds;
}

#if defined(OVL_HAVE_MPI)
World World::mpi(MPI_Comm comm, const WorldOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  OVL_CHECK(initialized != 0, "World::mpi: MPI is not initialized (call MPI_Init first)");
  auto state = std::make_shared<detail::WorldState>();
  state->backend = Backend::kMpi;
  MPI_Comm_dup(comm, &state->mpi_comm);
  MPI_Comm_rank(state->mpi_comm, &state->mpi_rank);
  MPI_Comm_size(state->mpi_comm, &state->size);
  const int me = state->mpi_rank, n = state->size;
  OVL_CHECK(n >= 1 && n <= 8, "MPI world of {} ranks: ovl supports 1..8 ranks", n);
  MPI_Comm local;
  MPI_Comm_split_type(state->mpi_comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int count = 0;
  OVL_CUDA_CHECK(cudaGetDeviceCount(&count));
  OVL_CHECK(count > 0, "MPI rank {}: no CUDA device", me);
  const int device = local_rank % count;
  std::vector<int> devices(n);
  MPI_Allgather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, state->mpi_comm);
  state->devices = devices;
  state->comms.resize(n);
  state->cta_bounds = checked_bounds(options);
  OVL_CUDA_CHECK(cudaSetDevice(device));
  for (int bound : state->cta_bounds) {
    ncclUniqueId id;
    if (me == 0) OVL_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, state->mpi_comm);
    ncclConfig_t config = detail::nccl_config(bound);
    ncclComm_t c = nullptr;
    OVL_NCCL_CHECK(ncclCommInitRankConfig(&c, n, id, me, &config));
    state->comms[me][bound] = c;
  }
  return World(std::move(state), me);
}
#endif

std::vector<std::byte> World::new_nccl_id() {
  ncclUniqueId id;
  OVL_NCCL_CHECK(ncclGetUniqueId(&id));
  const auto* bytes = reinterpret_cast<const std::byte*>(&id);
  return std::vector<std::byte>(bytes, bytes + sizeof(id));
}

World World::from_nccl_id(std::span<const std::byte> id, int rank, int size, int device, const WorldOptions& options) {
  OVL_CHECK(id.size() == sizeof(ncclUniqueId), "World::from_nccl_id: the id has {} bytes, an NCCL unique id has {}",
            id.size(), sizeof(ncclUniqueId));
  OVL_CHECK(size >= 1 && size <= 8, "World::from_nccl_id: world of {} ranks: ovl supports 1..8 ranks", size);
  OVL_CHECK(rank >= 0 && rank < size, "World::from_nccl_id: rank {} is not in [0, {})", rank, size);
  check_device(device);
  auto state = std::make_shared<detail::WorldState>();
  state->backend = Backend::kNccl;
  state->size = size;
  state->devices.assign(std::size_t(size), device);
  state->comms.resize(std::size_t(size));
  state->cta_bounds = checked_bounds(options);
  // The first bound's communicator also carries the host-side collectives, so there must be one.
  OVL_CHECK(!state->cta_bounds.empty(),
            "World::from_nccl_id: needs an NCCL communicator (WorldOptions::create_nccl is false or no CTA bounds)");
  OVL_CUDA_CHECK(cudaSetDevice(device));
  OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&state->host_stream, cudaStreamNonBlocking));
  ncclUniqueId first;
  std::memcpy(&first, id.data(), sizeof(first));
  for (std::size_t i = 0; i < state->cta_bounds.size(); ++i) {
    const int bound = state->cta_bounds[i];
    ncclUniqueId uid = first;
    if (i > 0) {
      // Further communicators: rank 0 makes each id and sends it over the first communicator.
      if (rank == 0) OVL_NCCL_CHECK(ncclGetUniqueId(&uid));
      uid = *reinterpret_cast<const ncclUniqueId*>(
          state->nccl_all_gather(rank, std::as_bytes(std::span(&uid, 1)))[0].data());
    }
    ncclConfig_t config = detail::nccl_config(bound);
    ncclComm_t c = nullptr;
    OVL_NCCL_CHECK(ncclCommInitRankConfig(&c, size, uid, rank, &config));
    state->comms[std::size_t(rank)][bound] = c;
    if (i == 0) state->host_comm = c;
  }
  state->gather_devices(rank, device);
  return World(std::move(state), rank);
}

World World::from_nccl_comm(ncclComm_t comm) {
  OVL_CHECK(comm != nullptr, "World::from_nccl_comm: the communicator is null");
  int rank = 0, size = 0, device = 0;
  OVL_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  OVL_NCCL_CHECK(ncclCommCount(comm, &size));
  OVL_NCCL_CHECK(ncclCommCuDevice(comm, &device));
  OVL_CHECK(size >= 1 && size <= 8, "World::from_nccl_comm: world of {} ranks: ovl supports 1..8 ranks", size);
  auto state = std::make_shared<detail::WorldState>();
  state->backend = Backend::kNccl;
  state->size = size;
  state->devices.assign(std::size_t(size), device);
  state->comms.resize(std::size_t(size));
  state->cta_bounds = {0};
  state->comms[std::size_t(rank)][0] = comm;
  state->host_comm = comm;
  state->borrowed_comm = true;
  OVL_CUDA_CHECK(cudaSetDevice(device));
  OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&state->host_stream, cudaStreamNonBlocking));
  state->gather_devices(rank, device);
  return World(std::move(state), rank);
}

int World::size() const { return state_ ? state_->size : 0; }
int World::device() const {
  OVL_CHECK(state_ != nullptr, "empty World");
  return state_->devices[rank_];
}
World::Backend World::backend() const {
  OVL_CHECK(state_ != nullptr, "empty World");
  return state_->backend;
}
int World::num_local_ranks() const { return is_loopback() ? size() : 1; }
const std::vector<int>& World::nccl_cta_bounds() const {
  OVL_CHECK(state_ != nullptr, "empty World");
  return state_->cta_bounds;
}

ncclComm_t World::nccl_comm(int cta_bound) const {
  OVL_CHECK(state_ != nullptr, "empty World");
  if (is_loopback() && size() > 1) return nullptr;
  const auto& per_rank = state_->comms[is_loopback() ? 0 : rank_];
  const auto it = per_rank.find(cta_bound);
  OVL_CHECK(it != per_rank.end(), "no NCCL communicator for CTA bound {} (made for: {}); list it in WorldOptions::nccl_cta_bounds",
            cta_bound, fmt::join(state_->cta_bounds, ","));
  return it->second;
}

void World::barrier() const {
  OVL_CHECK(state_ != nullptr, "empty World");
  switch (state_->backend) {
    case Backend::kLoopback: return;
    case Backend::kThreads: state_->thread_barrier(); return;
    case Backend::kMpi:
#if defined(OVL_HAVE_MPI)
      MPI_Barrier(state_->mpi_comm);
#endif
      return;
    case Backend::kNccl: state_->nccl_barrier(rank_); return;
  }
}

std::vector<std::vector<std::byte>> World::all_gather(std::span<const std::byte> mine) const {
  OVL_CHECK(state_ != nullptr, "empty World");
  const int n = size();
  std::vector<std::vector<std::byte>> all(n);
  switch (state_->backend) {
    case Backend::kLoopback:
      for (auto& v : all) v.assign(mine.begin(), mine.end());
      break;
    case Backend::kThreads:
      state_->slots[rank_].assign(mine.begin(), mine.end());
      state_->thread_barrier();
      all = state_->slots;
      state_->thread_barrier();  // nobody overwrites a slot before everyone has read it
      break;
    case Backend::kMpi: {
#if defined(OVL_HAVE_MPI)
      const int bytes = int(mine.size());
      std::vector<std::byte> flat(std::size_t(bytes) * n);
      MPI_Allgather(mine.data(), bytes, MPI_BYTE, flat.data(), bytes, MPI_BYTE, state_->mpi_comm);
      for (int r = 0; r < n; ++r) all[r].assign(flat.begin() + std::ptrdiff_t(r) * bytes, flat.begin() + std::ptrdiff_t(r + 1) * bytes);
#endif
      break;
    }
    case Backend::kNccl: all = state_->nccl_all_gather(rank_, mine); break;
  }
  return all;
}

void run_per_rank(std::vector<World>& worlds, const std::function<void(World&)>& fn) {
  if (worlds.size() == 1) {
    OVL_CUDA_CHECK(cudaSetDevice(worlds[0].device()));
    fn(worlds[0]);
    return;
  }
  std::vector<std::exception_ptr> errors(worlds.size());
  std::atomic<int> first_failure{-1};
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < worlds.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        OVL_CUDA_CHECK(cudaSetDevice(worlds[i].device()));
        fn(worlds[i]);
      } catch (...) {
        errors[i] = std::current_exception();
        int none = -1;
        first_failure.compare_exchange_strong(none, int(i));
        // The other ranks may be waiting for this one in a barrier: release them (they throw) instead of hanging.
        if (worlds[i].state()) worlds[i].state()->abandon_barriers();
      }
    });
  }
  for (auto& t : threads) t.join();
  // The first failure is the cause; later ones are usually "another rank failed" from abandoned barriers.
  if (first_failure >= 0) std::rethrow_exception(errors[size_t(first_failure.load())]);
}

}  // namespace ovl
