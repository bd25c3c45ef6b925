// CUDA Graph capture: a Context call made while the caller's stream is capturing may only enqueue work. Everything
// that allocates (shape and plan buffers, green-context partitions, symmetric buffers), plans, tunes or
// synchronizes happens in the first eager call of a (problem, plan) pair and is cached; this is the check that the
// cache holds it, so that a cold call fails with a message instead of an invalidated capture.
#include <cuda_runtime_api.h>

#include "context_impl.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl {

namespace {
constexpr const char* kWarmUp =
    "run the same call once before capturing (same shapes, dtype, plan and tracing), so that its buffers, plan and "
    "tuning exist; the captured call then only enqueues work";
}  // namespace

bool Context::Impl::check_capture(const Problem& p, const std::optional<Plan>& plan, cudaStream_t stream) const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  OVL_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusActive) return false;
  const Plan* chosen = plan ? &*plan : nullptr;
  if (chosen == nullptr) {
    const auto it = choices.find(p.name());
    OVL_CHECK(it != choices.end(),
              "{}: called during CUDA Graph capture before this shape's plan was chosen (planning or tuning would run "
              "now); {}",
              p.name(), kWarmUp);
    chosen = &it->second.plan;
  }
  const auto it = plans.find(detail::plan_key(p, *chosen));
  const bool warm = it != plans.end() && it->second->warm && (!trace || it->second->warm_traced);
  OVL_CHECK(warm,
            "{} with plan \"{}\"{}: called during CUDA Graph capture before an eager call (it would allocate); {}",
            p.name(), chosen->summary(), trace ? " and tracing" : "", kWarmUp);
  return true;
}

void Context::Impl::note_warm(detail::PlanState& ps) const {
  ps.warm = true;
  if (trace) ps.warm_traced = true;
}

}  // namespace ovl
