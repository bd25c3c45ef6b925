// Device pieces of the collectives: the slice cursor over range lists and the bare 1-warp TMA ring's bookkeeping.
// Private to kernels/src (included by collectives_tma.cu only).
#pragma once

#include <cstdint>

#include "ovl/kernels/tma_ptx.cuh"
#include "ovl/kernels/collectives.hpp"

namespace ovl::kernels::detail {

__host__ __device__ constexpr std::uint64_t round_up16(std::uint64_t v) { return (v + 15) & ~std::uint64_t(15); }

// Slice boundaries in 16-byte units, rounded down to 4 KB so that every CTA's TMA pieces start 4 KB aligned (the
// H200 measurements with 16-byte boundaries halved the TMA copy rate at 24, 40, 48 and 56 CTAs); the last slice
// ends at the end. Non-decreasing in `slice`, so the slices tile [0, units) exactly (some may be empty).
inline constexpr std::uint64_t kSliceAlignUnits = 4096 / 16;
__host__ __device__ constexpr std::uint64_t slice_bound(std::uint64_t units, int slice, int num_slices) {
  return slice >= num_slices ? units : units * std::uint64_t(slice) / std::uint64_t(num_slices) / kSliceAlignUnits * kSliceAlignUnits;
}

// One contiguous piece of a slice. A tail (< 16 bytes, the end of a range that is not a multiple of 16 bytes)
// is moved with plain loads/stores by one thread (a TMA phase's loading thread; thread 0 in the SIMT mover).
struct Piece {
  int group;
  int owner;
  std::uint64_t src_offset;
  std::uint64_t dst_offset;
  std::uint32_t bytes;
  bool tail;
};

// Layout of a launch as the device sees it: either uniform (one range per owner) or a table.
struct Layout {
  const DeviceRange* ranges;
  const std::uint32_t* list_begin;
  int num_groups;
  int world_size;
  std::uint64_t chunk_bytes, src_owner_stride, dst_owner_stride;

  __host__ __device__ int list_size(int group, int owner) const {
    if (ranges == nullptr) return chunk_bytes > 0 ? 1 : 0;
    const int k = group * world_size + owner;
    return int(list_begin[k + 1] - list_begin[k]);
  }
  __host__ __device__ DeviceRange range(int group, int owner, int i) const {
    if (ranges == nullptr) return DeviceRange{owner * src_owner_stride, owner * dst_owner_stride, chunk_bytes, 0};
    return ranges[list_begin[group * world_size + owner] + i];
  }
};

// Tile groups [begin, end) of a layout.
struct GroupRange {
  int begin, end;
};

// Walks the pieces of slice `slice` of `num_slices`, for the owners owners[0..num_owners) within each group of
// `groups`, groups in order (a piece keeps its group's index in the layout). Every thread that takes part runs its
// own copy with the same inputs, so all see the same walk.
struct SliceCursor {
  Layout layout;
  const int* owners;
  int num_owners;
  int slice, num_slices;
  std::uint32_t piece_bytes;
  GroupRange groups;
  // position
  int group = groups.begin, k = -1, ri = 0, rn = 0;
  std::uint64_t pos = 0, end = 0;

  __host__ __device__ void open_list() {
    const int owner = owners[k];
    rn = layout.list_size(group, owner);
    ri = 0;
    pos = end = 0;
    if (rn == 0) return;
    const DeviceRange last = layout.range(group, owner, rn - 1);
    const std::uint64_t units = (last.stream_begin + round_up16(last.bytes)) / 16;
    pos = slice_bound(units, slice, num_slices) * 16;
    end = slice_bound(units, slice + 1, num_slices) * 16;
    // First range whose padded extent ends after pos (binary search: stream_begin is increasing).
    int lo = 0, hi = rn - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      const DeviceRange r = layout.range(group, owner, mid);
      if (r.stream_begin + round_up16(r.bytes) <= pos) lo = mid + 1;
      else hi = mid;
    }
    ri = lo;
  }

  __host__ __device__ bool next(Piece& p) {
    if (num_owners == 0 || group >= groups.end) return false;
    for (;;) {
      if (k < 0 || ri >= rn || pos >= end) {
        if (++k >= num_owners) {
          k = 0;
          if (++group >= groups.end) return false;
        }
        open_list();
        continue;
      }
      const int owner = owners[k];
      const DeviceRange r = layout.range(group, owner, ri);
      const std::uint64_t data_end = r.stream_begin + r.bytes;
      if (pos >= data_end) {  // in the padding (or an empty range)
        pos = r.stream_begin + round_up16(r.bytes);
        ++ri;
        continue;
      }
      const std::uint64_t stop = end < data_end ? end : data_end;
      const std::uint64_t n = stop - pos;
      const std::uint64_t local = pos - r.stream_begin;
      p.group = group;
      p.owner = owner;
      p.src_offset = r.src_offset + local;
      p.dst_offset = r.dst_offset + local;
      if (n >= 16) {
        std::uint64_t b = n & ~std::uint64_t(15);
        if (b > piece_bytes) b = piece_bytes;
        p.bytes = std::uint32_t(b);
        p.tail = false;
        pos += b;
      } else {  // only at a range's end: end is 16-aligned, so stop == data_end here
        p.bytes = std::uint32_t(n);
        p.tail = true;
        pos = r.stream_begin + round_up16(r.bytes);
        ++ri;
      }
      return true;
    }
  }
};

}  // namespace ovl::kernels::detail
