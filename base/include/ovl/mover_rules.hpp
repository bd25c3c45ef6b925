// The rules of the collectives' TMA ring and of the paced loopback movers that the model prices too, written once
// for the kernels (kernels/src/tma_ring.cuh, loopback_device.cuh) and the model (tma_mover_link_load): host and
// device code.
#pragma once

#include <cstdint>

#include "ovl/host_device.hpp"

namespace ovl {

// A pull-reduce unit's slot: stage / W bytes, rounded down to 16 (slot r of a stage is loaded from rank r).
OVL_HOST_DEVICE constexpr std::uint32_t pull_slot_bytes(std::uint32_t stage_bytes, int world) {
  return (stage_bytes / std::uint32_t(world)) & ~15u;
}

// Pacing's link bytes per byte a loopback mover moves for rank 0 (LoopbackArguments::pace_ns_per_byte): a pull-style
// sum reads the W-1 peers' sources; a byte from peer `from` > 0 (a copy of its piece, its push add into rank 0's
// output) crosses the link once; rank 0's own bytes never do.
OVL_HOST_DEVICE constexpr double link_bytes_per_byte(bool pull_sum, int from, int world) {
  return pull_sum ? double(world - 1) : from != 0 ? 1.0 : 0.0;
}

}  // namespace ovl
