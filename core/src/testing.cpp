// ovl/core/testing.hpp: the hooks reach the Context's internals through detail::ContextAccess.
#include "ovl/core/testing.hpp"

#include <mutex>

#include "context_impl.hpp"

namespace ovl {
namespace detail {

struct ContextAccess {
  static Context::Impl& impl(Context& ctx) { return *ctx.impl_; }
  static void run(Context& ctx, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, const Plan& plan,
                  cudaStream_t stream) {
    ctx.run(op, a, b, c, plan, stream);
  }
};

}  // namespace detail

namespace testing {

void set_fault(Context& ctx, Fault fault) {
  Context::Impl& s = detail::ContextAccess::impl(ctx);
  const std::lock_guard lock(s.mutex);
  s.fault = fault;
}

void run_part(Context& ctx, Part part, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
              const Plan& plan, cudaStream_t stream) {
  Context::Impl& s = detail::ContextAccess::impl(ctx);
  const std::lock_guard lock(s.mutex);  // `part` belongs to this call
  s.part = part;
  try {
    detail::ContextAccess::run(ctx, op, a, b, c, plan, stream);
  } catch (...) {
    s.part = Part::kAll;
    throw;
  }
  s.part = Part::kAll;
}

std::vector<const void*> loopback_peer_inputs(Context& ctx, const Problem& problem) {
  Context::Impl& s = detail::ContextAccess::impl(ctx);
  const std::lock_guard lock(s.mutex);
  std::vector<const void*> out;
  for (const detail::DeviceBuffer& b : s.loopback_shape(problem, "loopback_peer_inputs").peer_src) out.push_back(b.get());
  return out;
}

std::vector<void*> loopback_peer_outputs(Context& ctx, const Problem& problem) {
  Context::Impl& s = detail::ContextAccess::impl(ctx);
  const std::lock_guard lock(s.mutex);
  std::vector<void*> out;
  for (const detail::DeviceBuffer& b : s.loopback_shape(problem, "loopback_peer_outputs").peer_dst) out.push_back(b.get());
  return out;
}

}  // namespace testing
}  // namespace ovl
