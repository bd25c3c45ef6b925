// An AllGather that raises per-group counters as its rows arrive (GroupRelease), checked the way a GEMM would read it:
// a kernel on another stream waits for each group's counter in turn and compares that group's rows right away, so a
// counter raised before its rows have all arrived shows as wrong bytes. Shared by test_collectives (loopback and
// threads worlds) and test_world (MPI worlds).
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu_test.hpp"
#include "ovl/core/collectives.hpp"
#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/tma_ptx.cuh"

namespace ovl::test {

// Five tile groups of uneven sizes (bf16 elements): smaller and larger than a ring stage, a tail, a group some owners
// and CTAs have no byte of.
inline const std::vector<std::size_t> kUnevenGroups{100'003, 4'096, 257'005, 24, 61'443};

// Group g of group_elems[g] bf16 elements from a 16-byte aligned start, dealt to the n owners in near-equal runs of
// whole 16-byte units (the last owners may get less or none; a group of an odd size ends in a tail), src and dst at
// the same offsets.
inline std::vector<TileRange> owner_runs(int n, const std::vector<std::size_t>& group_elems) {
  std::vector<TileRange> ranges;
  std::uint64_t at = 0;
  for (int g = 0; g < int(group_elems.size()); ++g) {
    const std::uint64_t bytes = group_elems[std::size_t(g)] * 2, unit = 16 * std::uint64_t(n);
    const std::uint64_t run = (bytes + unit - 1) / unit * 16;
    for (int r = 0; r < n; ++r) {
      const std::uint64_t b = std::min(bytes, r * run), e = std::min(bytes, (r + 1) * run);
      if (e > b) ranges.push_back(TileRange{r, g, at + b, at + b, e - b});
    }
    at += (bytes + 15) / 16 * 16;
  }
  return ranges;
}

// Bytes of a destination that belong to one tile group.
struct DstSpan {
  std::uint64_t offset, bytes;
};

// What check_gathered_groups reads and writes; block i checks played rank i.
struct GatheredCheck {
  const std::uint32_t* counters;  // played rank i's group g: counters[i * num_groups + g]
  int num_groups;
  std::uint32_t target;                          // the value that says a group has arrived
  const unsigned char* dst[kernels::kMaxRanks];  // played rank i's destination
  const unsigned char* want;                     // the expected destination (the same on every rank)
  const DstSpan* spans;                          // group g's: spans[span_begin[g] .. span_begin[g + 1])
  const int* span_begin;
  std::uint64_t timeout_ns;
  unsigned long long* wrong;  // [played rank]: bytes that differed when read
  int* late;                  // [played rank]: the first group whose counter missed the target in time, else -1
};

__device__ inline int differing_bytes(unsigned x, unsigned y) { return __popc(__vcmpne4(x, y)) / 8; }

// (Defined here, not inline: include this header from one file of a test binary.)
// For each group in order: thread 0 spins (ld.acquire.sys, with a timeout) until the group's counter reaches the
// target, then the whole block compares the group's bytes with the expected ones at once (L2 loads, never L1).
__global__ void check_gathered_groups(GatheredCheck c) {
  const int i = int(blockIdx.x);
  __shared__ int reached;
  for (int g = 0; g < c.num_groups; ++g) {
    if (threadIdx.x == 0) {
      const std::uint32_t* counter = c.counters + std::size_t(i) * std::size_t(c.num_groups) + std::size_t(g);
      const std::uint64_t start = kernels::ptx::global_timer_ns();
      std::uint32_t seen = 0;
      while ((seen = kernels::ptx::ld_acquire_sys(counter)) < c.target &&
             kernels::ptx::global_timer_ns() - start <= c.timeout_ns) {
      }
      reached = seen >= c.target;
      if (!reached) c.late[i] = g;
    }
    __syncthreads();
    if (!reached) return;
    unsigned long long wrong = 0;
    for (int s = c.span_begin[g]; s < c.span_begin[g + 1]; ++s) {
      const DstSpan span = c.spans[s];
      const unsigned char* got = c.dst[i] + span.offset;
      const unsigned char* want = c.want + span.offset;
      const std::uint64_t vecs = span.bytes / 16;
      for (std::uint64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
        const uint4 x = __ldcg(reinterpret_cast<const uint4*>(got) + v);
        const uint4 y = __ldcg(reinterpret_cast<const uint4*>(want) + v);
        wrong += differing_bytes(x.x, y.x) + differing_bytes(x.y, y.y) + differing_bytes(x.z, y.z) +
                 differing_bytes(x.w, y.w);
      }
      for (std::uint64_t b = vecs * 16 + threadIdx.x; b < span.bytes; b += blockDim.x)
        wrong += __ldcg(got + b) != __ldcg(want + b);
    }
    if (wrong != 0) atomicAdd(c.wrong + i, wrong);
    __syncthreads();  // every thread has read `reached` before thread 0 writes it again
  }
}

// A bf16 AllGather over owner_runs(world.size(), group_elems) with `algo`, `ctas` CTAs and a GroupRelease, on any World
// (the caller plays its ranks, as run_case in test_collectives: every rank of a loopback World, its own otherwise),
// `passes` calls without resetting the counters: during call p, check_gathered_groups (on its own stream, launched
// first) waits for each group's counter to reach (p + 1) x ctas and compares the group's rows at once. Each call's
// inputs are fresh random values, made here for every rank from `seed`, the call and the rank; every destination
// byte the rank does not own holds 0xff (bf16 NaN, no input's) before each call (in place: one buffer holding the
// rank's own ranges and 0xff elsewhere). Returns the wrong bytes the checker saw plus those of the whole
// destinations afterwards (the first few reported); a group that never reached its value, or a counter not exactly
// (p + 1) x ctas after call p, fails the test too.
inline std::size_t run_gathered_all_gather(const World& world, Collectives& coll, CommAlgo algo, int ctas,
                                           const std::vector<std::size_t>& group_elems, std::uint32_t seed,
                                           cudaStream_t stream, bool in_place = false, int passes = 2) {
  const int n = world.size(), first = world.first_local_rank(), played = world.num_local_ranks();
  const int groups = int(group_elems.size());
  cudaFuncAttributes attributes;  // loads the checker now: a lazy load at its launch could wait for running kernels
  OVL_CUDA_CHECK(cudaFuncGetAttributes(&attributes, check_gathered_groups));
  const std::vector<TileRange> ranges = owner_runs(n, group_elems);
  const RangeTable table(world, ranges, groups);
  const SymmetricBuffer src(world, table.src_end()),
      separate = in_place ? SymmetricBuffer() : SymmetricBuffer(world, table.dst_end());
  const SymmetricBuffer& dst = in_place ? src : separate;
  std::vector<DstSpan> spans;
  std::vector<int> span_begin;
  for (int g = 0; g < groups; ++g) {
    span_begin.push_back(int(spans.size()));
    for (const TileRange& t : ranges)
      if (t.group == g) spans.push_back(DstSpan{t.dst_offset, t.bytes});
  }
  span_begin.push_back(int(spans.size()));
  DeviceArray<std::uint32_t> counters(std::size_t(played) * std::size_t(groups));
  DeviceArray<unsigned char> want_d(table.dst_end());
  DeviceArray<DstSpan> spans_d(spans.size());
  DeviceArray<int> begin_d(span_begin.size()), late_d(static_cast<std::size_t>(played));
  DeviceArray<unsigned long long> wrong_d(static_cast<std::size_t>(played));
  OVL_CUDA_CHECK(cudaMemcpy(spans_d.get(), spans.data(), spans.size() * sizeof(DstSpan), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(cudaMemcpy(begin_d.get(), span_begin.data(), span_begin.size() * sizeof(int), cudaMemcpyHostToDevice));
  OVL_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  Stream checker;
  GroupRelease release;
  release.counters = counters.get();
  CollectiveOptions opt;
  opt.num_ctas = ctas;
  std::size_t wrong = 0;
  for (int pass = 0; pass < passes; ++pass) {
    SCOPED_TRACE(fmt::format("call {}", pass));
    std::vector<std::vector<std::uint16_t>> in(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      in[std::size_t(r)] =
          random_bf16(table.src_end() / 2, seed + 1000u * std::uint32_t(pass) + 101u * std::uint32_t(r));
    }
    std::vector<unsigned char> want(table.dst_end(), 0xff);
    for (const TileRange& t : ranges)
      std::memcpy(want.data() + t.dst_offset,
                  reinterpret_cast<const unsigned char*>(in[std::size_t(t.owner)].data()) + t.src_offset, t.bytes);
    for (int r = first; r < first + played; ++r) {
      if (!in_place) {
        OVL_CUDA_CHECK(cudaMemcpy(src.peer_ptr(r), in[std::size_t(r)].data(), table.src_end(), cudaMemcpyHostToDevice));
        OVL_CUDA_CHECK(cudaMemset(dst.peer_ptr(r), 0xff, table.dst_end()));
        continue;
      }
      std::vector<unsigned char> mine(table.dst_end(), 0xff);
      for (const TileRange& t : ranges)
        if (t.owner == r) std::memcpy(mine.data() + t.dst_offset, want.data() + t.dst_offset, t.bytes);
      OVL_CUDA_CHECK(cudaMemcpy(dst.peer_ptr(r), mine.data(), mine.size(), cudaMemcpyHostToDevice));
    }
    OVL_CUDA_CHECK(cudaMemcpy(want_d.get(), want.data(), want.size(), cudaMemcpyHostToDevice));
    OVL_CUDA_CHECK(cudaMemset(wrong_d.get(), 0, std::size_t(played) * sizeof(unsigned long long)));
    OVL_CUDA_CHECK(cudaMemset(late_d.get(), 0xff, std::size_t(played) * sizeof(int)));
    OVL_CUDA_CHECK(finish_setup());
    world.barrier();  // every rank's input and poisoned destination are in place before any call starts
    GatheredCheck c{};
    c.counters = release.counters;
    c.num_groups = groups;
    c.target = std::uint32_t(pass + 1) * std::uint32_t(ctas);
    for (int i = 0; i < played; ++i) c.dst[i] = static_cast<const unsigned char*>(dst.peer_ptr(first + i));
    c.want = want_d.get();
    c.spans = spans_d.get();
    c.span_begin = begin_d.get();
    c.timeout_ns = kernels::kDefaultTimeoutNs;
    c.wrong = wrong_d.get();
    c.late = late_d.get();
    check_gathered_groups<<<played, 256, 0, checker>>>(c);
    OVL_CUDA_CHECK(cudaGetLastError());
    coll.run_ranges(Collective::kAllGather, src, dst, table, DType::kBF16, algo, opt, stream, nullptr, &release);
    coll.check(stream);
    OVL_CUDA_CHECK(cudaStreamSynchronize(checker));
    std::vector<unsigned long long> seen_wrong(static_cast<std::size_t>(played));
    std::vector<int> late(static_cast<std::size_t>(played));
    std::vector<std::uint32_t> final_counters(counters.count());
    OVL_CUDA_CHECK(cudaMemcpy(seen_wrong.data(), wrong_d.get(), seen_wrong.size() * sizeof(seen_wrong[0]),
                              cudaMemcpyDeviceToHost));
    OVL_CUDA_CHECK(cudaMemcpy(late.data(), late_d.get(), late.size() * sizeof(int), cudaMemcpyDeviceToHost));
    OVL_CUDA_CHECK(cudaMemcpy(final_counters.data(), counters.get(), counters.bytes(), cudaMemcpyDeviceToHost));
    std::vector<unsigned char> got(table.dst_end());
    for (int i = 0; i < played; ++i) {
      const int r = first + i;
      EXPECT_EQ(late[std::size_t(i)], -1) << "rank " << r << ": the counter of this group never reached " << c.target;
      EXPECT_EQ(seen_wrong[std::size_t(i)], 0u) << "rank " << r << ": bytes read right after their group's counter";
      wrong += seen_wrong[std::size_t(i)];
      for (int g = 0; g < groups; ++g)
        EXPECT_EQ(final_counters[std::size_t(i) * std::size_t(groups) + std::size_t(g)], c.target)
            << "rank " << r << " group " << g << " after the call";
      OVL_CUDA_CHECK(cudaMemcpy(got.data(), dst.peer_ptr(r), got.size(), cudaMemcpyDeviceToHost));
      std::size_t after = 0;
      for (const TileRange& t : ranges)
        for (std::uint64_t b = t.dst_offset; b < t.dst_offset + t.bytes; ++b)
          if (got[b] != want[b] && after++ < 3)
            ADD_FAILURE() << "rank " << r << " group " << t.group << " owner " << t.owner << " byte " << b << " is "
                          << int(got[b]) << ", want " << int(want[b]);
      wrong += after;
    }
    world.barrier();  // no rank refills its buffers while a peer's call may still read them
  }
  return wrong;
}

}  // namespace ovl::test
