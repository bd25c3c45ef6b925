// Collectives (NCCL, TMA push, TMA pull, SIMT) against a CPU reference, in loopback worlds of 1, 2, 4 and 8 ranks.
//
// Reference: every rank's input rounded to the dtype, summed in fp64, rounded once to the dtype.
// Tolerance for reductions: (N + 1) * eps * sum_p |x_p| per element, eps = 2^-8 (bf16), 2^-11 (f16), 2^-24 (f32).
//   push-reduce rounds to the dtype after each of its N-1 adds (each add errs by at most eps * |partial sum| <=
//   eps * sum |x|), plus one eps for the reference's own rounding; pull-reduce adds in fp32 and rounds once, so it
//   meets the same bound with room to spare. Gathers must be exact.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gathered_all_gather.cuh"
#include "gpu_test.hpp"
#include "ovl/core/collectives.hpp"
#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/kernels/wait.hpp"

namespace ovl {
namespace {

using test::HopperTest;

// ---- host element conversions ----
double to_double(DType t, const unsigned char* p) {
  if (t == DType::kFP32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t b;
  std::memcpy(&b, p, 2);
  if (t == DType::kBF16) {
    const std::uint32_t u = std::uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  __half_raw raw;
  raw.x = b;
  return double(__half2float(__half(raw)));
}
void from_double(DType t, double v, unsigned char* p) {
  if (t == DType::kFP32) {
    const float f = float(v);
    std::memcpy(p, &f, 4);
    return;
  }
  std::uint16_t b;
  if (t == DType::kBF16) {
    const __nv_bfloat16 h = __double2bfloat16(v);
    std::memcpy(&b, &h, 2);
  } else {
    const __half h = __double2half(v);
    std::memcpy(&b, &h, 2);
  }
  std::memcpy(p, &b, 2);
}
double eps_of(DType t) { return t == DType::kBF16 ? std::ldexp(1.0, -8) : t == DType::kFP16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -24); }

std::vector<unsigned char> random_data(DType t, std::size_t elems, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const std::size_t es = std::size_t(dtype_bytes(t));
  std::vector<unsigned char> out(elems * es);
  for (std::size_t i = 0; i < elems; ++i) from_double(t, dist(gen), out.data() + i * es);
  return out;
}

// The reference of a reduction at element j of every rank's input `in` (their sum rounded once to the dtype) and
// the tolerance of a result there (see the top of this file).
struct SumReference {
  double value, tolerance;
  bool accepts(double got) const { return std::fabs(got - value) <= tolerance; }
};
SumReference sum_reference(DType t, const std::vector<std::vector<unsigned char>>& in, std::size_t j) {
  const std::size_t es = std::size_t(dtype_bytes(t));
  double sum = 0, abs_sum = 0;
  for (const std::vector<unsigned char>& x_p : in) {
    const double x = to_double(t, x_p.data() + j * es);
    sum += x;
    abs_sum += std::fabs(x);
  }
  unsigned char bits[4];
  from_double(t, sum, bits);
  return {to_double(t, bits), double(in.size() + 1) * eps_of(t) * abs_sum};
}

struct Case {
  Collective op;
  CommAlgo impl;
  DType dtype;
  std::size_t count;  // AR: count; RS: recv_count; AG: send_count
  int ctas;
  bool in_place;
  bool dst_zeroed = false;  // CollectiveOptions::dst_zeroed (the output buffer is fresh, hence zero)
};
std::string name(const Case& c, int n) {
  return fmt::format("{} {} {} count={} ctas={} world={}{}{}", to_string(c.op), to_string(c.impl),
                     to_string(c.dtype), c.count, c.ctas, n, c.in_place ? " in-place" : "",
                     c.dst_zeroed ? " dst-zeroed" : "");
}

// Runs one case on any World and compares with the CPU reference. Returns wrong elements. The caller plays the ranks
// [first_local_rank(), + num_local_ranks()): every rank of a loopback World, its own rank in a threads/MPI World
// (each rank's caller runs the same case). Every rank's input is generated here from its rank, so each caller knows
// the whole reference; it writes and checks only the ranks it plays.
std::size_t run_case(const World& world, Collectives& coll, const Case& c, cudaStream_t stream,
                     std::vector<unsigned char>* result0 = nullptr, int pull_warps = 4) {
  const int n = world.size();
  const int first = world.first_local_rank(), last = first + world.num_local_ranks();
  const std::size_t es = std::size_t(dtype_bytes(c.dtype));
  const std::size_t in_elems = c.op == Collective::kReduceScatter ? c.count * n : c.count;
  const std::size_t out_elems = c.op == Collective::kAllGather ? c.count * n : c.count;
  const std::size_t full = std::max(in_elems, out_elems);
  SymmetricBuffer send(world, (c.in_place ? full : in_elems) * es);
  SymmetricBuffer recv_separate;
  if (!c.in_place) recv_separate = SymmetricBuffer(world, out_elems * es);
  const SymmetricBuffer& recv = c.in_place ? send : recv_separate;
  // Inputs: for in-place AG, rank r's input sits at element r*count of its buffer.
  std::vector<std::vector<unsigned char>> in(n);
  for (int r = 0; r < n; ++r) {
    in[r] = random_data(c.dtype, in_elems, 1234u + 77u * r + std::uint32_t(c.count));
    if (r < first || r >= last) continue;
    const std::size_t at = (c.in_place && c.op == Collective::kAllGather) ? r * c.count * es : 0;
    OVL_CUDA_CHECK(cudaMemcpy(static_cast<char*>(send.peer_ptr(r)) + at, in[r].data(), in[r].size(), cudaMemcpyHostToDevice));
  }
  // Without it the last 48 bytes of a 2 MiB + 48-byte input were sometimes still in flight when the collective read
  // them (the H200, 2026-12-02: zeros in the last 24 fp16 elements, nccl and tma-pull alike).
  OVL_CUDA_CHECK(test::finish_setup());
  CollectiveOptions opt;
  opt.num_ctas = c.ctas;
  opt.pull_warps = pull_warps;
  opt.dst_zeroed = c.dst_zeroed;
  switch (c.op) {
    case Collective::kAllReduce: coll.all_reduce(send, recv, c.count, c.dtype, c.impl, opt, stream); break;
    case Collective::kReduceScatter: coll.reduce_scatter(send, recv, c.count, c.dtype, c.impl, opt, stream); break;
    case Collective::kAllGather: coll.all_gather(send, recv, c.count, c.dtype, c.impl, opt, stream); break;
  }
  coll.check(stream);
  std::size_t wrong = 0;
  std::vector<unsigned char> got(out_elems * es);
  for (int r = first; r < last; ++r) {
    // Where rank r's result is: in-place RS leaves it at element r*count.
    const std::size_t at = (c.in_place && c.op == Collective::kReduceScatter) ? r * c.count * es : 0;
    const std::size_t check_elems = c.op == Collective::kReduceScatter ? c.count : out_elems;
    OVL_CUDA_CHECK(cudaMemcpy(got.data(), static_cast<const char*>(recv.peer_ptr(r)) + at, check_elems * es, cudaMemcpyDeviceToHost));
    if (r == first && result0 != nullptr) *result0 = got;
    for (std::size_t i = 0; i < check_elems; ++i) {
      const double g = to_double(c.dtype, got.data() + i * es);
      if (c.op == Collective::kAllGather) {
        const std::size_t owner = i / c.count, j = i % c.count;
        if (std::memcmp(got.data() + i * es, in[owner].data() + j * es, es) != 0) {
          if (wrong < 3)
            ADD_FAILURE() << name(c, n) << ": rank " << r << " element " << i << " (byte " << i * es << " of "
                          << check_elems * es << ") got " << g << " want " << to_double(c.dtype, in[owner].data() + j * es);
          ++wrong;
        }
        continue;
      }
      const std::size_t j = c.op == Collective::kReduceScatter ? r * c.count + i : i;
      const SumReference ref = sum_reference(c.dtype, in, j);
      if (!ref.accepts(g)) {
        if (wrong < 3)
          ADD_FAILURE() << name(c, n) << ": rank " << r << " element " << i << " got " << g << " want " << ref.value;
        ++wrong;
      }
    }
  }
  return wrong;
}

class CollectivesTest : public HopperTest {
 protected:
  void SetUp() override {
    HopperTest::SetUp();
    if (IsSkipped()) return;
    OVL_CUDA_CHECK(cudaSetDevice(0));
    OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void sweep(int n) {
    WorldOptions wopt;
    World world = World::loopback(n, 0, wopt);
    Collectives coll(world);
    sweep(world, coll, stream_);
  }
  // Every implementation the World can run (NCCL needs distinct GPUs) x dtype x op x size, out of place and in place.
  static void sweep(const World& world, Collectives& coll, cudaStream_t stream) {
    const int n = world.size();
    std::vector<CommAlgo> impls{CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt};
    if (n == 1 || !world.is_loopback()) impls.push_back(CommAlgo::kNcclRing);
    for (CommAlgo impl : impls)
      for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32})
        for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
          // Not multiples of the 32 KB piece; RS/AG chunks of more than one rank must be 16-byte multiples.
          const std::size_t align = 16 / std::size_t(dtype_bytes(dtype));
          std::vector<std::size_t> counts{(1u << 20) + 24};
          if (op == Collective::kAllReduce || n == 1) {
            counts.push_back(1);
            counts.push_back(4097);
          } else {
            counts.push_back(align);
            counts.push_back(4096 + align);
          }
          for (std::size_t count : counts)
            for (int ctas : {1, 5}) {
              if (ctas == 1 && count > 5000) continue;
              const Case c{op, impl, dtype, count, ctas, false};
              SCOPED_TRACE(name(c, n));
              EXPECT_EQ(run_case(world, coll, c, stream), 0u) << name(c, n);
            }
          // In place, one size, 32 CTAs.
          const Case c{op, impl, dtype, 4096 * 8 + 2 * align, 32, true};
          SCOPED_TRACE(name(c, n));
          EXPECT_EQ(run_case(world, coll, c, stream), 0u) << name(c, n);
          // Push onto zeroed destinations (every rank adds its own piece too): two sizes, 1 and 5 CTAs.
          if (impl == CommAlgo::kTmaPush && op != Collective::kAllGather)
            for (const auto& [count, ctas] : {std::pair<std::size_t, int>{4096 + align, 1}, {(1u << 20) + 24, 5}}) {
              const Case z{op, impl, dtype, count, ctas, false, true};
              SCOPED_TRACE(name(z, n));
              EXPECT_EQ(run_case(world, coll, z, stream), 0u) << name(z, n);
            }
        }
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CollectivesTest, WorldOf1) { sweep(1); }
TEST_F(CollectivesTest, LoopbackWorldOf2) { sweep(2); }
TEST_F(CollectivesTest, LoopbackWorldOf4) { sweep(4); }
TEST_F(CollectivesTest, LoopbackWorldOf8) { sweep(8); }

// Small cases for compute-sanitizer (memcheck, racecheck, synccheck): every algorithm and op, worlds 2 and 4.
TEST_F(CollectivesTest, SanitizerSized) {
  for (int n : {2, 4}) {
    World world = World::loopback(n);
    Collectives coll(world);
    for (CommAlgo impl : {CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt})
      for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
        const Case c{op, impl, DType::kBF16, op == Collective::kAllReduce ? 20001u : 20008u, 3, false};
        EXPECT_EQ(run_case(world, coll, c, stream_), 0u) << name(c, n);
        if (impl == CommAlgo::kTmaPull) EXPECT_EQ(run_case(world, coll, c, stream_, nullptr, 1), 0u) << name(c, n) << " 1 pull warp";
      }
  }
}

TEST_F(CollectivesTest, ThreadsWorldOf1) {
  std::vector<World> worlds = World::threads({0});
  run_per_rank(worlds, [&](World& w) {
    Collectives coll(w);
    for (CommAlgo impl : {CommAlgo::kNcclRing, CommAlgo::kTmaPush, CommAlgo::kTmaPull})
      for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
        const Case c{op, impl, DType::kBF16, 4097, 4, false};
        EXPECT_EQ(run_case(w, coll, c, stream_), 0u) << name(c, 1);
      }
  });
}

// A real World over every visible GPU (threads backend: a host thread and a stream per rank, each rank checking its
// own output): NCCL, TMA push, TMA pull and SIMT across the GPUs' peer mappings (NVLink on the H200 machines). With
// one GPU this is a world of 1.
TEST_F(CollectivesTest, ThreadsWorldOfEveryGpu) {
  const std::vector<int> devices = test::every_gpu(kernels::kMaxRanks);
  std::vector<World> worlds = World::threads(devices);
  run_per_rank(worlds, [&](World& w) {
    test::Stream stream;
    Collectives coll(w);
    sweep(w, coll, stream);
  });
}

// Pull-reduce adds in a fixed rank order in fp32: bitwise identical run to run.
TEST_F(CollectivesTest, PullReduceIsDeterministic) {
  World world = World::loopback(8);
  Collectives coll(world);
  const Case c{Collective::kAllReduce, CommAlgo::kTmaPull, DType::kBF16, (1u << 20) + 24, 16, false};
  std::vector<unsigned char> first, again;
  ASSERT_EQ(run_case(world, coll, c, stream_, &first), 0u);
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(run_case(world, coll, c, stream_, &again), 0u);
    ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size()), 0) << "run " << i + 2 << " differs";
  }
  // Also independent of the CTA count and of how many warps share the adds.
  Case other = c;
  other.ctas = 3;
  for (int warps : {1, 3, 8}) {
    ASSERT_EQ(run_case(world, coll, other, stream_, &again, warps), 0u);
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size()), 0) << "3 CTAs, " << warps << " pull warps differ";
  }
}

// Pull-reduce with 1..8 summing warps in worlds of 3, 5 and 7: slots of stage/W bytes that are not powers of two
// (48 KiB / 5 -> 9824 bytes), sizes that are no multiple of a slot, AllReduce with tails (an odd count); every warp
// count gives the 4-warp result bit for bit (the sums run in rank order whoever does them).
TEST_F(CollectivesTest, PullReduceWarpCountsInOddWorlds) {
  for (int n : {3, 5, 7}) {
    World world = World::loopback(n);
    Collectives coll(world);
    for (DType dtype : {DType::kBF16, DType::kFP32})
      for (Collective op : {Collective::kAllReduce, Collective::kReduceScatter})
        for (int ctas : {1, 7}) {
          const std::size_t count = op == Collective::kAllReduce ? (1u << 17) + 5 : 3 * 4096 + 8;
          const Case c{op, CommAlgo::kTmaPull, dtype, count, ctas, false};
          SCOPED_TRACE(name(c, n));
          std::vector<unsigned char> four, other;
          ASSERT_EQ(run_case(world, coll, c, stream_, &four, 4), 0u);
          for (int warps : {1, 2, 3, 8}) {
            ASSERT_EQ(run_case(world, coll, c, stream_, &other, warps), 0u) << warps << " pull warps";
            EXPECT_EQ(std::memcmp(four.data(), other.data(), four.size()), 0) << warps << " pull warps differ";
          }
        }
  }
}

// Rank 0 of a loopback world of 2 launched alone (rank 1 never runs): a tma-push AllReduce in place on `buf`, one
// range of half of it per owner, 2 CTAs, a 50 ms timeout, epoch 1, recording into `err`.
kernels::CollectiveArguments lone_rank0(const SymmetricBuffer& buf, const SymmetricBuffer& flags,
                                        kernels::DeviceError* err) {
  kernels::CollectiveArguments a;
  a.op = Collective::kAllReduce;
  a.algo = CommAlgo::kTmaPush;
  a.world_size = 2;
  a.first_rank = 0;
  a.num_played_ranks = 1;  // rank 1 never runs
  for (int r = 0; r < 2; ++r) {
    a.src[r] = a.dst[r] = buf.peer_ptr(r);
    a.flags[r] = flags.peer<std::uint32_t>(r);
  }
  a.src_bytes = a.dst_bytes = buf.bytes();
  a.chunk_bytes = buf.bytes() / 2;
  a.src_owner_stride = a.dst_owner_stride = a.chunk_bytes;
  a.num_ctas = 2;
  a.timeout_ns = 50'000'000;
  a.error = err;
  return a;
}

// A peer that never arrives: rank 0 of a world of 2 launched alone waits for rank 1's start flag and times out.
TEST_F(CollectivesTest, MissingPeerTimesOut) {
  World world = World::loopback(2);
  SymmetricBuffer buf(world, 4096), flags(world, kernels::collective_flag_bytes());
  kernels::DeviceError* err = nullptr;
  OVL_CUDA_CHECK(cudaMallocManaged(&err, sizeof(*err)));
  std::memset(err, 0, sizeof(*err));
  kernels::CollectiveKernel::run(lone_rank0(buf, flags, err), nullptr, stream_);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(err->code, 1u);
  EXPECT_EQ(err->rank, 0u);
  EXPECT_EQ(err->peer, 1u);
  EXPECT_EQ(kernels::WaitKind(err->wait), kernels::WaitKind::kStart);
  EXPECT_NE(kernels::describe(*err).find("rank 0 timed out"), std::string::npos) << kernels::describe(*err);
  cudaFree(err);
}

// A peer that stops between groups: lone_rank0 on 3 tile groups of 4 KiB, 2 KiB per owner, where rank 1's flags
// (written here) say it entered the call and finished group 0 of every slice, nothing more (its group flag: 1 group of
// this epoch). args may be changed before expect_group1_timeout runs them.
class LoneRankAfterGroup0 {
 public:
  static constexpr int kGroups = 3;
  LoneRankAfterGroup0()
      : world_(World::loopback(2)),
        buf_(world_, kGroups * 4096),
        flags_(world_, kernels::collective_flag_bytes()),
        table_(world_, test::owner_runs(2, std::vector<std::size_t>(kGroups, 2048)), kGroups) {
    OVL_CUDA_CHECK(cudaMallocManaged(&err_, sizeof(*err_)));
    std::memset(err_, 0, sizeof(*err_));
    args = lone_rank0(buf_, flags_, err_);
    args.ranges = table_.device_ranges();
    args.list_begin = table_.device_list_begin();
    args.num_groups = kGroups;
    const std::uint32_t start = args.epoch;
    const std::uint64_t group0_done = kernels::collective_group_flag(args.epoch, 1);
    for (int s = 0; s < args.num_ctas; ++s) {
      OVL_CUDA_CHECK(cudaMemcpy(args.flags[0] + kernels::collective_flag_index(kernels::CollectiveFlag::kStart, 1, s),
                                &start, sizeof(start), cudaMemcpyHostToDevice));
      OVL_CUDA_CHECK(
          cudaMemcpy(kernels::collective_group_flags(args.flags[0]) + kernels::collective_group_flag_index(1, s),
                     &group0_done, sizeof(group0_done), cudaMemcpyHostToDevice));
    }
    OVL_CUDA_CHECK(test::finish_setup());
  }
  ~LoneRankAfterGroup0() { cudaFree(err_); }
  LoneRankAfterGroup0(const LoneRankAfterGroup0&) = delete;
  LoneRankAfterGroup0& operator=(const LoneRankAfterGroup0&) = delete;

  // Runs args to the end on `stream`: rank 0 times out waiting for rank 1's group flag of group 1 (`kind`; 1 group of
  // this call seen done, 2 expected), and the description contains `needle`.
  void expect_group1_timeout(kernels::WaitKind kind, const std::string& needle, cudaStream_t stream) {
    kernels::CollectiveKernel::run(args, nullptr, stream);
    OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(err_->code, 1u);
    EXPECT_EQ(kernels::WaitKind(err_->wait), kind);
    EXPECT_EQ(err_->rank, 0u);
    EXPECT_EQ(err_->peer, 1u);
    EXPECT_EQ(err_->group, 1u);
    EXPECT_EQ(err_->observed, 1u);
    EXPECT_EQ(err_->expected, 2u);
    EXPECT_NE(kernels::describe(*err_).find(needle), std::string::npos) << kernels::describe(*err_);
  }

  kernels::CollectiveArguments args;

 private:
  World world_;
  SymmetricBuffer buf_, flags_;
  RangeTable table_;
  kernels::DeviceError* err_ = nullptr;
};

// The push AllReduce (lone_rank0's) gathers group 0, then times out waiting for rank 1's group 1: the record names the
// group and the groups seen done.
TEST_F(CollectivesTest, MissingGroupFlagTimesOut) {
  LoneRankAfterGroup0 lone;
  lone.expect_group1_timeout(kernels::WaitKind::kGroupReduceScatterDone,
                             "rank 0 timed out waiting for rank 1 to reduce-scatter tile group 1", stream_);
}

// A tma-push AllGather with gathered counters (in place, 2 CTAs) where rank 1 stops pushing after group 0: both CTAs
// raise rank 0's counter of group 0 and neither raises group 1 or 2; the wait for rank 1's rows of group 1 times out
// (a GEMM waiting for them would time out too) and the record names it.
TEST_F(CollectivesTest, MissingGatheredRowsTimeOut) {
  LoneRankAfterGroup0 lone;
  const int groups = LoneRankAfterGroup0::kGroups;
  test::DeviceArray<std::uint32_t> counters(groups);
  OVL_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  OVL_CUDA_CHECK(test::finish_setup());
  lone.args.op = Collective::kAllGather;
  lone.args.gathered[0] = counters.get();
  lone.expect_group1_timeout(kernels::WaitKind::kGroupGathered,
                             "rank 0 timed out waiting for the gathered rows of tile group 1 from rank 1", stream_);
  std::vector<std::uint32_t> raised(groups);
  OVL_CUDA_CHECK(cudaMemcpy(raised.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(raised, (std::vector<std::uint32_t>{2, 0, 0}));
}

// A gated reduce-scatter over `table` whose gate never opens (2 CTAs, 50 ms timeout): check() throws an ovl::Error
// whose message contains `needle`, and the World still runs a collective afterwards.
void expect_gate_timeout(const World& world, Collectives& coll, SymmetricBuffer& buf, const RangeTable& table,
                         GroupGate gate, CommAlgo impl, cudaStream_t stream, const std::string& needle) {
  CollectiveOptions opt;
  opt.num_ctas = 2;
  opt.timeout_ns = 50'000'000;
  coll.run_ranges(Collective::kReduceScatter, buf, buf, table, DType::kBF16, impl, opt, stream, &gate);
  try {
    coll.check(stream);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
  const Case c{Collective::kAllReduce, impl, DType::kBF16, 4097, 2, false};
  EXPECT_EQ(run_case(world, coll, c, stream), 0u);
}

// The same through the public API: a GEMM group counter that never reaches its value -> ovl::Error from check().
// Every algorithm: tma-push and tma-pull gate in their producer thread (thread 0), SIMT in its thread 0.
TEST_F(CollectivesTest, CounterThatNeverArrivesThrows) {
  World world = World::loopback(2);
  Collectives coll(world);
  SymmetricBuffer buf(world, 1 << 16), counters(world, 4 * sizeof(std::uint32_t));
  std::vector<TileRange> ranges{{0, 0, 0, 0, 1 << 15}, {1, 0, 1 << 15, 1 << 15, 1 << 15}};
  RangeTable table(world, ranges, 1);
  test::DeviceArray<std::uint32_t> expected(1);
  const std::uint32_t one = 1;
  OVL_CUDA_CHECK(cudaMemcpy(expected.get(), &one, sizeof(one), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(test::finish_setup());
  for (CommAlgo impl : {CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt}) {
    SCOPED_TRACE(to_string(impl));
    expect_gate_timeout(world, coll, buf, table, GroupGate{&counters, expected.get()}, impl, stream_,
                        "waited for tile group 0 of rank 0's GEMM");
  }
}

// A gate that times out in the middle of a stream: groups 0..2 are released, group 3 never is. The issuing thread
// stops at group 3 after issuing the units of groups 0..2 and its consumers stop too: checked here is that the
// kernel ends (no wait on a stage that was never loaded), the error names group 3, and the World runs a collective
// afterwards (expect_gate_timeout). The data of groups 0..2 is not checked.
TEST_F(CollectivesTest, GateTimesOutMidStream) {
  const int n = 2, groups = 4;
  const std::size_t piece = (256u << 10) + 16;  // several units per CTA and group, and not a multiple of a stage
  World world = World::loopback(n);
  Collectives coll(world);
  SymmetricBuffer buf(world, std::size_t(groups) * n * piece), counters(world, groups * sizeof(std::uint32_t));
  std::vector<TileRange> ranges;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < n; ++r) {
      const std::size_t at = (std::size_t(g) * n + r) * piece;
      ranges.push_back(TileRange{r, g, at, at, piece});
    }
  RangeTable table(world, ranges, groups);
  test::DeviceArray<std::uint32_t> expected(groups);
  const std::vector<std::uint32_t> want{1, 1, 1, 2};
  OVL_CUDA_CHECK(cudaMemcpy(expected.get(), want.data(), expected.bytes(), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(test::finish_setup());
  for (CommAlgo impl : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    SCOPED_TRACE(to_string(impl));
    for (int r = 0; r < n; ++r) kernels::launch_add_counters(counters.peer<std::uint32_t>(r), groups, 1, stream_);
    expect_gate_timeout(world, coll, buf, table, GroupGate{&counters, expected.get()}, impl, stream_,
                        "waited for tile group 3 of rank 0's GEMM");
    for (int r = 0; r < n; ++r) kernels::launch_reset_counters(counters.peer<std::uint32_t>(r), groups, stream_);
  }
}

// Tile-addressed, counter-polling reduce-scatter in place: tiles in scrambled order, owners interleaved, groups
// released late by a separate kernel (the stand-in GEMM) on another stream.
TEST_F(CollectivesTest, TileRangesGatedByCounters) {
  const int n = 4, tiles = 48, groups = 6;
  const std::size_t tile_elems = 128 * 64 + 8;  // a tile-ish size that is not a multiple of the 32 KB piece
  const std::size_t tile_bytes = tile_elems * 2;
  World world = World::loopback(n);
  Collectives coll(world);
  SymmetricBuffer buf(world, tiles * tile_bytes), counters(world, groups * sizeof(std::uint32_t));
  std::vector<TileRange> ranges;
  std::mt19937 gen(7);
  std::vector<int> order(tiles);
  for (int t = 0; t < tiles; ++t) order[t] = t;
  std::shuffle(order.begin(), order.end(), gen);
  for (int t : order) ranges.push_back(TileRange{t % n, t / (tiles / groups), t * tile_bytes, t * tile_bytes, tile_bytes});
  RangeTable table(world, ranges, groups);
  test::DeviceArray<std::uint32_t> expected(groups);
  const std::vector<std::uint32_t> ones(groups, 1);
  OVL_CUDA_CHECK(cudaMemcpy(expected.get(), ones.data(), expected.bytes(), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(test::finish_setup());
  test::Stream producer;
  // Collectives' constructor preloaded the collective and counter kernels (lazy loading would otherwise load the
  // producer's module only after the spinning consumer finished: the first run of this test on the H200 timed out).
  // The last pass: tma-push out of place onto a zeroed destination (CollectiveOptions::dst_zeroed), the tma mode's
  // form in a real world.
  SymmetricBuffer out(world, tiles * tile_bytes);
  for (int pass = 0; pass < 4; ++pass) {
    const bool zeroed = pass == 3;
    constexpr std::array kImpls{CommAlgo::kTmaPush, CommAlgo::kTmaPull, CommAlgo::kSimt};
    const CommAlgo impl = zeroed ? CommAlgo::kTmaPush : kImpls[std::size_t(pass)];
    SCOPED_TRACE(fmt::format("{}{}", to_string(impl), zeroed ? " dst-zeroed" : ""));
    std::vector<std::vector<unsigned char>> in(n);
    for (int r = 0; r < n; ++r) {
      in[r] = random_data(DType::kBF16, tiles * tile_elems, 99u + r);
      OVL_CUDA_CHECK(cudaMemcpy(buf.peer_ptr(r), in[r].data(), in[r].size(), cudaMemcpyHostToDevice));
    }
    OVL_CUDA_CHECK(test::finish_setup());
    CollectiveOptions opt;
    opt.num_ctas = 6;
    opt.dst_zeroed = zeroed;
    GroupGate gate{&counters, expected.get()};
    const SymmetricBuffer& dst = zeroed ? out : buf;
    coll.run_ranges(Collective::kReduceScatter, buf, dst, table, DType::kBF16, impl, opt, stream_, &gate);
    // The "GEMM" finishes its groups 2 ms later; every rank's counters.
    for (int r = 0; r < n; ++r) kernels::launch_add_counters_after(counters.peer<std::uint32_t>(r), groups, 1, 2'000'000, producer);
    coll.check(stream_);
    OVL_CUDA_CHECK(cudaStreamSynchronize(producer));
    for (int r = 0; r < n; ++r) kernels::launch_reset_counters(counters.peer<std::uint32_t>(r), groups, stream_);
    std::size_t wrong = 0;
    std::vector<unsigned char> got(tiles * tile_bytes);
    for (int r = 0; r < n; ++r) {
      OVL_CUDA_CHECK(cudaMemcpy(got.data(), dst.peer_ptr(r), got.size(), cudaMemcpyDeviceToHost));
      for (int t = r; t < tiles; t += n)
        for (std::size_t i = 0; i < tile_elems; ++i) {
          const std::size_t j = t * tile_elems + i;
          if (!sum_reference(DType::kBF16, in, j).accepts(to_double(DType::kBF16, got.data() + j * 2))) ++wrong;
        }
    }
    EXPECT_EQ(wrong, 0u);
  }
  OVL_CUDA_CHECK(cudaStreamSynchronize(producer));
}

// Where a GatedAllReduce writes: a zeroed destination (CollectiveOptions::dst_zeroed, the real-world tma mode's
// call), a destination of NaNs (bf16 0xffff: every element the AllReduce leaves unwritten shows), or its source.
enum class ArDst { kZeroed, kNaNs, kInPlace };
std::string_view dst_name(ArDst d) {
  return d == ArDst::kZeroed ? "dst-zeroed" : d == ArDst::kNaNs ? "dst of NaNs" : "in-place";
}

// A gated tma-push AllReduce over a range table in a loopback world of n ranks (one launch plays every rank), the
// ranges test::owner_runs; every rank's input is fresh random data. One launch per object (in place, the launch
// consumes the input).
class GatedAllReduce {
 public:
  GatedAllReduce(int n, const std::vector<std::size_t>& group_elems, std::uint32_t seed, ArDst where = ArDst::kZeroed)
      : where_(where),
        world_(World::loopback(n)),
        coll_(world_),
        ranges_(test::owner_runs(n, group_elems)),
        table_(world_, ranges_, int(group_elems.size())),
        src_(world_, table_.src_end()),
        dst_(where == ArDst::kInPlace ? SymmetricBuffer() : SymmetricBuffer(world_, table_.dst_end())),
        counters_(world_, group_elems.size() * sizeof(std::uint32_t)),
        expected_(group_elems.size()),
        in_(std::size_t(n)) {
    for (int r = 0; r < n; ++r) {
      in_[std::size_t(r)] = random_data(DType::kBF16, table_.src_end() / 2, seed + 101u * std::uint32_t(r));
      OVL_CUDA_CHECK(
          cudaMemcpy(src_.peer_ptr(r), in_[std::size_t(r)].data(), table_.src_end(), cudaMemcpyHostToDevice));
    }
    OVL_CUDA_CHECK(test::finish_setup());
  }
  GatedAllReduce(const GatedAllReduce&) = delete;
  GatedAllReduce& operator=(const GatedAllReduce&) = delete;

  Collectives& coll() { return coll_; }
  // Fills every rank's destination on `stream` (ArDst), then launches the AllReduce there, group g gated on every
  // rank's counter g reaching expected[g].
  void launch(int ctas, const std::vector<std::uint32_t>& expected, std::uint64_t timeout_ns, cudaStream_t stream) {
    OVL_CUDA_CHECK(
        cudaMemcpy(expected_.get(), expected.data(), expected.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
    if (where_ != ArDst::kInPlace)
      for (int r = 0; r < world_.size(); ++r)
        OVL_CUDA_CHECK(cudaMemsetAsync(dst_.peer_ptr(r), where_ == ArDst::kZeroed ? 0 : 0xff, dst_.bytes(), stream));
    CollectiveOptions opt;
    opt.num_ctas = ctas;
    opt.timeout_ns = timeout_ns;
    opt.dst_zeroed = where_ == ArDst::kZeroed;
    const GroupGate gate{&counters_, expected_.get()};
    coll_.run_ranges(Collective::kAllReduce, src_, out(), table_, DType::kBF16, CommAlgo::kTmaPush, opt, stream, &gate);
  }
  // Adds 1 to counter g of every rank for g in [g0, g1) on `stream`, group after group, each group delay_ns after
  // the one before (a stand-in GEMM finishing its groups in order).
  void release(int g0, int g1, std::uint64_t delay_ns, cudaStream_t stream) {
    for (int g = g0; g < g1; ++g)
      for (int r = 0; r < world_.size(); ++r)
        kernels::launch_add_counters_after(counters_.peer<std::uint32_t>(r) + g, 1, 1, r == 0 ? delay_ns : 0, stream);
  }
  void reset_counters(cudaStream_t stream) {
    for (int r = 0; r < world_.size(); ++r)
      kernels::launch_reset_counters(counters_.peer<std::uint32_t>(r), table_.num_groups(), stream);
  }
  // Elements of the groups [g0, g1) on any rank that are not the AllReduce's result (sum_reference; the first few
  // reported).
  std::size_t wrong(int g0, int g1) const {
    std::size_t wrong = 0;
    std::vector<unsigned char> got(table_.dst_end());
    for (int r = 0; r < world_.size(); ++r) {
      OVL_CUDA_CHECK(cudaMemcpy(got.data(), out().peer_ptr(r), got.size(), cudaMemcpyDeviceToHost));
      for (const TileRange& t : ranges_) {
        if (t.group < g0 || t.group >= g1) continue;
        for (std::size_t j = t.dst_offset / 2; j < (t.dst_offset + t.bytes) / 2; ++j) {
          const double g = to_double(DType::kBF16, got.data() + j * 2);
          const SumReference ref = sum_reference(DType::kBF16, in_, j);
          if (ref.accepts(g)) continue;
          if (wrong < 3)
            ADD_FAILURE() << "rank " << r << " group " << t.group << " owner " << t.owner << " element " << j << " got "
                          << g << " want " << ref.value;
          ++wrong;
        }
      }
    }
    return wrong;
  }

 private:
  const SymmetricBuffer& out() const { return where_ == ArDst::kInPlace ? src_ : dst_; }

  ArDst where_;
  World world_;
  Collectives coll_;
  std::vector<TileRange> ranges_;
  RangeTable table_;
  SymmetricBuffer src_, dst_, counters_;  // dst_: empty in place
  test::DeviceArray<std::uint32_t> expected_;
  std::vector<std::vector<unsigned char>> in_;
};

// The tma-push AllReduce gathers group by group behind its reduce-scatter: 5 groups of uneven sizes (smaller and
// larger than a ring stage, tails, owners without a run), released by a stand-in GEMM one group at a time 0.2 ms
// apart; worlds of 2, 4 and 8 played by one launch, 1, 3 and 8 CTAs; onto zeroed destinations, other destinations
// and in place; every rank's whole result against the CPU reference (sum_reference's tolerance).
TEST_F(CollectivesTest, PushAllReduceGathersGroupByGroup) {
  const std::vector<std::size_t>& group_elems = test::kUnevenGroups;
  const int groups = int(group_elems.size());
  test::Stream producer;
  for (ArDst where : {ArDst::kZeroed, ArDst::kNaNs, ArDst::kInPlace})
    for (int n : {2, 4, 8})
      for (int ctas : {1, 3, 8}) {
        SCOPED_TRACE(fmt::format("{}, world of {}, {} CTAs", dst_name(where), n, ctas));
        GatedAllReduce ar(n, group_elems, 1000u * std::uint32_t(n) + std::uint32_t(ctas), where);
        ar.launch(ctas, std::vector<std::uint32_t>(std::size_t(groups), 1), kernels::kDefaultTimeoutNs, stream_);
        ar.release(0, groups, 200'000, producer);
        ar.coll().check(stream_);
        OVL_CUDA_CHECK(cudaStreamSynchronize(producer));
        ar.reset_counters(stream_);
        EXPECT_EQ(ar.wrong(0, groups), 0u);
      }
}

// The gather of group g - 1 runs right after the reduce-scatter of group g, not after every group's: with groups
// 0..2 released and group 3's gate never opening, the AllReduce has gathered groups 0 and 1 on every rank when the
// gate times out (a gather after every group's reduce-scatter would have gathered none). The error names group 3.
TEST_F(CollectivesTest, PushAllReduceGathersReleasedGroupsBeforeAGateTimesOut) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(fmt::format("world of {}", n));
    GatedAllReduce ar(n, {40'000, 30'008, 50'003, 20'000}, 77u + std::uint32_t(n));
    ar.release(0, 4, 0, stream_);
    ar.launch(3, {1, 1, 1, 2}, 50'000'000, stream_);
    try {
      ar.coll().check(stream_);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("waited for tile group 3"), std::string::npos) << e.what();
    }
    ar.reset_counters(stream_);
    EXPECT_EQ(ar.wrong(0, 2), 0u);
  }
}

// An AllGather with a GroupRelease raises each group's counter only once the group's rows are in the destination: 5
// groups of uneven sizes (smaller and larger than a ring stage, a tail, owners without a run, CTAs without a byte of
// a group), worlds of 1, 2, 4 and 8 played by one launch, tma-push and tma-pull, 1, 3 and 8 CTAs out of place and 3
// in place (in a world of 1 nothing moves then: only the counters are checked), two calls without a reset (the
// counters end at num_ctas, then at twice that). A checker kernel on another stream reads each group's rows as soon
// as its counter says they arrived (test::run_gathered_all_gather): a counter raised early shows.
TEST_F(CollectivesTest, AllGatherRaisesEachGroupOnceItsRowsArrive) {
  const std::vector<std::size_t>& group_elems = test::kUnevenGroups;
  for (int n : {1, 2, 4, 8}) {
    World world = World::loopback(n);
    Collectives coll(world);
    for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull})
      for (const auto& [ctas, in_place] : {std::pair{1, false}, {3, false}, {8, false}, {3, true}}) {
        SCOPED_TRACE(fmt::format("{}, world of {}, {} CTAs{}", to_string(algo), n, ctas, in_place ? ", in place" : ""));
        EXPECT_EQ(test::run_gathered_all_gather(world, coll, algo, ctas, group_elems,
                                                500u * std::uint32_t(n) + std::uint32_t(ctas), stream_, in_place),
                  0u);
      }
  }
}

// An out-of-place AllGather with a GroupRelease whose gate never opens for rank 1's group 1 (loopback world of 2, one
// launch playing both ranks, 2 CTAs, 50 ms timeout): each rank copies its own rows of a group after START, group by
// group, so group 0 is copied, pushed or pulled and raised on both ranks before the gate of group 1 times out (an own
// copy of every group before START would stop at that gate and raise none), and the error names the gate.
TEST_F(CollectivesTest, OutOfPlaceAllGatherRaisesEarlierGroupsBeforeALaterGateTimesOut) {
  const int n = 2, groups = 3, ctas = 2;
  World world = World::loopback(n);
  Collectives coll(world);
  const std::vector<TileRange> ranges = test::owner_runs(n, {40'000, 30'008, 50'000});
  const RangeTable table(world, ranges, groups);
  const SymmetricBuffer src(world, table.src_end()), dst(world, table.dst_end()),
      gemm_counters(world, groups * sizeof(std::uint32_t));
  for (int r = 0; r < n; ++r) {  // every gate open but rank 1's of group 1
    const std::vector<std::uint32_t> open{1, r == 1 ? 0u : 1u, 1};
    OVL_CUDA_CHECK(cudaMemcpy(gemm_counters.peer<std::uint32_t>(r), open.data(), open.size() * sizeof(std::uint32_t),
                              cudaMemcpyHostToDevice));
  }
  test::DeviceArray<std::uint32_t> expected(groups), gathered(std::size_t(n) * groups);
  const std::vector<std::uint32_t> one(groups, 1);
  OVL_CUDA_CHECK(cudaMemcpy(expected.get(), one.data(), expected.bytes(), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(test::finish_setup());
  const GroupGate gate{&gemm_counters, expected.get()};
  const GroupRelease release{gathered.get()};
  for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    SCOPED_TRACE(to_string(algo));
    OVL_CUDA_CHECK(cudaMemset(gathered.get(), 0, gathered.bytes()));
    CollectiveOptions opt;
    opt.num_ctas = ctas;
    opt.timeout_ns = 50'000'000;
    coll.run_ranges(Collective::kAllGather, src, dst, table, DType::kBF16, algo, opt, stream_, &gate, &release);
    test::expect_error_naming([&] { coll.check(stream_); }, "waited for tile group 1 of rank 1's GEMM");
    std::vector<std::uint32_t> raised(std::size_t(n) * groups);
    OVL_CUDA_CHECK(cudaMemcpy(raised.data(), gathered.get(), gathered.bytes(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(raised, (std::vector<std::uint32_t>{ctas, 0, 0, ctas, 0, 0}));
  }
}

// The same over a threads World of every visible GPU (each rank's own counters and checker; one GPU: a world of 1).
TEST_F(CollectivesTest, AllGatherRaisesEachGroupInAThreadsWorldOfEveryGpu) {
  std::vector<World> worlds = World::threads(test::every_gpu(kernels::kMaxRanks));
  run_per_rank(worlds, [&](World& w) {
    test::Stream stream;
    Collectives coll(w);
    for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
      SCOPED_TRACE(fmt::format("{}, rank {} of {}", to_string(algo), w.rank(), w.size()));
      EXPECT_EQ(test::run_gathered_all_gather(w, coll, algo, 3, test::kUnevenGroups, 31u, stream), 0u);
    }
  });
}

// A GroupRelease goes only with an AllGather on tma-push or tma-pull, and needs its counters: anything else is
// refused by name before a launch.
TEST_F(CollectivesTest, GroupReleaseIsRefusedByName) {
  World world = World::loopback(2);
  Collectives coll(world);
  SymmetricBuffer buf(world, 1 << 16);
  const std::vector<TileRange> ranges{{0, 0, 0, 0, 1 << 15}, {1, 0, 1 << 15, 1 << 15, 1 << 15}};
  RangeTable table(world, ranges, 1);
  test::DeviceArray<std::uint32_t> counters(2);
  const GroupRelease release{counters.get()};
  const auto call = [&](Collective op, CommAlgo algo, const GroupRelease& r) {
    coll.run_ranges(op, buf, buf, table, DType::kBF16, algo, CollectiveOptions{}, stream_, nullptr, &r);
  };
  // One op / algorithm refusal shows run_ranges passes the release on (CollectiveArguments tests check them all).
  test::expect_error_naming([&] { call(Collective::kReduceScatter, CommAlgo::kTmaPush, release); },
                            "got reducescatter tma-push");
  test::expect_error_naming([&] { call(Collective::kAllGather, CommAlgo::kTmaPush, GroupRelease{}); },
                            "counters = null");
  EXPECT_EQ(coll.epoch(), 0u) << "a refused call launched";
}

// The counter wait kernel: times out on a counter below its target (naming the group, the values seen and
// expected, and stamping when it gave up), passes once the counter is added to, and returns at once (without
// waiting) when the record already holds a timeout.
TEST_F(CollectivesTest, WaitKernelTimesOutAndPasses) {
  test::DeviceArray<std::uint32_t> counters_d(4);
  std::uint32_t* counters = counters_d.get();
  unsigned long long* stamp = nullptr;
  kernels::DeviceError* err = nullptr;
  OVL_CUDA_CHECK(cudaMemset(counters, 0, counters_d.bytes()));
  OVL_CUDA_CHECK(test::finish_setup());
  OVL_CUDA_CHECK(cudaMallocManaged(&err, sizeof(*err)));
  OVL_CUDA_CHECK(cudaMallocManaged(&stamp, sizeof(*stamp)));
  std::memset(err, 0, sizeof(*err));
  *stamp = 0;
  kernels::launch_wait_counter(counters + 2, 1, 2, 50'000'000, err, stamp, stream_);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(err->code, 1u);
  EXPECT_EQ(kernels::WaitKind(err->wait), kernels::WaitKind::kCounterWait);
  EXPECT_EQ(err->group, 2u);
  EXPECT_EQ(err->observed, 0u);
  EXPECT_EQ(err->expected, 1u);
  EXPECT_NE(*stamp, 0ull);
  EXPECT_NE(kernels::describe(*err).find("counter wait kernel waited for tile group 2"), std::string::npos)
      << kernels::describe(*err);
  // A recorded timeout stops later waits at once: this one would otherwise wait its 10 s timeout (its stamp, taken
  // when it stops, is compared with one taken just before it; half the timeout separates the two outcomes).
  const unsigned long long before_stamp = *stamp;
  kernels::launch_stamp(stamp, stream_);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const unsigned long long before = *stamp;
  EXPECT_GT(before, before_stamp);
  kernels::launch_wait_counter(counters + 3, 1, 3, 10'000'000'000ull, err, stamp, stream_);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_LT(*stamp - before, 5'000'000'000ull) << "the wait did not stop at the recorded timeout";
  EXPECT_EQ(err->group, 2u);  // the first timeout's record stays
  std::memset(err, 0, sizeof(*err));
  kernels::launch_add_counters(counters, 4, 2, stream_);
  for (int g = 0; g < 4; ++g) kernels::launch_wait_counter(counters + g, 2, g, 50'000'000, err, nullptr, stream_);
  kernels::launch_reset_counters(counters, 4, stream_);
  kernels::launch_wait_counter(counters, 0, 0, 50'000'000, err, nullptr, stream_);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(err->code, 0u) << kernels::describe(*err);
  cudaFree(stamp);
  cudaFree(err);
}

// The local copies and the bare TMA ring behind bench_collectives' copy/ and ring/ cases (bandwidth per CTA):
// both schedules, sizes that are not multiples of a stage (copies also with a < 16-byte tail), 1, 7 and 133
// CTAs (more CTAs than pieces leaves some idle). A copy must be exact; a bf16 reduce-add of two bf16 values rounds
// once, so it must equal the exact (fp64) sum rounded once to bf16, bit for bit.
TEST_F(CollectivesTest, LocalCopiesAndRings) {
  using kernels::RingSchedule;
  const std::size_t max_bytes = (std::size_t(3) << 20) + 4096 + 7;
  const std::vector<unsigned char> src_h = random_data(DType::kBF16, max_bytes / 2 + 1, 11);
  const std::vector<unsigned char> base_h = random_data(DType::kBF16, max_bytes / 2 + 1, 12);
  test::DeviceArray<unsigned char> src_d(max_bytes), dst_d(max_bytes);
  void *src = src_d.get(), *dst = dst_d.get();
  OVL_CUDA_CHECK(cudaMemcpy(src, src_h.data(), max_bytes, cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(test::finish_setup());
  std::vector<unsigned char> got(max_bytes);
  for (RingSchedule schedule : {RingSchedule::kInterleaved, RingSchedule::kSlices})
    for (int ctas : {1, 7, 133})
      for (std::size_t bytes : {std::size_t(48 * 1024 - 16), std::size_t(3) << 20, max_bytes}) {
        const std::string what = fmt::format("{} bytes, {} CTAs, {}", bytes, ctas,
                                             schedule == RingSchedule::kInterleaved ? "interleaved" : "slices");
        // Copies: TMA and SIMT (16-byte multiples only).
        for (kernels::CopyImpl impl : {kernels::CopyImpl::kTma, kernels::CopyImpl::kSimt}) {
          if (impl == kernels::CopyImpl::kSimt && bytes % 16 != 0) continue;
          const char* name = impl == kernels::CopyImpl::kTma ? "tma" : "simt";
          OVL_CUDA_CHECK(cudaMemcpyAsync(dst, base_h.data(), max_bytes, cudaMemcpyHostToDevice, stream_));
          kernels::launch_local_copy(impl, dst, src, bytes, ctas, 256, stream_, schedule);
          OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
          OVL_CUDA_CHECK(cudaMemcpy(got.data(), dst, max_bytes, cudaMemcpyDeviceToHost));
          EXPECT_EQ(std::memcmp(got.data(), src_h.data(), bytes), 0) << what << ", copy " << name;
          EXPECT_EQ(std::memcmp(got.data() + bytes, base_h.data() + bytes, max_bytes - bytes), 0)
              << what << ", copy " << name << " wrote past the end";
        }
        // bf16 reduce-add on the default ring and on the shortest and deepest rings (2 and 8 stages: the
        // consumer's one-unit lag is then all or little of the ring).
        const std::size_t rbytes = bytes / 16 * 16;
        for (kernels::TmaRingShape shape : {kernels::kDefaultTmaRing, kernels::TmaRingShape{2, 16 * 1024},
                                            kernels::TmaRingShape{8, 8 * 1024}}) {
          OVL_CUDA_CHECK(cudaMemcpyAsync(dst, base_h.data(), max_bytes, cudaMemcpyHostToDevice, stream_));
          kernels::LocalRingArguments a;
          a.op = kernels::RingOp::kReduceAddBf16;
          a.dst = dst;
          a.src = src;
          a.bytes = rbytes;
          a.num_ctas = ctas;
          a.shape = shape;
          a.schedule = schedule;
          kernels::launch_local_ring(a, stream_);
          OVL_CUDA_CHECK(cudaStreamSynchronize(stream_));
          OVL_CUDA_CHECK(cudaMemcpy(got.data(), dst, max_bytes, cudaMemcpyDeviceToHost));
          std::size_t wrong = 0;
          for (std::size_t i = 0; i + 2 <= rbytes; i += 2) {
            unsigned char want[2];
            from_double(DType::kBF16, to_double(DType::kBF16, &base_h[i]) + to_double(DType::kBF16, &src_h[i]), want);
            wrong += std::memcmp(want, &got[i], 2) != 0;
          }
          EXPECT_EQ(wrong, 0u) << what << ", reduce, ring " << shape.stages << " x " << shape.stage_bytes;
          EXPECT_EQ(std::memcmp(got.data() + rbytes, base_h.data() + rbytes, max_bytes - rbytes), 0)
              << what << ", reduce wrote past the end";
        }
      }
}

TEST_F(CollectivesTest, BadArgumentsAreRejectedByName) {
  World world = World::loopback(4);
  Collectives coll(world);
  SymmetricBuffer buf(world, 1 << 16);
  CollectiveOptions opt;
  auto message = [&](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  opt.num_ctas = 0;
  EXPECT_NE(message([&] { coll.all_reduce(buf, buf, 1024, DType::kBF16, CommAlgo::kTmaPush, opt, stream_); }).find("num_ctas = 0"),
            std::string::npos);
  opt.num_ctas = 4;
  opt.simt_threads = 1000;
  EXPECT_NE(message([&] { coll.all_reduce(buf, buf, 1024, DType::kBF16, CommAlgo::kSimt, opt, stream_); }).find("simt_threads = 1000"),
            std::string::npos);
  opt.simt_threads = 512;
  EXPECT_NE(message([&] { coll.reduce_scatter(buf, buf, 3, DType::kBF16, CommAlgo::kTmaPull, opt, stream_); }).find("recv_count = 3"),
            std::string::npos);
  EXPECT_NE(message([&] { coll.all_reduce(buf, buf, 1 << 20, DType::kBF16, CommAlgo::kTmaPush, opt, stream_); }).find("count = 1048576"),
            std::string::npos);
  EXPECT_NE(message([&] { coll.all_reduce(buf, buf, 1024, DType::kBF16, CommAlgo::kNcclRing, opt, stream_); })
                .find("NCCL needs distinct GPUs: loopback world of 4 ranks"),
            std::string::npos);
  std::vector<TileRange> bad{{0, 0, 8, 0, 32}};
  EXPECT_NE(message([&] { RangeTable t(world, bad, 1); }).find("not multiples of 16"), std::string::npos);
  std::vector<TileRange> bad_owner{{5, 0, 0, 0, 32}};
  EXPECT_NE(message([&] { RangeTable t(world, bad_owner, 1); }).find("owner = 5"), std::string::npos);
}

}  // namespace
}  // namespace ovl
