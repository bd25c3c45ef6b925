// World backends and symmetric buffers: loopback sizes, threads with one device and with every visible GPU, MPI with
// one rank (when built with MPI; a singleton or mpirun -np 1) and with every rank of mpirun -np 2..8.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gathered_all_gather.cuh"
#include "gpu_test.hpp"
#include "ovl/core/collectives.hpp"
#include "ovl/core/nccl_check.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {
namespace {

using test::GpuTest;
using test::HopperTest;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Each rank's copy gets its own pattern through peer_ptr; reading back through peer_ptr sees it (and zeros before).
void check_peer_pointers(const World& world) {
  const std::size_t bytes = 4096 + 48;
  SymmetricBuffer buf(world, bytes);
  EXPECT_EQ(buf.size(), world.size());
  EXPECT_EQ(buf.bytes(), bytes);
  EXPECT_GE(buf.allocated_bytes(), bytes);
  std::vector<unsigned char> host(bytes);
  for (int r = 0; r < world.size(); ++r) {
    ASSERT_NE(buf.peer_ptr(r), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.peer_ptr(r)) % 256, 0u);
    OVL_CUDA_CHECK(cudaMemcpy(host.data(), buf.peer_ptr(r), bytes, cudaMemcpyDeviceToHost));
    for (unsigned char b : host) ASSERT_EQ(b, 0) << "not zero-filled";
    for (int j = 0; j < r; ++j) EXPECT_NE(buf.peer_ptr(r), buf.peer_ptr(j));
  }
  for (int r = 0; r < world.size(); ++r) OVL_CUDA_CHECK(cudaMemset(buf.peer_ptr(r), 0x10 + r, bytes));
  for (int r = 0; r < world.size(); ++r) {
    OVL_CUDA_CHECK(cudaMemcpy(host.data(), buf.peer_ptr(r), bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(host.front(), 0x10 + r);
    EXPECT_EQ(host.back(), 0x10 + r);
  }
  SymmetricBuffer moved(std::move(buf));
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(moved.size(), world.size());
}

__global__ void copy_words(const uint4* src, uint4* dst, std::size_t n) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

// One rank of a real World (each rank calls it): the host all-gather returns every rank's value, and this rank's
// kernel reads every peer's copy of a symmetric buffer (1 MiB + 48 bytes, filled by its owner) through its peer
// pointer, seeing that owner's pattern.
void check_gather_and_peer_reads(World& w) {
  const int me = w.rank(), n = w.size();
  const int mine = 100 + me;
  const auto all = w.all_gather(std::as_bytes(std::span<const int>(&mine, 1)));
  ASSERT_EQ(int(all.size()), n);
  for (int r = 0; r < n; ++r) {
    int v = 0;
    ASSERT_EQ(all[std::size_t(r)].size(), sizeof(v));
    std::memcpy(&v, all[std::size_t(r)].data(), sizeof(v));
    EXPECT_EQ(v, 100 + r);
  }
  const std::size_t bytes = (std::size_t(1) << 20) + 48;
  SymmetricBuffer buf(w, bytes), got(w, bytes);
  OVL_CUDA_CHECK(cudaMemset(buf.local_ptr(), 0x10 + me, bytes));
  OVL_CUDA_CHECK(cudaDeviceSynchronize());
  w.barrier();  // every rank's pattern is in place
  std::vector<unsigned char> host(bytes);
  for (int r = 0; r < n; ++r) {
    copy_words<<<64, 256>>>(static_cast<const uint4*>(buf.peer_ptr(r)), static_cast<uint4*>(got.local_ptr()),
                            bytes / sizeof(uint4));
    OVL_CUDA_CHECK(cudaGetLastError());
    OVL_CUDA_CHECK(cudaMemcpy(host.data(), got.local_ptr(), bytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(host.front(), 0x10 + r) << "rank " << me << " reading rank " << r;
    EXPECT_EQ(host[bytes - 1], 0x10 + r) << "rank " << me << " reading rank " << r;
  }
  w.barrier();  // no rank frees its copy while a peer still reads it
}

// A threads World over every visible GPU (a world of 1 on a one-GPU machine): the host collectives agree, and each
// rank's kernel reads every peer's copy of a symmetric buffer through its peer pointer (NVLink between H200s).
TEST_F(GpuTest, ThreadsWorldOfEveryGpu) {
  const std::vector<int> devices = test::every_gpu(8);
  const int gpus = int(devices.size());
  std::vector<World> worlds = World::threads(devices);
  ASSERT_EQ(int(worlds.size()), gpus);
  run_per_rank(worlds, [&](World& w) {
    EXPECT_EQ(w.size(), gpus);
    EXPECT_EQ(w.device(), devices[std::size_t(w.rank())]);
    EXPECT_FALSE(w.is_loopback());
    check_gather_and_peer_reads(w);
  });
}

TEST_F(GpuTest, LoopbackSizes) {
  for (int n : {1, 2, 4, 8}) {
    World w = World::loopback(n);
    EXPECT_EQ(w.size(), n);
    EXPECT_EQ(w.rank(), 0);
    EXPECT_EQ(w.device(), 0);
    EXPECT_TRUE(w.is_loopback());
    EXPECT_EQ(w.num_local_ranks(), n);
    if (n == 1) EXPECT_NE(w.nccl_comm(), nullptr);
    else EXPECT_EQ(w.nccl_comm(), nullptr);
    check_peer_pointers(w);
  }
  EXPECT_NE(error_of([] { World::loopback(0); }).find("loopback world of 0 ranks"), std::string::npos);
  EXPECT_NE(error_of([] { World::loopback(9); }).find("loopback world of 9 ranks"), std::string::npos);
  EXPECT_NE(error_of([] { World::loopback(2, 999); }).find("device 999"), std::string::npos);
  World w = World::loopback(2);
  EXPECT_NE(error_of([&] { SymmetricBuffer b(w, 0); }).find("bytes = 0"), std::string::npos);
  EXPECT_NE(error_of([&] { SymmetricBuffer b(w, 16); (void)b.peer_ptr(2); }).find("peer_ptr(2)"), std::string::npos);
}

TEST_F(GpuTest, ThreadsWorldOfOneDevice) {
  WorldOptions options;
  options.nccl_cta_bounds = {0, 2};
  std::vector<World> worlds = World::threads({0}, options);
  ASSERT_EQ(worlds.size(), 1u);
  World& w = worlds[0];
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(w.rank(), 0);
  EXPECT_EQ(w.device(), 0);
  EXPECT_FALSE(w.is_loopback());
  EXPECT_EQ(w.num_local_ranks(), 1);
  EXPECT_NE(w.nccl_comm(0), nullptr);
  EXPECT_NE(w.nccl_comm(2), nullptr);
  EXPECT_NE(error_of([&] { w.nccl_comm(5); }).find("CTA bound 5"), std::string::npos);
  w.barrier();
  const int mine = 42;
  const auto all = w.all_gather(std::as_bytes(std::span<const int>(&mine, 1)));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].size(), sizeof(int));
  check_peer_pointers(w);
  // An NCCL all-reduce on the CTA-bounded communicator (a world of one: a local copy).
  Collectives coll(w);
  SymmetricBuffer a(w, 4096), b(w, 4096);
  CollectiveOptions opt;
  opt.nccl_cta_bound = 2;
  coll.all_reduce(a, b, 1024, DType::kFP32, CommAlgo::kNcclRing, opt, nullptr);
  OVL_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_NE(error_of([] { World::threads({0, 0}); }).find("not distinct"), std::string::npos);
}

// A World over a communicator the caller made: its rank, size and device come from the communicator, a Context on
// it runs (one AllReduce against the sum computed here), and the communicator outlives the World (borrowed).
TEST_F(GpuTest, WorldFromTheCallersCommunicator) {
  ncclComm_t comm = nullptr;
  int dev = 0;
  OVL_NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev));
  {
    World w = World::from_nccl_comm(comm);
    EXPECT_EQ(w.size(), 1);
    EXPECT_EQ(w.rank(), 0);
    EXPECT_EQ(w.device(), 0);
    EXPECT_FALSE(w.is_loopback());
    EXPECT_EQ(w.nccl_comm(), comm);
    ContextOptions options;
    options.world = w;
    Context ctx(options);
    EXPECT_EQ(ctx.world_size(), 1);
  }
  // Still usable after the World and the Context are gone: a one-rank AllReduce of random floats is a copy.
  std::mt19937 rng(5);
  std::vector<float> host(1024);
  for (float& v : host) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  test::DeviceArray<float> src_d(host.size()), dst_d(host.size());
  float *src = src_d.get(), *dst = dst_d.get();
  OVL_CUDA_CHECK(cudaMemcpy(src, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  OVL_NCCL_CHECK(ncclAllReduce(src, dst, host.size(), ncclFloat, ncclSum, comm, nullptr));
  std::vector<float> back(host.size());
  OVL_CUDA_CHECK(cudaMemcpy(back.data(), dst, back.size() * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, host);
  OVL_NCCL_CHECK(ncclCommDestroy(comm));
  EXPECT_NE(error_of([] { World::from_nccl_comm(nullptr); }).find("communicator is null"), std::string::npos);
}

#if defined(OVL_HAVE_MPI)
// Finalizes MPI after the last test if a test initialized it (under mpirun a missing MPI_Finalize is an error).
class MpiFinalizer : public ::testing::Environment {
 public:
  void TearDown() override {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
  }
};
[[maybe_unused]] ::testing::Environment* const kMpiFinalizer = ::testing::AddGlobalTestEnvironment(new MpiFinalizer);

// MPI_COMM_WORLD's size, initializing MPI (thread multiple) the first time a test asks.
int mpi_world_size() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  }
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The World of every rank of mpirun; NCCL only when every rank can have a GPU of its own (NCCL refuses two ranks on
// one GPU).
World mpi_world_of_every_rank() {
  int gpus = 0;
  OVL_CUDA_CHECK(cudaGetDeviceCount(&gpus));
  WorldOptions options;
  options.create_nccl = mpi_world_size() <= gpus;
  return World::mpi(MPI_COMM_WORLD, options);
}

TEST_F(GpuTest, MpiWorldOfOneRank) {
  const int size = mpi_world_size();
  if (size != 1) GTEST_SKIP() << "this test runs with one MPI rank (mpirun -np 1 or singleton), found " << size;
  {
    World w = World::mpi(MPI_COMM_WORLD);
    EXPECT_EQ(w.size(), 1);
    EXPECT_EQ(w.backend(), World::Backend::kMpi);
    EXPECT_NE(w.nccl_comm(), nullptr);
    check_peer_pointers(w);  // cuMemCreate + POSIX fd path
    Collectives coll(w);
    SymmetricBuffer a(w, 1 << 20), b(w, 1 << 20);
    CollectiveOptions opt;
    opt.num_ctas = 4;
    coll.all_reduce(a, b, 4097, DType::kBF16, CommAlgo::kTmaPull, opt, nullptr);
    coll.check(nullptr);
  }
}

// Rank r's input element i for MpiWorldOfEveryRank: small integers, so every sum is exact in fp32.
float mpi_input(std::size_t i, int r) { return float(int((i * 7 + std::size_t(r) * 3) % 17) - 8); }

// An MPI World of every rank of mpirun -np 2..8 (a process per rank; ranks share GPUs when there are fewer GPUs than
// ranks, and then no NCCL, which refuses two ranks on one GPU): the host collectives, each rank's kernel reading
// every peer's copy of a symmetric buffer (cuMem handles exchanged as file descriptors), and the TMA and SIMT
// collectives (NCCL too when every rank has its own GPU), each rank checking its own output exactly.
TEST_F(GpuTest, MpiWorldOfEveryRank) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World w = mpi_world_of_every_rank();
  const int me = w.rank(), n = w.size();
  ASSERT_EQ(n, size);
  EXPECT_EQ(w.backend(), World::Backend::kMpi);
  EXPECT_EQ(w.num_local_ranks(), 1);
  check_gather_and_peer_reads(w);
  Collectives coll(w);
  const std::size_t chunk = 16392, total = chunk * std::size_t(n);  // fp32: chunks of 16-byte multiples
  SymmetricBuffer send(w, total * 4), recv(w, total * 4);
  std::vector<float> mine(total), out(total);
  for (std::size_t i = 0; i < total; ++i) mine[i] = mpi_input(i, me);
  OVL_CUDA_CHECK(cudaMemcpy(send.local_ptr(), mine.data(), total * 4, cudaMemcpyHostToDevice));
  std::vector<CommAlgo> impls{CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt};
  if (!w.nccl_cta_bounds().empty()) impls.push_back(CommAlgo::kNcclRing);
  struct Run {
    CommAlgo impl;
    Collective op;
    bool zeroed;
  };
  std::vector<Run> runs;
  for (CommAlgo impl : impls)
    for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather})
      runs.push_back({impl, op, false});
  runs.push_back({CommAlgo::kTmaPush, Collective::kAllReduce, true});
  runs.push_back({CommAlgo::kTmaPush, Collective::kReduceScatter, true});
  for (const Run& run : runs) {
    SCOPED_TRACE(fmt::format("rank {} of {}: {} {}{}", me, n, to_string(run.impl), to_string(run.op),
                             run.zeroed ? " dst-zeroed" : ""));
    OVL_CUDA_CHECK(cudaMemset(recv.local_ptr(), run.zeroed ? 0 : 0xFF, total * 4));
    OVL_CUDA_CHECK(cudaDeviceSynchronize());
    w.barrier();
    CollectiveOptions opt;
    opt.num_ctas = 3;
    opt.dst_zeroed = run.zeroed;
    switch (run.op) {
      case Collective::kAllReduce: coll.all_reduce(send, recv, total, DType::kFP32, run.impl, opt, nullptr); break;
      case Collective::kReduceScatter:
        coll.reduce_scatter(send, recv, chunk, DType::kFP32, run.impl, opt, nullptr);
        break;
      case Collective::kAllGather: coll.all_gather(send, recv, chunk, DType::kFP32, run.impl, opt, nullptr); break;
    }
    coll.check(nullptr);
    OVL_CUDA_CHECK(cudaMemcpy(out.data(), recv.local_ptr(), total * 4, cudaMemcpyDeviceToHost));
    const std::size_t elems = run.op == Collective::kReduceScatter ? chunk : total;
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < elems; ++i) {
      float want = 0;
      if (run.op == Collective::kAllGather) {
        want = mpi_input(i % chunk, int(i / chunk));
      } else {
        const std::size_t j = run.op == Collective::kReduceScatter ? std::size_t(me) * chunk + i : i;
        for (int p = 0; p < n; ++p) want += mpi_input(j, p);
      }
      if (out[i] != want && wrong++ < 3) ADD_FAILURE() << "element " << i << ": " << out[i] << ", want " << want;
    }
    EXPECT_EQ(wrong, 0u);
    w.barrier();
  }
}

// An AllGather with a GroupRelease across the processes of mpirun -np 2..8, tma-push and tma-pull, 3 CTAs: each
// rank's checker reads every group's rows as soon as its counter says they arrived (test::run_gathered_all_gather).
TEST_F(HopperTest, MpiWorldAllGatherRaisesEachGroupOnceItsRowsArrive) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World w = mpi_world_of_every_rank();
  Collectives coll(w);
  test::Stream stream;
  for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    SCOPED_TRACE(fmt::format("rank {} of {}: {}", w.rank(), w.size(), to_string(algo)));
    EXPECT_EQ(test::run_gathered_all_gather(w, coll, algo, 3, test::kUnevenGroups, 41u, stream), 0u);
  }
}

// A rank that stops pushing between groups of an AllGather with a GroupRelease, as processes of mpirun -np 2..8
// (tma-push, 3 CTAs, 3 groups): the last rank's group 1 waits at a gate that never opens (its GEMM counter stays 0)
// and times out naming it; every other rank raises its counter of group 0 to 3, then times out waiting for the last
// rank's rows of group 1 and check() throws naming the group and that rank; no rank raises group 1 or 2.
TEST_F(HopperTest, MpiRankThatStopsMidGatherTimesOutNamingTheGroup) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World world = mpi_world_of_every_rank();
  const int me = world.rank(), n = world.size(), stopper = n - 1, groups = 3;
  Collectives coll(world);
  const std::vector<TileRange> ranges = test::owner_runs(n, {40'000, 30'008, 50'000});
  const RangeTable table(world, ranges, groups);
  const SymmetricBuffer src(world, table.src_end()), dst(world, table.dst_end()),
      gemm_counters(world, groups * sizeof(std::uint32_t));
  const std::vector<std::uint32_t> expected{0, me == stopper ? 1u : 0u, 0};
  test::DeviceArray<std::uint32_t> expected_d(groups), counters(groups);
  OVL_CUDA_CHECK(cudaMemcpy(expected_d.get(), expected.data(), expected_d.bytes(), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  OVL_CUDA_CHECK(test::finish_setup());
  world.barrier();
  test::Stream stream;
  CollectiveOptions opt;
  opt.num_ctas = 3;
  opt.timeout_ns = 300'000'000;
  const GroupGate gate{&gemm_counters, expected_d.get()};
  const GroupRelease release{counters.get()};
  coll.run_ranges(Collective::kAllGather, src, dst, table, DType::kBF16, CommAlgo::kTmaPush, opt, stream, &gate,
                  &release);
  if (me == stopper)
    test::expect_error_naming([&] { coll.check(stream); },
                              fmt::format("waited for tile group 1 of rank {}'s GEMM", me));
  else
    test::expect_error_naming(
        [&] { coll.check(stream); },
        fmt::format("rank {} timed out waiting for the gathered rows of tile group 1 from rank {}", me, stopper));
  std::vector<std::uint32_t> raised(groups);
  OVL_CUDA_CHECK(cudaMemcpy(raised.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
  if (me != stopper) EXPECT_EQ(raised[0], 3u) << "rank " << me;  // the last rank's group 0 arrived
  EXPECT_EQ(raised[1], 0u) << "rank " << me;
  EXPECT_EQ(raised[2], 0u) << "rank " << me;
  world.barrier();
}

// bf16 values of rank r's matrix `which` (each test its own numbers), uniform in [-1, 1): every process can make
// every rank's.
std::vector<uint16_t> mpi_matrix(std::size_t elems, int which, int r) {
  std::mt19937 gen(1000u + 10u * unsigned(r) + unsigned(which));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> v(elems);
  for (auto& x : v) x = test::to_bf16(dist(gen));
  return v;
}

// sum over the n ranks r of A_r B_r^T in fp64, A_r = mpi_matrix(m x k, which_a, r), B_r = mpi_matrix(cols x k, which_b,
// r) (B is N x K): the reference every rank can make of every rank's inputs.
std::vector<double> mpi_product_sum(int n, int64_t m, int64_t cols, int64_t k, int which_a, int which_b) {
  std::vector<double> sum(std::size_t(m * cols), 0.0);
  for (int r = 0; r < n; ++r) {
    const std::vector<double> product = test::cpu_gemm(mpi_matrix(std::size_t(m * k), which_a, r),
                                                       mpi_matrix(std::size_t(cols * k), which_b, r), 0, m, cols, k);
    for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += product[e];
  }
  return sum;
}

// GEMM+RS 512 x 256 x 128 over an MPI World of n ranks, seen from rank `me`: its inputs (A = mpi_matrix which_a, B =
// mpi_matrix which_b), its output C (its m / n rows) and those rows of the fp64 reference over every rank's inputs.
struct MpiReduceScatter {
  static constexpr int64_t m = 512, cols = 256, k = 128;
  test::DeviceMatrix a, b, c;
  std::vector<double> rank_rows;
  MpiReduceScatter(int n, int me, int which_a, int which_b)
      : a(m, k, mpi_matrix(std::size_t(m * k), which_a, me)),
        b(cols, k, mpi_matrix(std::size_t(cols * k), which_b, me)),
        c(m / n, cols, 0) {
    const std::vector<double> ref = mpi_product_sum(n, m, cols, k, which_a, which_b);
    rank_rows.assign(ref.begin() + me * (m / n) * cols, ref.begin() + (me + 1) * (m / n) * cols);
  }
};

// A plan (`mode` and `algo`; the signaling modes in 4 tile groups: tma, or tile-signal with comm_algo ce; sequential
// with comm_algo nccl-symmetric) over an MPI World of every rank of mpirun -np 2..8, through Context: four calls back
// to back with B alternating between two inputs, then (tma) two calls whose C is Context::symmetric_output, each
// rank's ReduceScatter / AllReduce result against an fp64 CPU reference built from every rank's inputs; relative
// error norm under 1e-2. With more processes than GPUs (one GPU: the processes time-slice it) the World has no NCCL,
// which the Context accepts for tma and ce; nccl-symmetric needs NCCL and skips there.
void check_mpi_world_plan(Mode mode, CommAlgo algo) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World world = mpi_world_of_every_rank();
  if (algo == CommAlgo::kNcclSymmetric && world.nccl_cta_bounds().empty())
    GTEST_SKIP() << "NCCL's symmetric kernels need NCCL, which refuses two ranks on one GPU: run one rank per GPU";
  const int me = world.rank(), n = world.size();
  ContextOptions copt;
  copt.world = world;
  Context ctx(copt);
  const int64_t m = 512, cols = 256, k = 128;
  const std::vector<double> ref0 = mpi_product_sum(n, m, cols, k, 0, 1), ref1 = mpi_product_sum(n, m, cols, k, 0, 2);
  const test::DeviceMatrix da(m, k, mpi_matrix(std::size_t(m * k), 0, me)),
      db0(cols, k, mpi_matrix(std::size_t(cols * k), 1, me)), db1(cols, k, mpi_matrix(std::size_t(cols * k), 2, me));
  test::Stream stream;
  const TensorRef ta = da.ref(), tb0 = db0.ref(), tb1 = db1.ref();
  for (Op op : {Op::kGemmReduceScatter, Op::kGemmAllReduce}) {
    const int64_t rows = op == Op::kGemmReduceScatter ? m / n : m, first = op == Op::kGemmReduceScatter ? me * rows : 0;
    const std::size_t out = std::size_t(rows * cols);
    test::DeviceMatrix dc(4 * rows, cols, 0);  // the four calls' outputs, one after another
    auto c_at = [&](int i) { return TensorRef{static_cast<char*>(dc.ptr) + std::size_t(i) * out * 2, rows, cols}; };
    const Problem p = ctx.problem_for(op, ta, tb0, c_at(0));
    Plan plan = default_plan(mode, p, ctx.hardware(), 16);
    plan.comm_algo = algo;
    if (mode_signals(mode))
      plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), std::min<int64_t>(4, plan.tiles_m(p)));
    ASSERT_EQ(ctx.can_run(p, plan), "");
    auto run = [&](const TensorRef& b, const TensorRef& c) {
      if (op == Op::kGemmReduceScatter)
        ctx.gemm_reduce_scatter(ta, b, c, plan, stream);
      else
        ctx.gemm_all_reduce(ta, b, c, plan, stream);
    };
    auto check = [&](const void* c, const std::vector<double>& ref, const std::string& what) {
      const std::vector<double> rank_rows(ref.begin() + first * cols, ref.begin() + (first + rows) * cols);
      EXPECT_LT(test::rel_error(test::read_device(c, rows * cols), rank_rows), 1e-2)
          << "rank " << me << " of " << n << ": " << to_string(op) << " " << what;
    };
    dc.poison(stream);  // bf16 NaN where nothing is written
    for (int i = 0; i < 4; ++i) run(i % 2 ? tb1 : tb0, c_at(i));
    ctx.synchronize(stream);
    for (int i = 0; i < 4; ++i) check(c_at(i).ptr, i % 2 ? ref1 : ref0, fmt::format("call {}", i));
    if (!is_tma_mover(algo)) continue;  // the symmetric output is the TMA collective's
    TensorRef sym = c_at(0);
    sym.ptr = ctx.symmetric_output(p);
    for (int i = 0; i < 2; ++i) {
      run(i % 2 ? tb1 : tb0, sym);
      ctx.synchronize(stream);
      check(sym.ptr, i % 2 ? ref1 : ref0, fmt::format("symmetric output, call {}", i));
    }
  }
}
TEST_F(HopperTest, MpiWorldTmaModeMatchesCpuReference) { check_mpi_world_plan(Mode::kTma, CommAlgo::kTmaPush); }
// Not overlapping with the World's TMA collective after cuBLAS (TmaExecutor::run_real_sequential, its symmetric
// buffers); tma-pull refused by name (it would read the peers' partial products, which their next call may overwrite).
TEST_F(HopperTest, MpiWorldSequentialTmaPushMatchesCpuReference) {
  check_mpi_world_plan(Mode::kSequential, CommAlgo::kTmaPush);
  if (mpi_world_size() < 2) return;
  ContextOptions copt;
  copt.world = mpi_world_of_every_rank();
  Context ctx(copt);
  const test::DeviceMatrix da(512, 128, uint64_t{1}), db(256, 128, uint64_t{2}), dc(512, 256, uint64_t{3});
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, da.ref(), db.ref(), dc.ref());
  Plan pull = default_plan(Mode::kSequential, p, ctx.hardware(), 16);
  pull.comm_algo = CommAlgo::kTmaPull;
  const std::string why = ctx.can_run(p, pull);
  EXPECT_NE(why.find("\"comm_algo\" = tma-pull: mode sequential in a real world"), std::string::npos) << why;
}
// The World's TMA collective carries a per-call epoch in its flags, which a graph's replays would reuse: after an
// eager call, a call of mode tma and one of sequential with tma-push are refused during capture, by name, on every
// rank (nothing is enqueued, so no rank waits for another); the capture is ended and the context stays usable.
TEST_F(HopperTest, MpiWorldTmaCollectiveIsRefusedDuringCapture) {
  if (mpi_world_size() < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << mpi_world_size() << " rank";
  ContextOptions copt;
  copt.world = mpi_world_of_every_rank();
  Context ctx(copt);
  const int n = ctx.world_size();
  const test::DeviceMatrix da(512, 128, uint64_t{4}), db(256, 128, uint64_t{5}), dc(512 / n, 256, uint64_t{6});
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, da.ref(), db.ref(), dc.ref());
  Plan tma = default_plan(Mode::kTma, p, ctx.hardware(), 16);
  tma.tile_groups = band_groups(tma.tiles_m(p), tma.tiles_n(p), std::min<int64_t>(4, tma.tiles_m(p)));
  Plan seq = default_plan(Mode::kSequential, p, ctx.hardware(), 16);
  seq.comm_algo = CommAlgo::kTmaPush;
  test::Stream stream;
  for (const Plan& plan : {tma, seq}) {
    SCOPED_TRACE(plan.summary());
    ctx.gemm_reduce_scatter(da.ref(), db.ref(), dc.ref(), plan, stream);
    ctx.synchronize(stream);
    const std::string message = test::error_while_capturing(
        stream, [&] { ctx.gemm_reduce_scatter(da.ref(), db.ref(), dc.ref(), plan, stream); });
    EXPECT_NE(message.find("tma-push in a real world cannot be captured in a CUDA Graph"), std::string::npos)
        << message;
    EXPECT_NO_THROW(ctx.gemm_reduce_scatter(da.ref(), db.ref(), dc.ref(), plan, stream));
    EXPECT_NO_THROW(ctx.synchronize(stream));
  }
}
// AllGather+GEMM in mode tma over an MPI World of every rank of mpirun -np 2..8: each rank's 256 rows of A pushed
// to every rank group by group (4 groups), each rank's GEMM waiting per group for the collective's counters; two
// calls back to back with B alternating, each rank's C (256 n x 256, the whole gathered A times B) against the fp64
// product of every rank's rows. The same for mode sequential with tma-push (the gather, then cuBLAS).
TEST_F(HopperTest, MpiWorldTmaModeAllGatherGemmMatchesCpuReference) {
  if (mpi_world_size() < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << mpi_world_size() << " rank";
  ContextOptions copt;
  copt.world = mpi_world_of_every_rank();
  Context ctx(copt);
  // The gathered A is NaN before each call, so a GEMM reading rows before their gather (or a gather that returned
  // early) shows, although both plans gather into the same buffer.
  testing::set_fault(ctx, testing::Fault::kPoisonGather);
  const int me = ctx.rank(), n = ctx.world_size();
  const int64_t rows = 256, m = rows * n, cols = 256, k = 128;  // M a multiple of the world, whatever n
  std::vector<uint16_t> gathered;
  for (int r = 0; r < n; ++r) {
    const std::vector<uint16_t> a = mpi_matrix(std::size_t(rows * k), 3, r);
    gathered.insert(gathered.end(), a.begin(), a.end());
  }
  const test::DeviceMatrix da(rows, k, mpi_matrix(std::size_t(rows * k), 3, me)),
      db0(cols, k, mpi_matrix(std::size_t(cols * k), 1, me)), db1(cols, k, mpi_matrix(std::size_t(cols * k), 2, me));
  test::DeviceMatrix dc0(m, cols, 0), dc1(m, cols, 0);
  test::Stream stream;
  const Problem p = ctx.problem_for(Op::kAllGatherGemm, da.ref(), db0.ref(), dc0.ref());
  Plan plan = default_plan(Mode::kTma, p, ctx.hardware(), 16);
  plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), std::min<int64_t>(4, plan.tiles_m(p)));
  // Also not overlapping: the gather with the World's TMA collective, then cuBLAS on the gathered A.
  Plan seq = default_plan(Mode::kSequential, p, ctx.hardware(), 16);
  seq.comm_algo = CommAlgo::kTmaPush;
  const std::vector<double> ref0 = test::cpu_gemm(gathered, db0.host, 0, m, cols, k);
  const std::vector<double> ref1 = test::cpu_gemm(gathered, db1.host, 0, m, cols, k);
  for (const Plan& each : {plan, seq}) {
    ASSERT_EQ(ctx.can_run(p, each), "");
    dc0.poison(stream);
    dc1.poison(stream);
    ctx.all_gather_gemm(da.ref(), db0.ref(), dc0.ref(), each, stream);
    ctx.all_gather_gemm(da.ref(), db1.ref(), dc1.ref(), each, stream);
    ctx.synchronize(stream);
    EXPECT_LT(test::rel_error(test::read_device(dc0.ptr, m * cols), ref0), 1e-2)
        << "rank " << me << " of " << n << ": call 0, " << each.summary();
    EXPECT_LT(test::rel_error(test::read_device(dc1.ptr, m * cols), ref1), 1e-2)
        << "rank " << me << " of " << n << ": call 1, " << each.summary();
  }
}
// ce: flags, receive slots and the AllReduce result peer-mapped across the processes (cuMem), the start barrier of
// flags between back-to-back calls. (AllGather+GEMM is left out: with the processes on one GPU their "peer" copies
// are same-device copies, which need SMs that both processes' waiting GEMMs hold.)
TEST_F(HopperTest, MpiWorldCopyEngineMatchesCpuReference) {
  check_mpi_world_plan(Mode::kTileSignal, CommAlgo::kCopyEngine);
}
// nccl-symmetric: a communicator split off the World's with its CTA policy, the GEMM's output and the collective's
// registered as symmetric windows (ncclMemAlloc's cuMem memory) by the first call, NCCL's symmetric kernels between
// them, the result copied into C; four calls back to back.
TEST_F(HopperTest, MpiWorldNcclSymmetricMatchesCpuReference) {
  check_mpi_world_plan(Mode::kSequential, CommAlgo::kNcclSymmetric);
}
// Measured tuning over an MPI World of every rank of mpirun -np 2..8: every rank times the same two tma plans on its
// own data; the times are max-reduced over the ranks, so every rank keeps the same plan and reports the same times
// (the ranks' own timings differ). Each rank's result of the kept plan is then checked like the test above.
TEST_F(HopperTest, MpiWorldMeasuredTuningKeepsOnePlanOnEveryRank) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World world = mpi_world_of_every_rank();
  const int me = world.rank(), n = world.size();
  ContextOptions copt;
  copt.world = world;
  copt.plan_cache = "";
  Context ctx(copt);
  MpiReduceScatter t(n, me, 3, 4);
  test::Stream stream;
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, t.a.ref(), t.b.ref(), t.c.ref());
  std::vector<Plan> plans;
  for (int groups : {2, 4}) {
    Plan plan = default_plan(Mode::kTma, p, ctx.hardware(), 16);
    plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), std::min<int64_t>(groups, plan.tiles_m(p)));
    ASSERT_EQ(ctx.can_run(p, plan), "");
    plans.push_back(plan);
  }
  const PlanChoice choice = ctx.measure(Op::kGemmReduceScatter, t.a.ref(), t.b.ref(), t.c.ref(), plans, stream);
  // Every rank's view of the times and the choice, gathered: all equal.
  std::vector<double> mine{choice.candidates[0].measured_us, choice.candidates[1].measured_us,
                           double(choice.plan.tile_groups.size())};
  const auto all = world.all_gather(std::as_bytes(std::span<const double>(mine)));
  for (int r = 0; r < n; ++r) {
    std::vector<double> theirs(mine.size());
    std::memcpy(theirs.data(), all[r].data(), all[r].size());
    EXPECT_EQ(theirs, mine) << "rank " << r << " kept another plan or other times than rank " << me;
  }
  ctx.gemm_reduce_scatter(t.a.ref(), t.b.ref(), t.c.ref(), choice.plan, stream);
  ctx.synchronize(stream);
  EXPECT_LT(test::rel_error(t.c.read(), t.rank_rows), 1e-2) << "rank " << me;
}
// A rank that never makes a call, as processes of mpirun -np 2..8: mode tma's collective on every other rank times
// out naming it (ContextOptions::wait_timeout_ms), and the Context's next synchronize is clean. The last rank makes
// the first call and skips the second; then the ranks meet at an MPI barrier, so none is left waiting. (A process that
// exits instead ends the job: mpirun stops every process when one ends without MPI_Finalize. After the timeout the
// World's tma collective is out of step, as docs/reliability.md says, so no tma call follows.)
TEST_F(HopperTest, MpiRankThatNeverCallsTimesOutNamingIt) {
  const int size = mpi_world_size();
  if (size < 2) GTEST_SKIP() << "runs under mpirun -np 2..8, found " << size << " rank";
  World world = mpi_world_of_every_rank();
  const int me = world.rank(), n = world.size(), missing = n - 1;
  ContextOptions copt;
  copt.world = world;
  copt.wait_timeout_ms = 500;
  Context ctx(copt);
  MpiReduceScatter t(n, me, 5, 6);
  test::Stream stream;
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, t.a.ref(), t.b.ref(), t.c.ref());
  Plan plan = default_plan(Mode::kTma, p, ctx.hardware(), 16);
  plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), std::min<int64_t>(4, plan.tiles_m(p)));
  ASSERT_EQ(ctx.can_run(p, plan), "");
  t.c.poison(stream);
  ctx.gemm_reduce_scatter(t.a.ref(), t.b.ref(), t.c.ref(), plan, stream);
  ctx.synchronize(stream);
  EXPECT_LT(test::rel_error(t.c.read(), t.rank_rows), 1e-2) << "rank " << me << " before the fault";
  world.barrier();
  if (me != missing) {
    ctx.gemm_reduce_scatter(t.a.ref(), t.b.ref(), t.c.ref(), plan, stream);
    test::expect_error_naming_all([&] { ctx.synchronize(stream); },
                                  {fmt::format("collective wait timed out: rank {} timed out waiting for", me),
                                   fmt::format("from rank {}", missing)});
    EXPECT_NO_THROW(ctx.synchronize(stream)) << "rank " << me << ": the error is reported once";
  }
  world.barrier();
}
#endif


}  // namespace
}  // namespace ovl
