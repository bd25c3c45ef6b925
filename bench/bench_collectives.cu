// Collective bandwidth: NCCL, NCCL's symmetric kernels, TMA push-reduce, TMA pull-reduce and the SIMT comparison
// kernel, plus local copies.
//
//   coll/<algo>/<op>/<bytes>/world:<W>/ctas:<c>   algo nccl|tma-push|tma-pull|simt (a real world also nccl-symmetric,
//                                                 below), op allreduce|reducescatter|allgather; a real world also
//                                                 coll/nccl/<reduce|broadcast>/...: ncclReduce / ncclBroadcast to
//                                                 root 0 of a <bytes> message (busbw = algbw), the calls a real
//                                                 world runs per owner for a GEMM+RS / AG+GEMM unit short of the
//                                                 buffer
//   copy/<impl>/<bytes>/ctas:<c>                  impl tma (the TMA ring: thread 0 loads, thread 32 stores, pieces
//                                                 dealt round-robin), tma-slices (the same, a contiguous slice per
//                                                 CTA), simt, simt-slices (512-thread SIMT copy, grid-stride or
//                                                 slices), plus
//   copy/memcpy/<bytes>                           cudaMemcpyAsync device to device (the device's copy bandwidth)
//   ring/<copy|reduce>/<bytes>/ring:<S>x<KiB>/ctas:<c>  the TMA ring (round-robin) at S stages of KiB: copy
//                                                 or bf16 reduce-add (cp.reduce.async.bulk) into the destination
// <bytes> is the full buffer as in nccl-tests: the AllReduce buffer, the ReduceScatter input, the AllGather output.
// Counters: algbw_GBps = bytes / time, busbw_GBps = algbw * 2(n-1)/n (AllReduce) or (n-1)/n (RS, AG); wrong =
// elements differing from the exact expected value (checked once per case, outside the timed loop: inputs are small
// integers, so every sum is exact in bf16). Copies: GBps = bytes read + written per second, GBps_per_cta.
// Loopback worlds play every rank on one GPU: all ranks' traffic shares one HBM, so busbw there is a measure of the
// kernel, not of NVLink. NCCL cases need a World of distinct GPUs and are skipped in loopback.
// OVL_BENCH_WORLD=threads runs the coll/ cases on a real World instead: every visible GPU, one host thread per rank
// (World::threads; world:<W> is the GPU count, only that size is registered). OVL_BENCH_WORLD=mpi does the same with
// a process per rank (World::mpi over MPI_COMM_WORLD, e.g. `mpirun -np 8 bench_collectives ...`; a build with MPI):
// every process runs every case for a fixed 10 iterations, times and wrong counts are gathered over the ranks, and
// rank 0 alone writes the console and the JSON. NCCL's ctas:<c> is its communicator
// with minCTAs = maxCTAs = c, and ctas:0 NCCL's own choice. nccl-symmetric (comm_algo nccl-symmetric; real worlds
// only): NCCL's symmetric kernels between buffers from ncclMemAlloc registered as symmetric windows
// (ovl/core/nccl_symmetric.hpp), on a communicator split off the World's with CTA policy efficiency and minCTAs =
// maxCTAs = c; its ctas:0 (allgather only) is CTA policy zero: NCCL's copy engines, no CTA. A case whose NCCL, driver
// or environment refuses it reports why (nccl_symmetric_refusal) as its error.
// Each timed iteration is a block: all ranks meet at a host barrier, run one untimed call (it lines the ranks up on the
// device), then `reps` calls between CUDA events on each rank; the iteration's time is the slowest rank's block /
// reps. wrong sums every rank's own output check. The JSON context says world_backend = loopback, threads or mpi.
// bf16 throughout. Run a short subset with --benchmark_filter, e.g. 'coll/tma-push/allreduce/16777216/world:8/.*'.
// OVL_BENCH_PULL_WARPS=<n> sets tma-pull's summing warps (CollectiveOptions::pull_warps, default 4) for sweeps; the
// tma-pull cases report it as the counter pull_warps.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ovl/core/collectives.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/core/nccl_symmetric.hpp"
#include "ovl/core/world.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/kernels/collectives.hpp"

namespace {

using ovl::CommAlgo;
using ovl::Collective;

// OVL_BENCH_PULL_WARPS, else the library's default.
int pull_warps() {
  static const int warps = ovl::bench::env_int("OVL_BENCH_PULL_WARPS", 1, 8, ovl::CollectiveOptions{}.pull_warps);
  return warps;
}

// Input of rank p at element i: a small integer, so sums of up to 8 ranks are exact in bf16.
__device__ __forceinline__ float input_value(std::uint64_t i, int p) { return float(int((i * 7 + std::uint64_t(p) * 3) % 17) - 8); }

__global__ void fill_kernel(__nv_bfloat16* x, std::uint64_t n, int p) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n; i += std::uint64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(input_value(i, p));
}

// Counts elements of rank r's output that differ from the exact result.
__global__ void check_kernel(const __nv_bfloat16* out, std::uint64_t n, int op, int r, int world, std::uint64_t chunk,
                             unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n; i += std::uint64_t(gridDim.x) * blockDim.x) {
    float want = 0;
    if (op == int(Collective::kAllGather)) {
      want = input_value(i % chunk, int(i / chunk));
    } else {
      const std::uint64_t j = op == int(Collective::kReduceScatter) ? r * chunk + i : i;
      for (int p = 0; p < world; ++p) want += input_value(j, p);
    }
    if (__bfloat162float(out[i]) != want) ++bad;
  }
  if (bad) atomicAdd(wrong, bad);
}

// One loopback world per size, with its Collectives and the largest buffers asked for so far.
struct WorldSlot {
  ovl::World world;
  std::unique_ptr<ovl::Collectives> coll;
  ovl::SymmetricBuffer send, recv;
};
WorldSlot& world_slot(int n, std::size_t send_bytes, std::size_t recv_bytes) {
  // Never freed: destroying buffers after the CUDA runtime has shut down at exit would only log errors.
  static auto& slots = *new std::map<int, WorldSlot>();
  auto it = slots.find(n);
  if (it == slots.end()) {
    ovl::WorldOptions options;
    options.create_nccl = false;
    WorldSlot s;
    s.world = ovl::World::loopback(n, 0, options);
    s.coll = std::make_unique<ovl::Collectives>(s.world);
    it = slots.emplace(n, std::move(s)).first;
  }
  WorldSlot& s = it->second;
  if (s.send.bytes() < send_bytes) {
    s.send = ovl::SymmetricBuffer();
    s.send = ovl::SymmetricBuffer(s.world, send_bytes);
  }
  if (s.recv.bytes() < recv_bytes) {
    s.recv = ovl::SymmetricBuffer();
    s.recv = ovl::SymmetricBuffer(s.world, recv_bytes);
  }
  return s;
}

using ovl::bench::real_world;
bool mpi_world() { return ovl::bench::world_kind() == ovl::bench::WorldKind::kMpi; }

// NCCL communicators per CTA bound (0: NCCL's own choice), the ctas:<c> of the nccl cases.
const std::vector<int>& nccl_bounds() {
  static const std::vector<int> bounds{0, 1, 2, 4, 8, 16, 32};
  return bounds;
}

// Timed iterations of a case in an MPI world (fixed: Google Benchmark's own choice could differ between processes).
constexpr int kMpiIterations = 10;

#if defined(OVL_HAVE_MPI)
// OVL_BENCH_WORLD=mpi: MPI is initialized first thing in main (so every rank registers the same cases).
int mpi_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}
int mpi_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}
#endif

// The ranks of the real world: every visible GPU (threads) or every process of mpirun (mpi).
int real_world_size() {
#if defined(OVL_HAVE_MPI)
  if (mpi_world()) return mpi_size();
#endif
  return ovl::bench::visible_gpus(ovl::kernels::kMaxRanks);
}

// The ranks this process drives (threads: all of them, on their own host threads; mpi: its own): per local rank its
// World, Collectives, stream, events and buffers (made once, grown collectively, never freed, like the loopback
// slots). Vectors are indexed by the local rank, local(world).
// nccl-symmetric's per local rank: a communicator per ctas:<c> (0: CTA policy zero), split off the World's first one
// when a case first needs it, and a send and a receive buffer registered as symmetric windows of each communicator a
// case ran on (grown like the other buffers, collectively).
struct SymmetricSlot {
  std::map<int, std::unique_ptr<ovl::NcclSymmetricComm>> comms;
  std::unique_ptr<ovl::NcclSymmetricBuffer> send, recv;
};

struct RealWorld {
  std::vector<ovl::World> worlds;
  std::vector<std::unique_ptr<ovl::Collectives>> coll;
  std::vector<ovl::SymmetricBuffer> send, recv;
  std::vector<SymmetricSlot> symmetric;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> start, stop;
  std::vector<double> ms;                  // each local rank's last block
  std::vector<ovl::DeviceBuffer> wrong;    // each local rank's count of wrong elements (one unsigned long long)
  std::size_t local(const ovl::World& world) const { return std::size_t(&world - worlds.data()); }
  int size() const { return worlds.front().size(); }
  // The maximum (or sum) of `values` (one per local rank) over every rank of the world: an MPI all-gather, else the
  // local ranks are all of them.
  double across_ranks(const std::vector<double>& values, bool max) const {
    std::vector<double> all = values;
    if (worlds.front().backend() == ovl::World::Backend::kMpi) {
      all.clear();
      for (const auto& bytes : worlds.front().all_gather(std::as_bytes(std::span<const double>(values)))) {
        double v = 0;
        std::memcpy(&v, bytes.data(), sizeof(v));
        all.push_back(v);
      }
    }
    return max ? *std::max_element(all.begin(), all.end()) : std::accumulate(all.begin(), all.end(), 0.0);
  }
};
RealWorld& real_world_slot(std::size_t send_bytes, std::size_t recv_bytes) {
  static RealWorld& w = *[] {
    ovl::WorldOptions options;
    options.nccl_cta_bounds = nccl_bounds();
    auto* rw = new RealWorld();
#if defined(OVL_HAVE_MPI)
    // NCCL refuses two ranks on one GPU: with more processes than GPUs (a test on one machine) no NCCL, and the nccl
    // cases report that as their error.
    if (mpi_world()) {
      options.create_nccl = mpi_size() <= ovl::bench::visible_gpus(ovl::kernels::kMaxRanks);
      rw->worlds.push_back(ovl::World::mpi(MPI_COMM_WORLD, options));
    }
#endif
    if (rw->worlds.empty()) {
      rw->worlds = ovl::World::threads(ovl::bench::visible_gpu_ids(ovl::kernels::kMaxRanks), options);
    }
    const std::size_t n = rw->worlds.size();
    rw->coll.resize(n);
    rw->send.resize(n);
    rw->recv.resize(n);
    rw->symmetric.resize(n);
    rw->streams.resize(n);
    rw->start.resize(n);
    rw->stop.resize(n);
    rw->ms.resize(n);
    rw->wrong.resize(n);
    ovl::run_per_rank(rw->worlds, [&](ovl::World& world) {
      const std::size_t i = rw->local(world);
      rw->coll[i] = std::make_unique<ovl::Collectives>(world);
      OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&rw->streams[i], cudaStreamNonBlocking));
      OVL_CUDA_CHECK(cudaEventCreate(&rw->start[i]));
      OVL_CUDA_CHECK(cudaEventCreate(&rw->stop[i]));
      rw->wrong[i] = ovl::DeviceBuffer(sizeof(unsigned long long));
    });
    return rw;
  }();
  if (w.send[0].bytes() < send_bytes || w.recv[0].bytes() < recv_bytes) {
    ovl::run_per_rank(w.worlds, [&](ovl::World& world) {  // collective: every rank grows the same buffers
      const std::size_t i = w.local(world);
      if (w.send[i].bytes() < send_bytes) {
        w.send[i] = ovl::SymmetricBuffer();
        w.send[i] = ovl::SymmetricBuffer(world, send_bytes);
      }
      if (w.recv[i].bytes() < recv_bytes) {
        w.recv[i] = ovl::SymmetricBuffer();
        w.recv[i] = ovl::SymmetricBuffer(world, recv_bytes);
      }
    });
  }
  return w;
}

cudaStream_t bench_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s;
    OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

// Bytes the kernel reads plus writes in one call, all ranks together (loopback: all on one GPU), with
// c = bytes / n the per-owner chunk, out of place. A bulk reduce counts a read of the source, plus a read and a
// write of the destination. This is the per-CTA data movement to set beside the plain copy's GB/s per CTA.
double moved_bytes(CommAlgo algo, Collective op, double bytes, int n) {
  const double c = bytes / n;
  const bool push = algo == CommAlgo::kTmaPush;
  double per_rank = 0;
  const bool rs = op != Collective::kAllGather, ag = op != Collective::kReduceScatter;
  if (rs) per_rank += push ? 2 * c + 3 * (n - 1) * c  // own copy, then n-1 bulk reduces
                           : (n + 1) * c;            // read n chunks, write the sum
  if (ag) {
    if (op == Collective::kAllGather) per_rank += 2 * c;  // own copy into the output
    per_rank += push ? n * c                                // read mine once, write it to n-1 peers
                     : 2 * (n - 1) * c;                     // read and write each of the n-1 other chunks
  }
  return per_rank * n;
}

// The buffers of one collective of op on `bytes` of bf16 over n ranks (bytes as in nccl-tests: the AllReduce buffer,
// the ReduceScatter input, the AllGather output): chunk = one rank's part in elements (RS: the recv count, AG: the
// send count), and each rank's send and recv sizes.
struct CollSizes {
  std::size_t chunk, send_bytes, recv_bytes;
  std::size_t in_elems() const { return send_bytes / 2; }
  std::size_t out_elems() const { return recv_bytes / 2; }
};
CollSizes coll_sizes(Collective op, std::size_t bytes, int n) {
  const std::size_t chunk = bytes / 2 / std::size_t(n);
  return {chunk, op == Collective::kAllGather ? chunk * 2 : bytes,
          op == Collective::kReduceScatter ? chunk * 2 : bytes};
}

// One collective call of op on `bytes` of bf16 over n ranks (bytes as in nccl-tests: the AllReduce buffer, the
// ReduceScatter input, the AllGather output).
void call_collective(ovl::Collectives& coll, Collective op, const ovl::SymmetricBuffer& send,
                     const ovl::SymmetricBuffer& recv, std::size_t bytes, int n, CommAlgo algo,
                     const ovl::CollectiveOptions& opt, cudaStream_t stream) {
  const std::size_t elems = bytes / 2, chunk = coll_sizes(op, bytes, n).chunk;
  switch (op) {
    case Collective::kAllReduce: coll.all_reduce(send, recv, elems, ovl::DType::kBF16, algo, opt, stream); break;
    case Collective::kReduceScatter: coll.reduce_scatter(send, recv, chunk, ovl::DType::kBF16, algo, opt, stream); break;
    case Collective::kAllGather: coll.all_gather(send, recv, chunk, ovl::DType::kBF16, algo, opt, stream); break;
  }
}

// One collective of op on `bytes` of bf16 over n ranks between NCCL windows (nccl-symmetric), as call_collective.
void call_nccl_symmetric(Collective op, const void* send, void* recv, std::size_t bytes, int n, ncclComm_t comm,
                         cudaStream_t stream) {
  const std::size_t elems = bytes / 2, chunk = coll_sizes(op, bytes, n).chunk;
  switch (op) {
    case Collective::kAllReduce:
      OVL_NCCL_CHECK(ncclAllReduce(send, recv, elems, ncclBfloat16, ncclSum, comm, stream));
      break;
    case Collective::kReduceScatter:
      OVL_NCCL_CHECK(ncclReduceScatter(send, recv, chunk, ncclBfloat16, ncclSum, comm, stream));
      break;
    case Collective::kAllGather:
      OVL_NCCL_CHECK(ncclAllGather(send, recv, chunk, ncclBfloat16, comm, stream));
      break;
  }
}

// nccl-symmetric's communicator of ctas:<c> and its windows of at least these sizes on local rank i: made, grown and
// registered on first use (collective: every rank calls it for the same case).
ncclComm_t symmetric_slot(RealWorld& w, const ovl::World& world, int ctas, std::size_t send_bytes,
                          std::size_t recv_bytes) {
  SymmetricSlot& s = w.symmetric[w.local(world)];
  const ovl::CtaPolicy policy = ctas == 0 ? ovl::CtaPolicy::kZero : ovl::CtaPolicy::kEfficiency;
  OVL_CHECK(!world.nccl_cta_bounds().empty(), "nccl-symmetric: the World has no NCCL communicator (ranks share GPUs)");
  auto it = s.comms.find(ctas);
  if (it == s.comms.end()) {
    // Policy zero moves an AllGather on the copy engines; its CTA bound is the largest case's (unused there).
    const int bound = ctas == 0 ? nccl_bounds().back() : ctas;
    auto comm =
        std::make_unique<ovl::NcclSymmetricComm>(world.nccl_comm(world.nccl_cta_bounds().front()), policy, bound);
    it = s.comms.emplace(ctas, std::move(comm)).first;
  }
  if (!s.send || s.send->bytes() < send_bytes) {
    s.send.reset();
    s.send = std::make_unique<ovl::NcclSymmetricBuffer>(world, send_bytes);
  }
  if (!s.recv || s.recv->bytes() < recv_bytes) {
    s.recv.reset();
    s.recv = std::make_unique<ovl::NcclSymmetricBuffer>(world, recv_bytes);
  }
  s.send->register_on(it->second->get());
  s.recv->register_on(it->second->get());
  return it->second->get();
}

// The counters every coll/ case reports (see the file comment).
void set_collective_counters(benchmark::State& state, CommAlgo algo, Collective op, std::size_t bytes, int n,
                             int ctas, double wrong, const ovl::CollectiveOptions& opt) {
  using benchmark::Counter;
  const double factor = op == Collective::kAllReduce ? 2.0 * (n - 1) / n : double(n - 1) / n;
  state.counters["algbw_GBps"] = Counter(double(bytes) * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["busbw_GBps"] = Counter(double(bytes) * 1e-9 * factor, Counter::kIsIterationInvariantRate);
  state.counters["wrong"] = wrong;
  state.counters["ctas"] = ctas;
  state.counters["world"] = n;
  if (algo == CommAlgo::kTmaPull) state.counters["pull_warps"] = opt.pull_warps;
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(bytes));
}

void bench_collective(benchmark::State& state, CommAlgo algo, Collective op, std::size_t bytes, int n, int ctas) {
  if (algo == CommAlgo::kNcclRing) {
    state.SkipWithError("NCCL needs distinct GPUs: loopback world (run with a threads/MPI world of real GPUs)");
    return;
  }
  try {
    const CollSizes z = coll_sizes(op, bytes, n);
    const std::size_t chunk = z.chunk, recv_bytes = z.recv_bytes, in_elems = z.in_elems(), out_elems = z.out_elems();
    WorldSlot& s = world_slot(n, z.send_bytes, recv_bytes);
    cudaStream_t stream = bench_stream();
    for (int p = 0; p < n; ++p) fill_kernel<<<1024, 256, 0, stream>>>(s.send.peer<__nv_bfloat16>(p), in_elems, p);
    for (int p = 0; p < n; ++p) OVL_CUDA_CHECK(cudaMemsetAsync(s.recv.peer_ptr(p), 0xff, recv_bytes, stream));
    ovl::CollectiveOptions opt;
    opt.num_ctas = ctas;
    opt.simt_threads = 512;
    opt.pull_warps = pull_warps();
    auto run = [&] { call_collective(*s.coll, op, s.send, s.recv, bytes, n, algo, opt, stream); };
    run();  // warm-up and the one checked run
    s.coll->check(stream);
    unsigned long long* wrong = nullptr;
    OVL_CUDA_CHECK(cudaMallocManaged(&wrong, sizeof(*wrong)));
    *wrong = 0;
    for (int p = 0; p < n; ++p)
      check_kernel<<<1024, 256, 0, stream>>>(s.recv.peer<const __nv_bfloat16>(p), out_elems, int(op), p, n, chunk, wrong);
    OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double wrong_count = double(*wrong);
    cudaFree(wrong);
    for (auto _ : state) {
      ovl::bench::CudaEventTimer timer(state, stream);
      run();
    }
    s.coll->check(stream);
    set_collective_counters(state, algo, op, bytes, n, ctas, wrong_count, opt);
    const double moved = moved_bytes(algo, op, double(bytes), n);
    state.counters["moved_GBps"] = benchmark::Counter(moved * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["moved_GBps_per_cta"] = benchmark::Counter(moved * 1e-9 / ctas, benchmark::Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The timed loop of a coll/ case on the real World (see the file comment): per iteration, every rank's block of
// `reps` calls of call(local rank) after an untimed one, the slowest rank's block / reps; `check` runs the rank's
// Collectives::check after each block (our kernels' timed waits). Returns reps.
int time_real_calls(benchmark::State& state, RealWorld& w, std::size_t bytes,
                    const std::function<void(std::size_t)>& call, bool check) {
  const int reps = bytes >= (std::size_t(256) << 20) ? 2 : bytes >= (std::size_t(16) << 20) ? 5 : 20;
  for (auto _ : state) {
    ovl::run_per_rank(w.worlds, [&](ovl::World& world) {
      const std::size_t i = w.local(world);
      cudaStream_t stream = w.streams[i];
      world.barrier();
      call(i);  // lines the ranks up: the timed calls start when every rank has finished this one
      OVL_CUDA_CHECK(cudaEventRecord(w.start[i], stream));
      for (int k = 0; k < reps; ++k) call(i);
      OVL_CUDA_CHECK(cudaEventRecord(w.stop[i], stream));
      if (check) w.coll[i]->check(stream);
      OVL_CUDA_CHECK(cudaEventSynchronize(w.stop[i]));
      float ms = 0;
      OVL_CUDA_CHECK(cudaEventElapsedTime(&ms, w.start[i], w.stop[i]));
      w.ms[i] = ms;
    });
    state.SetIterationTime(w.across_ranks(w.ms, true) * 1e-3 / reps);
  }
  return reps;
}

// The rooted NCCL calls a real world's executor runs for a GEMM+RS or AG+GEMM unit short of the whole buffer, one per
// owner: ncclReduce (sum) and ncclBroadcast, root 0, on `bytes` of bf16 (the message: every rank's input of a Reduce,
// the root's buffer of a Broadcast), NCCL bounded to `ctas` CTAs (0: its own choice). busbw = algbw = bytes / time
// (nccl-tests' rule for both: the root's link carries every byte once). wrong: the root's sum of every rank's input
// (Reduce), every rank's copy of the root's (Broadcast).
void bench_nccl_rooted_real(benchmark::State& state, bool reduce, std::size_t bytes, int ctas) {
  try {
    RealWorld& w = real_world_slot(0, 0);
    const int n = w.size();
    real_world_slot(bytes, bytes);
    const std::size_t elems = bytes / 2;
    auto call = [&](std::size_t i) {
      const ovl::World& world = w.worlds[i];
      ncclComm_t comm = world.nccl_comm(ctas);
      if (reduce) {
        OVL_NCCL_CHECK(ncclReduce(w.send[i].local_ptr(), w.recv[i].local_ptr(), elems, ncclBfloat16, ncclSum, 0, comm,
                                  w.streams[i]));
      } else {
        OVL_NCCL_CHECK(
            ncclBroadcast(w.send[i].local_ptr(), w.recv[i].local_ptr(), elems, ncclBfloat16, 0, comm, w.streams[i]));
      }
    };
    std::vector<double> wrong(w.worlds.size(), 0.0);
    ovl::run_per_rank(w.worlds, [&](ovl::World& world) {
      const int r = world.rank();
      const std::size_t i = w.local(world);
      cudaStream_t stream = w.streams[i];
      fill_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(w.send[i].local_ptr()), elems, r);
      OVL_CUDA_CHECK(cudaMemsetAsync(w.recv[i].local_ptr(), 0xff, bytes, stream));
      OVL_CUDA_CHECK(cudaMemsetAsync(w.wrong[i].get(), 0, sizeof(unsigned long long), stream));
      OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
      world.barrier();  // every input is in place before any rank's call reads it
      call(i);
      // A Reduce's sum (the root's only) is the AllReduce check's; a Broadcast's copy of rank 0 the AllGather
      // check's first chunk.
      if (!reduce || r == 0) {
        check_kernel<<<1024, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(w.recv[i].local_ptr()), elems,
                                               int(reduce ? Collective::kAllReduce : Collective::kAllGather), r, n,
                                               elems, w.wrong[i].as<unsigned long long>());
        unsigned long long count = 0;
        OVL_CUDA_CHECK(cudaMemcpy(&count, w.wrong[i].get(), sizeof(count), cudaMemcpyDeviceToHost));
        wrong[i] = double(count);
      }
    });
    const double wrong_count = w.across_ranks(wrong, false);
    const int reps = time_real_calls(state, w, bytes, call, false);
    using benchmark::Counter;
    state.counters["algbw_GBps"] = Counter(double(bytes) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["busbw_GBps"] = Counter(double(bytes) * 1e-9, Counter::kIsIterationInvariantRate);
    state.counters["wrong"] = wrong_count;
    state.counters["ctas"] = ctas;
    state.counters["world"] = n;
    state.counters["reps"] = reps;
    state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(bytes));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// A coll/ case on the real World (see the file comment).
// algo: one of the Collectives' (nccl, tma-push, tma-pull, simt), or nccl-symmetric: NCCL's symmetric kernels (their own
// buffers and communicators).
void bench_collective_real(benchmark::State& state, CommAlgo algo, Collective op, std::size_t bytes, int ctas) {
  const bool symmetric = algo == CommAlgo::kNcclSymmetric;
  try {
    if (symmetric) {
      const std::string why =
          ovl::nccl_symmetric_refusal(ctas == 0 ? ovl::CtaPolicy::kZero : ovl::CtaPolicy::kEfficiency);
      if (!why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
    }
    RealWorld& w = real_world_slot(0, 0);
    const int n = w.size();
    const CollSizes z = coll_sizes(op, bytes, n);
    const std::size_t chunk = z.chunk, recv_bytes = z.recv_bytes, in_elems = z.in_elems(), out_elems = z.out_elems();
    real_world_slot(z.send_bytes, recv_bytes);
    ovl::CollectiveOptions opt;
    opt.num_ctas = std::max(ctas, 1);
    opt.simt_threads = 512;
    opt.pull_warps = pull_warps();
    opt.nccl_cta_bound = algo == CommAlgo::kNcclRing ? ctas : 0;
    // nccl-symmetric: each rank's communicator and windows (collective, first use).
    std::vector<ncclComm_t> symmetric_comm(w.worlds.size(), nullptr);
    if (symmetric) {
      ovl::run_per_rank(w.worlds, [&](ovl::World& world) {
        symmetric_comm[w.local(world)] = symmetric_slot(w, world, ctas, z.send_bytes, recv_bytes);
      });
    }
    // This rank's input and output buffers.
    auto send_ptr = [&](std::size_t i) { return symmetric ? w.symmetric[i].send->get() : w.send[i].local_ptr(); };
    auto recv_ptr = [&](std::size_t i) { return symmetric ? w.symmetric[i].recv->get() : w.recv[i].local_ptr(); };
    auto call = [&](std::size_t i) {
      if (symmetric) {
        call_nccl_symmetric(op, send_ptr(i), recv_ptr(i), bytes, n, symmetric_comm[i], w.streams[i]);
      } else {
        call_collective(*w.coll[i], op, w.send[i], w.recv[i], bytes, n, algo, opt, w.streams[i]);
      }
    };
    // Each rank fills its own input, runs once into a poisoned output and checks its own output.
    std::vector<double> wrong(w.worlds.size(), 0.0);
    ovl::run_per_rank(w.worlds, [&](ovl::World& world) {
      const int r = world.rank();
      const std::size_t i = w.local(world);
      cudaStream_t stream = w.streams[i];
      fill_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(send_ptr(i)), in_elems, r);
      OVL_CUDA_CHECK(cudaMemsetAsync(recv_ptr(i), 0xff, recv_bytes, stream));
      OVL_CUDA_CHECK(cudaMemsetAsync(w.wrong[i].get(), 0, sizeof(unsigned long long), stream));
      OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
      world.barrier();  // every input is in place before any rank's collective reads it
      call(i);
      check_kernel<<<1024, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(recv_ptr(i)), out_elems, int(op), r, n,
                                             chunk, w.wrong[i].as<unsigned long long>());
      w.coll[i]->check(stream);
      unsigned long long count = 0;
      OVL_CUDA_CHECK(cudaMemcpy(&count, w.wrong[i].get(), sizeof(count), cudaMemcpyDeviceToHost));
      wrong[i] = double(count);
    });
    const double wrong_count = w.across_ranks(wrong, false);
    const int reps = time_real_calls(state, w, bytes, call, !ovl::is_nccl(algo));
    set_collective_counters(state, algo, op, bytes, n, ctas, wrong_count, opt);
    state.counters["reps"] = reps;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

struct CopyBuffers {
  ovl::DeviceBuffer src, dst;
  std::size_t bytes = 0;
};
CopyBuffers& copy_buffers(std::size_t bytes) {
  static CopyBuffers b;
  if (b.bytes < bytes) {
    b.src = ovl::DeviceBuffer();  // the old pair freed first
    b.dst = ovl::DeviceBuffer();
    b.src = ovl::DeviceBuffer(bytes);
    b.dst = ovl::DeviceBuffer(bytes);
    OVL_CUDA_CHECK(cudaMemset(b.src.get(), 1, bytes));
    b.bytes = bytes;
  }
  return b;
}

// Runs `run` once onto a zeroed destination and counts the bytes of the first, middle and last 4 KB that differ from
// the source's 0x01 pattern (copy_buffers fills it).
template <typename Run>
double checked_once(Run&& run, const CopyBuffers& b, std::size_t bytes, cudaStream_t stream) {
  OVL_CUDA_CHECK(cudaMemsetAsync(b.dst.get(), 0, bytes, stream));
  run();
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
  double wrong = 0;
  for (std::size_t at : {std::size_t(0), bytes / 2, bytes - 4096}) {
    unsigned char host[4096];
    OVL_CUDA_CHECK(cudaMemcpy(host, b.dst.as<char>() + at, sizeof(host), cudaMemcpyDeviceToHost));
    for (unsigned char c : host) wrong += c != 1;
  }
  return wrong;
}

// A local copy implementation of the copy/ cases.
struct CopyCase {
  const char* name;
  bool memcpy = false;
  ovl::kernels::CopyImpl impl = ovl::kernels::CopyImpl::kTma;
  ovl::kernels::RingSchedule schedule = ovl::kernels::RingSchedule::kInterleaved;
};
const CopyCase kCopyCases[] = {
    {"tma"},
    {"tma-slices", false, ovl::kernels::CopyImpl::kTma, ovl::kernels::RingSchedule::kSlices},
    {"simt", false, ovl::kernels::CopyImpl::kSimt},
    {"simt-slices", false, ovl::kernels::CopyImpl::kSimt, ovl::kernels::RingSchedule::kSlices},
};

void bench_copy(benchmark::State& state, const CopyCase& c, std::size_t bytes, int ctas) {
  try {
    CopyBuffers& b = copy_buffers(bytes);
    cudaStream_t stream = bench_stream();
    auto run = [&] {
      if (c.memcpy) {
        OVL_CUDA_CHECK(cudaMemcpyAsync(b.dst.get(), b.src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
      } else {
        ovl::kernels::launch_local_copy(c.impl, b.dst.get(), b.src.get(), bytes, ctas, 512, stream, c.schedule);
      }
    };
    const double wrong = checked_once(run, b, bytes, stream);
    for (auto _ : state) {
      ovl::bench::CudaEventTimer timer(state, stream);
      run();
    }
    state.counters["GBps"] = benchmark::Counter(2.0 * double(bytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    if (!c.memcpy)
      state.counters["GBps_per_cta"] = benchmark::Counter(2.0 * double(bytes) * 1e-9 / ctas, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["ctas"] = ctas;
    state.counters["wrong"] = wrong;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The bare TMA ring (ovl::kernels::launch_local_ring, interleaved) at one shape: copy (moved = 2 x bytes) or
// bf16 reduce-add into the destination (moved = 3 x bytes: source read, destination read + write). For sizing the
// movers' rings.
void bench_ring(benchmark::State& state, ovl::kernels::RingOp op, std::size_t bytes, int stages, int kib, int ctas) {
  try {
    CopyBuffers& b = copy_buffers(bytes);
    cudaStream_t stream = bench_stream();
    ovl::kernels::LocalRingArguments a;
    a.op = op;
    a.dst = b.dst.get();
    a.src = b.src.get();
    a.bytes = bytes;
    a.num_ctas = ctas;
    a.shape = {stages, std::uint32_t(kib) * 1024u};
    auto run = [&] { ovl::kernels::launch_local_ring(a, stream); };
    const double wrong = checked_once(run, b, bytes, stream);  // a reduce onto zeros leaves the source too
    for (auto _ : state) {
      ovl::bench::CudaEventTimer timer(state, stream);
      run();
    }
    const double moved = (op == ovl::kernels::RingOp::kCopy ? 2.0 : 3.0) * double(bytes);
    state.counters["GBps"] = benchmark::Counter(moved * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["GBps_per_cta"] = benchmark::Counter(moved * 1e-9 / ctas, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["ctas"] = ctas;
    state.counters["wrong"] = wrong;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void register_all() {
  const CommAlgo algos[] = {CommAlgo::kNcclRing, CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt};
  const Collective ops[] = {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather};
  if (real_world()) {
    const int n = real_world_size();
    std::vector<CommAlgo> real_algos(std::begin(algos), std::end(algos));
    real_algos.push_back(CommAlgo::kNcclSymmetric);
    for (CommAlgo algo : real_algos)
      for (Collective op : ops)
        for (std::size_t bytes = std::size_t(1) << 20; bytes <= std::size_t(1) << 30; bytes *= 4) {
          std::vector<int> ctas_list{1, 2, 4, 8, 16, 32};
          if (algo == CommAlgo::kNcclRing) ctas_list = nccl_bounds();
          // nccl-symmetric's ctas:0: CTA policy zero, which moves an AllGather on the copy engines.
          if (algo == CommAlgo::kNcclSymmetric && op == Collective::kAllGather) ctas_list.insert(ctas_list.begin(), 0);
          for (int ctas : ctas_list) {
            const std::string name =
                fmt::format("coll/{}/{}/{}/world:{}/ctas:{}", ovl::to_string(algo), ovl::to_string(op), bytes, n, ctas);
            auto* b = benchmark::RegisterBenchmark(
                name.c_str(), [=](benchmark::State& st) { bench_collective_real(st, algo, op, bytes, ctas); });
            b->UseManualTime()->Unit(benchmark::kMicrosecond);
            // A process per rank: every process must run the same number of iterations (each is collective).
            if (mpi_world()) b->Iterations(kMpiIterations);
          }
        }
    for (const bool reduce : {true, false})
      for (std::size_t bytes = std::size_t(1) << 20; bytes <= std::size_t(1) << 30; bytes *= 4)
        for (int ctas : nccl_bounds()) {
          const std::string name =
              fmt::format("coll/nccl/{}/{}/world:{}/ctas:{}", reduce ? "reduce" : "broadcast", bytes, n, ctas);
          auto* b = benchmark::RegisterBenchmark(
              name.c_str(), [=](benchmark::State& st) { bench_nccl_rooted_real(st, reduce, bytes, ctas); });
          b->UseManualTime()->Unit(benchmark::kMicrosecond);
          if (mpi_world()) b->Iterations(kMpiIterations);
        }
    return;
  }
  for (CommAlgo algo : algos)
    for (Collective op : ops)
      for (std::size_t bytes = std::size_t(1) << 20; bytes <= std::size_t(1) << 30; bytes *= 4)
        for (int n : {2, 4, 8})
          for (int ctas : {1, 2, 4, 8, 16, 32, 64}) {
            const std::string name = fmt::format("coll/{}/{}/{}/world:{}/ctas:{}", ovl::to_string(algo), ovl::to_string(op), bytes, n, ctas);
            benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { bench_collective(st, algo, op, bytes, n, ctas); })
                ->UseManualTime()
                ->Unit(benchmark::kMicrosecond);
          }
  for (std::size_t bytes : {std::size_t(1) << 28, std::size_t(1) << 30}) {
    for (const CopyCase& c : kCopyCases)
      for (int ctas : {1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 132}) {
        const std::string name = fmt::format("copy/{}/{}/ctas:{}", c.name, bytes, ctas);
        benchmark::RegisterBenchmark(name.c_str(), [=, &c](benchmark::State& st) { bench_copy(st, c, bytes, ctas); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    static const CopyCase memcpy_case{"memcpy", true};
    benchmark::RegisterBenchmark(fmt::format("copy/memcpy/{}", bytes).c_str(),
                                 [=](benchmark::State& st) { bench_copy(st, memcpy_case, bytes, 0); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
  // ring/<copy|reduce>/<bytes>/ring:<stages>x<KiB>/ctas:<c>
  const std::pair<int, int> rings[] = {{4, 32}, {6, 32}, {8, 24}, {8, 16}, {3, 64}, {4, 48}};
  for (auto op : {ovl::kernels::RingOp::kCopy, ovl::kernels::RingOp::kReduceAddBf16})
    for (auto [stages, kib] : rings)
      for (int ctas : {1, 8, 16, 24, 32, 48, 64, 132}) {
        const std::size_t bytes = std::size_t(1) << 28;
        const std::string name = fmt::format("ring/{}/{}/ring:{}x{}/ctas:{}", op == ovl::kernels::RingOp::kCopy ? "copy" : "reduce",
                                             bytes, stages, kib, ctas);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { bench_ring(st, op, bytes, stages, kib, ctas); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string quiet_out = "--benchmark_out=/dev/null";
  try {
    if (mpi_world()) {
#if defined(OVL_HAVE_MPI)
      int provided = 0;
      MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
      args.assign(argv, argv + argc);
      // Every rank runs every case (each is collective); rank 0 alone reports: the others' console and JSON go to
      // /dev/null (the last --benchmark_out wins).
      if (mpi_rank() != 0) {
        args.push_back(quiet_out.data());
        if (std::freopen("/dev/null", "w", stdout) == nullptr) return 2;
      }
#else
      OVL_FAIL("OVL_BENCH_WORLD = mpi: this build has no MPI (configure with OVL_WITH_MPI=ON where MPI is installed)");
#endif
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_collectives: {}\n", e.what());
    return 2;
  }
  int count = int(args.size());
  ::benchmark::Initialize(&count, args.data());
  if (::benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  ::ovl::bench::add_device_context();
  ::benchmark::AddCustomContext("world_backend", ::ovl::bench::to_string(::ovl::bench::world_kind()));
  register_all();
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
#if defined(OVL_HAVE_MPI)
  if (mpi_world()) MPI_Finalize();
#endif
  return 0;
}
