// The loopback collective's range table over a plan's units (ovl::unit_rows), a host function of the problem and the
// plan only (no device): Context::Impl::plan_state uploads it, and
// tests/cuda/test_loopback_ranges.cpp checks every range against the buffers it indexes.
#pragma once

#include <cstdint>
#include <vector>

#include "ovl/kernels/loopback.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"

namespace ovl::detail {

// (unit u, owner r) -> elements of what the collective moves (Problem::comm_dtype), at [u * world + r]
// (LoopbackArguments::ranges), owner r's rows of the unit as ovl::owner_rows cuts them: RS from the M x N partial
// products into the owner's M/W x N output, AR the r-th of W near-equal row runs of the unit (M x N to M x N), AG from
// its M/W x K rows into the M x K gathered A. Throws ovl::Error when a range is not in whole 16-byte vectors.
std::vector<kernels::LoopbackRange> loopback_range_table(const Problem& p, const std::vector<UnitRows>& units,
                                                         int world);

// Elements of the buffers the range table indexes (LoopbackArguments::src / dst), as Context::Impl::shape and
// Resources::bind_buffers allocate the context's own: rank 0's source (GEMM+AR/RS: the partial product, M x N; AG: the
// caller's A, M/W x K), rank 0's destination (RS: the caller's C, M/W x N; AR: C, M x N; AG: the gathered A, M x K),
// and each peer's (loopback ranks 1..W-1: the same sizes).
struct LoopbackBufferElements {
  int64_t src = 0, dst = 0;
};
LoopbackBufferElements loopback_buffer_elements(const Problem& p, int world);

}  // namespace ovl::detail
