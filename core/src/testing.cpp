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

namespace {
// The device pointers of one of a loopback shape's peer buffer lists (peer_src or peer_dst), made on first use.
template <typename Ptr>
std::vector<Ptr> peer_buffers(Context& ctx, const Problem& problem, std::vector<DeviceBuffer> detail::ShapeState::*list,
                              const char* api) {
  Context::Impl& s = detail::ContextAccess::impl(ctx);
  const std::lock_guard lock(s.mutex);
  std::vector<Ptr> out;
  for (const DeviceBuffer& b : s.loopback_shape(problem, api).*list) out.push_back(b.get());
  return out;
}
}  // namespace

std::vector<const void*> loopback_peer_inputs(Context& ctx, const Problem& problem) {
  return peer_buffers<const void*>(ctx, problem, &detail::ShapeState::peer_src, "loopback_peer_inputs");
}

std::vector<void*> loopback_peer_outputs(Context& ctx, const Problem& problem) {
  return peer_buffers<void*>(ctx, problem, &detail::ShapeState::peer_dst, "loopback_peer_outputs");
}

}  // namespace testing
}  // namespace ovl
