// Umbrella header: everything a user of ovl needs.
#pragma once

#include "ovl/core/context.hpp"
#include "ovl/core/gemm.hpp"
#include "ovl/core/sm_partition.hpp"
#include "ovl/model/hardware.hpp"
#include "ovl/model/plan.hpp"
#include "ovl/model/problem.hpp"
#include "ovl/model/timeline.hpp"
