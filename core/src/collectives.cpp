// Host side of the collectives: validates, records the arguments, hands off to NCCL or to one kernel launch.
#include "ovl/core/collectives.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "ovl/core/nccl_check.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

namespace {
ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kFP16: return ncclFloat16;
    case DType::kFP32: return ncclFloat32;
    case DType::kE4M3: return ncclFloat8e4m3;
    case DType::kE5M2: return ncclFloat8e5m2;
  }
  return ncclFloat32;
}
}  // namespace

// ---- RangeTable ----
RangeTable::RangeTable(const World& world, std::span<const TileRange> ranges, int num_groups)
    : num_groups_(num_groups), world_size_(world.size()), device_(world.device()) {
  const int n = world_size_;
  OVL_CHECK(num_groups >= 1, "RangeTable: num_groups = {} < 1", num_groups);
  OVL_CHECK(!ranges.empty(), "RangeTable: no ranges");
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const TileRange& r = ranges[i];
    OVL_CHECK(r.owner >= 0 && r.owner < n, "RangeTable: range {} has owner = {} outside the world of {}", i, r.owner, n);
    OVL_CHECK(r.group >= 0 && r.group < num_groups, "RangeTable: range {} has group = {} outside 0..{}", i, r.group, num_groups - 1);
    OVL_CHECK(r.src_offset % 16 == 0 && r.dst_offset % 16 == 0,
              "RangeTable: range {} offsets src {} / dst {} are not multiples of 16 bytes (TMA)", i, r.src_offset, r.dst_offset);
    OVL_CHECK(r.bytes > 0, "RangeTable: range {} has bytes = 0", i);
    OVL_CHECK(r.bytes <= std::numeric_limits<std::uint64_t>::max() - std::max(r.src_offset, r.dst_offset),
              "RangeTable: range {} (offset {} / {} + {} bytes) overflows", i, r.src_offset, r.dst_offset, r.bytes);
    src_end_ = std::max(src_end_, r.src_offset + r.bytes);
    dst_end_ = std::max(dst_end_, r.dst_offset + r.bytes);
  }
  // Lists ordered (group, owner), ranges within a list in the order given; stream_begin = padded prefix.
  std::vector<std::size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(ranges[a].group, ranges[a].owner) < std::pair(ranges[b].group, ranges[b].owner);
  });
  std::vector<kernels::DeviceRange> host(ranges.size());
  std::vector<std::uint32_t> begin(std::size_t(num_groups) * n + 1, 0);
  std::uint64_t stream = 0;
  int list = -1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TileRange& r = ranges[order[i]];
    const int k = r.group * n + r.owner;
    if (k != list) {
      for (int j = list + 1; j <= k; ++j) begin[j] = std::uint32_t(i);
      list = k;
      stream = 0;
    }
    host[i] = kernels::DeviceRange{r.src_offset, r.dst_offset, r.bytes, stream};
    stream += (r.bytes + 15) / 16 * 16;
    range_bytes_.push_back(r.bytes);
  }
  for (std::size_t j = std::size_t(list) + 1; j < begin.size(); ++j) begin[j] = std::uint32_t(order.size());
  OVL_CUDA_CHECK(cudaSetDevice(device_));
  ranges_ = DeviceBuffer(host.size() * sizeof(host[0]));
  list_begin_ = DeviceBuffer(begin.size() * sizeof(begin[0]));
  copy_now(ranges_.get(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice);
  copy_now(list_begin_.get(), begin.data(), begin.size() * sizeof(begin[0]), cudaMemcpyHostToDevice);
}

std::uint64_t RangeTable::bytes_gcd_check(std::size_t element_bytes) const {
  for (std::uint64_t b : range_bytes_)
    if (b % element_bytes != 0) return b;
  return 0;
}

// ---- Collectives ----
Collectives::Collectives(const World& world) : world_(world) {
  OVL_CHECK(world.valid(), "Collectives on an empty World");
  OVL_CUDA_CHECK(cudaSetDevice(world.device()));
  kernels::preload_collective_kernels();  // no lazy module load while a collective spins (see the header)
  flags_ = SymmetricBuffer(world, kernels::collective_flag_bytes());  // zeroed, collective
  error_ = DeviceBuffer(sizeof(kernels::DeviceError));
  fill_now(error_.get(), 0, sizeof(kernels::DeviceError));
  world.barrier();
}

// The error record is freed with the World's device current.
Collectives::~Collectives() {
  if (cudaSetDevice(world_.device()) != cudaSuccess) std::fprintf(stderr, "ovl: Collectives: cudaSetDevice failed\n");
}

void Collectives::nccl(Collective op, const void* send, void* recv, std::size_t count, DType dtype,
                       const CollectiveOptions& options, cudaStream_t stream) const {
  OVL_CHECK(!(world_.is_loopback() && world_.size() > 1), "NCCL needs distinct GPUs: loopback world of {} ranks", world_.size());
  ncclComm_t comm = world_.nccl_comm(options.nccl_cta_bound);
  switch (op) {
    case Collective::kAllReduce: OVL_NCCL_CHECK(ncclAllReduce(send, recv, count, nccl_type(dtype), ncclSum, comm, stream)); break;
    case Collective::kReduceScatter:
      OVL_NCCL_CHECK(ncclReduceScatter(send, recv, count, nccl_type(dtype), ncclSum, comm, stream));
      break;
    case Collective::kAllGather: OVL_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(dtype), comm, stream)); break;
  }
}

kernels::CollectiveArguments Collectives::base_args(Collective op, const SymmetricBuffer& src, const SymmetricBuffer& dst,
                                                    DType dtype, CommAlgo algo, const CollectiveOptions& options) const {
  const int n = world_.size();
  OVL_CHECK(src.size() == n && dst.size() == n, "buffers of {} / {} ranks on a world of {}", src.size(), dst.size(), n);
  kernels::CollectiveArguments a;
  a.op = op;
  a.algo = algo;
  a.dtype = dtype;
  a.world_size = n;
  a.first_rank = world_.first_local_rank();
  a.num_played_ranks = world_.num_local_ranks();
  for (int r = 0; r < n; ++r) {
    a.src[r] = src.peer_ptr(r);
    a.dst[r] = dst.peer_ptr(r);
    a.flags[r] = flags_.peer<std::uint32_t>(r);
  }
  a.src_bytes = src.bytes();
  a.dst_bytes = dst.bytes();
  a.num_ctas = options.num_ctas;
  a.simt_threads = options.simt_threads;
  a.pull_warps = options.pull_warps;
  a.timeout_ns = options.timeout_ns;
  a.dst_zeroed = options.dst_zeroed;
  a.error = error_.as<kernels::DeviceError>();
  return a;
}

void Collectives::launch(kernels::CollectiveArguments& args, cudaStream_t stream) {
  args.epoch = epoch_ + 1;
  const std::string why = kernels::CollectiveKernel::can_implement(args);
  OVL_CHECK(why.empty(), "{} {} on rank {} of {}: {}", to_string(args.algo), to_string(args.op),
            world_.rank(), world_.size(), why);
  OVL_CUDA_CHECK(cudaSetDevice(world_.device()));
  kernels::CollectiveKernel::run(args, nullptr, stream);
  ++epoch_;  // only once the launch went out: every rank's epochs stay in step
}

void Collectives::all_reduce(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t count, DType dtype,
                             CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream) {
  const std::size_t es = size_t(dtype_bytes(dtype));
  OVL_CHECK(count > 0, "all_reduce: count = 0");
  OVL_CHECK(count <= std::numeric_limits<std::size_t>::max() / es, "all_reduce: count = {} overflows a byte count", count);
  OVL_CHECK(send.bytes() >= count * es && recv.bytes() >= count * es, "all_reduce: count = {} ({} bytes) exceeds send {} / recv {} bytes",
            count, count * es, send.bytes(), recv.bytes());
  if (algo == CommAlgo::kNcclRing) return nccl(Collective::kAllReduce, send.local_ptr(), recv.local_ptr(), count, dtype, options, stream);
  // Owner r reduces elements [r*c, (r+1)*c) with c = ceil(count/n) rounded to 16 bytes; the last owner takes the
  // rest (possibly less, possibly nothing): the uniform layout needs equal chunks, so the tail goes in a table.
  kernels::CollectiveArguments a = base_args(Collective::kAllReduce, send, recv, dtype, algo, options);
  const int n = world_.size();
  const std::uint64_t total = count * es;
  if (total % (std::uint64_t(n) * 16) == 0) {
    a.chunk_bytes = total / n;
    a.src_owner_stride = a.dst_owner_stride = a.chunk_bytes;
    launch(a, stream);
    return;
  }
  // Unequal chunks: run as a one-group range table built on the fly (cached per (count, dtype) would be better;
  // all-reduces of odd sizes are not the hot path).
  const std::uint64_t elems_per_owner = ((count + n - 1) / n * es + 15) / 16 * 16 / es;
  std::vector<TileRange> ranges;
  for (int r = 0; r < n; ++r) {
    const std::uint64_t b = std::min<std::uint64_t>(count, r * elems_per_owner);
    const std::uint64_t e = std::min<std::uint64_t>(count, (r + 1) * elems_per_owner);
    if (e > b) ranges.push_back(TileRange{r, 0, b * es, b * es, (e - b) * es});
  }
  RangeTable table(world_, ranges, 1);
  run_ranges(Collective::kAllReduce, send, recv, table, dtype, algo, options, stream);
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));  // the table is freed on return
}

void Collectives::reduce_scatter(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t recv_count,
                                 DType dtype, CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream) {
  const std::size_t es = size_t(dtype_bytes(dtype));
  const int n = world_.size();
  const bool in_place = &send == &recv;
  OVL_CHECK(recv_count > 0, "reduce_scatter: recv_count = 0");
  OVL_CHECK(recv_count <= std::numeric_limits<std::size_t>::max() / (es * std::size_t(n)),
            "reduce_scatter: recv_count = {} x world {} overflows a byte count", recv_count, n);
  OVL_CHECK(send.bytes() >= n * recv_count * es, "reduce_scatter: send has {} bytes < world {} x recv_count {} x {} B",
            send.bytes(), n, recv_count, es);
  OVL_CHECK(in_place || recv.bytes() >= recv_count * es, "reduce_scatter: recv has {} bytes < recv_count {} x {} B",
            recv.bytes(), recv_count, es);
  if (algo == CommAlgo::kNcclRing) {
    void* out = static_cast<char*>(recv.local_ptr()) + (in_place ? std::size_t(world_.rank()) * recv_count * es : 0);
    return nccl(Collective::kReduceScatter, send.local_ptr(), out, recv_count, dtype, options, stream);
  }
  kernels::CollectiveArguments a = base_args(Collective::kReduceScatter, send, recv, dtype, algo, options);
  a.chunk_bytes = recv_count * es;
  a.src_owner_stride = a.chunk_bytes;
  a.dst_owner_stride = in_place ? a.chunk_bytes : 0;
  OVL_CHECK(a.src_owner_stride % 16 == 0 || n == 1,
            "reduce_scatter: recv_count = {} x {} B is not a multiple of 16 bytes (each owner's chunk must start 16-byte aligned)",
            recv_count, es);
  if (n == 1) a.src_owner_stride = a.dst_owner_stride = 0;
  launch(a, stream);
}

void Collectives::all_gather(const SymmetricBuffer& send, const SymmetricBuffer& recv, std::size_t send_count, DType dtype,
                             CommAlgo algo, const CollectiveOptions& options, cudaStream_t stream) {
  const std::size_t es = size_t(dtype_bytes(dtype));
  const int n = world_.size();
  const bool in_place = &send == &recv;
  OVL_CHECK(send_count > 0, "all_gather: send_count = 0");
  OVL_CHECK(send_count <= std::numeric_limits<std::size_t>::max() / (es * std::size_t(n)),
            "all_gather: send_count = {} x world {} overflows a byte count", send_count, n);
  OVL_CHECK(recv.bytes() >= n * send_count * es, "all_gather: recv has {} bytes < world {} x send_count {} x {} B", recv.bytes(),
            n, send_count, es);
  OVL_CHECK(in_place || send.bytes() >= send_count * es, "all_gather: send has {} bytes < send_count {} x {} B", send.bytes(),
            send_count, es);
  if (algo == CommAlgo::kNcclRing) {
    const void* in = static_cast<const char*>(send.local_ptr()) + (in_place ? std::size_t(world_.rank()) * send_count * es : 0);
    return nccl(Collective::kAllGather, in, recv.local_ptr(), send_count, dtype, options, stream);
  }
  kernels::CollectiveArguments a = base_args(Collective::kAllGather, send, recv, dtype, algo, options);
  a.chunk_bytes = send_count * es;
  a.src_owner_stride = in_place ? a.chunk_bytes : 0;
  a.dst_owner_stride = a.chunk_bytes;
  OVL_CHECK(a.dst_owner_stride % 16 == 0 || n == 1,
            "all_gather: send_count = {} x {} B is not a multiple of 16 bytes (each owner's chunk must start 16-byte aligned)",
            send_count, es);
  if (n == 1) a.src_owner_stride = a.dst_owner_stride = 0;
  launch(a, stream);
}

void Collectives::run_ranges(Collective op, const SymmetricBuffer& src, const SymmetricBuffer& dst,
                             const RangeTable& table, DType dtype, CommAlgo algo, const CollectiveOptions& options,
                             cudaStream_t stream, const GroupGate* gate, const GroupRelease* release) {
  OVL_CHECK(algo != CommAlgo::kNcclRing, "run_ranges: tile-addressed collectives are TMA/SIMT only (NCCL needs contiguous data)");
  // The op and algorithm a release needs are CollectiveKernel::can_implement's to check (launch, before any CUDA
  // call); null counters would leave the kernel's arguments without a release, so they are refused here.
  OVL_CHECK(release == nullptr || release->counters != nullptr, "run_ranges: GroupRelease counters = null");
  OVL_CHECK(table.world_size() == world_.size(), "run_ranges: table for {} ranks on a world of {}", table.world_size(), world_.size());
  const std::size_t es = size_t(dtype_bytes(dtype));
  const std::uint64_t bad = table.bytes_gcd_check(es);
  OVL_CHECK(bad == 0, "run_ranges: a range of {} bytes is not a multiple of the {}-byte {} element", bad, es, to_string(dtype));
  OVL_CHECK(table.src_end() <= src.bytes(), "run_ranges: ranges reach src byte {} > src size {}", table.src_end(), src.bytes());
  OVL_CHECK(table.dst_end() <= dst.bytes(), "run_ranges: ranges reach dst byte {} > dst size {}", table.dst_end(), dst.bytes());
  kernels::CollectiveArguments a = base_args(op, src, dst, dtype, algo, options);
  a.ranges = table.device_ranges();
  a.list_begin = table.device_list_begin();
  a.num_groups = table.num_groups();
  if (gate != nullptr) {
    OVL_CHECK(gate->counters != nullptr && gate->expected != nullptr, "run_ranges: GroupGate needs counters and expected");
    OVL_CHECK(gate->counters->bytes() >= table.num_groups() * sizeof(std::uint32_t),
              "run_ranges: counters buffer of {} bytes < {} groups x 4 B", gate->counters->bytes(), table.num_groups());
    for (int r = 0; r < world_.size(); ++r) a.counters[r] = gate->counters->peer<const std::uint32_t>(r);
    a.expected = gate->expected;
  }
  if (release != nullptr)
    for (int i = 0; i < world_.num_local_ranks(); ++i)
      a.gathered[world_.first_local_rank() + i] = release->counters + std::size_t(i) * std::size_t(table.num_groups());
  launch(a, stream);
}

void Collectives::check(cudaStream_t stream) {
  OVL_CUDA_CHECK(cudaSetDevice(world_.device()));
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
  kernels::DeviceError e{};
  copy_now(&e, error_.get(), sizeof(e), cudaMemcpyDeviceToHost, stream);
  if (e.code != 0) {
    fill_now(error_.get(), 0, sizeof(e), stream);
    OVL_FAIL("collective wait timed out: {}", kernels::describe(e));
  }
}

}  // namespace ovl
