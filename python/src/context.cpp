// ovl.Context's native half (CUDA builds): tensors arrive as the framework's own objects, read and checked here
// (tensors.cpp), with errors naming the tensor and the value.
#include "ovl/core/context.hpp"

#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string_view>

#include "bindings.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/core/world.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"
#include "ovl/model/link_profile.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace ovl::python {
namespace {

// One call's arguments, read and checked with the GIL held.
struct Call {
  Op op;
  TensorRef a, b, c;
  nb::object c_object;  // C as given, or as allocated for a call without one
  cudaStream_t stream;
};

// A new rows x cols tensor of a's framework, dtype and device, allocated in the order of `stream` (a handle) or,
// when it is None, of the framework's current stream (ovl.context._empty: the frameworks' allocators).
nb::object new_output(nb::handle a, int64_t rows, int64_t cols, nb::handle stream) {
  static PyObject* empty = nullptr;
  return nb::handle(python_attr(empty, "ovl.context", {"_empty"}))(a, rows, cols, stream);
}

// stream= as a handle: an int, a torch or CuPy stream (cuda_stream, ptr), or an object with __cuda_stream__.
uintptr_t stream_handle(nb::handle stream) {
  if (PyLong_Check(stream.ptr())) return nb::cast<uintptr_t>(stream);
  for (const char* name : {"cuda_stream", "ptr"}) {
    const nb::object value = nb::getattr(stream, name, nb::none());
    if (PyLong_Check(value.ptr())) return nb::cast<uintptr_t>(value);
  }
  if (nb::hasattr(stream, "__cuda_stream__")) return nb::cast<uintptr_t>(stream.attr("__cuda_stream__")()[1]);
  throw nb::type_error(fmt::format("ovl: stream= takes an int handle, a torch or CuPy stream, or an object with "
                                   "__cuda_stream__; got {}",
                                   Py_TYPE(stream.ptr())->tp_name)
                           .c_str());
}

// The tensors read and checked; C allocated by A's framework when it is None (M x N, M / W x N or M W x N as the
// op gives it); `stream` None: the current stream of A's framework.
Call read_call(const Context& ctx, std::string_view op_name, nb::handle a, nb::handle b, nb::handle c,
               nb::handle stream, std::string_view b_layout) {
  const Op op = parse_op(op_name);
  const std::string_view api = to_string(op);
  const BLayout layout = parse_b_layout(b_layout);
  const int dev = ctx.device();
  Call call{op, tensor_ref(api, "A", a, dev, layout), tensor_ref(api, "B", b, dev, layout), {}, nb::borrow(c), {}};
  const uintptr_t s = stream.is_none() ? current_stream(tensor_kind(a), dev) : stream_handle(stream);
  if (c.is_none()) {
    const int64_t w = ctx.world_size();
    const int64_t rows = op == Op::kGemmReduceScatter ? call.a.rows / w
                         : op == Op::kAllGatherGemm   ? call.a.rows * w
                                                      : call.a.rows;
    // On the call's stream when one is given: C's memory is then the allocator's for that stream, whose work writes
    // it (memory from the current stream's pool could still be in use by that stream's queued work).
    call.c_object = new_output(a, rows, layout == BLayout::kNxK ? call.b.rows : call.b.cols,
                               stream.is_none() ? nb::object(nb::none()) : nb::object(nb::int_(s)));
  }
  call.c = tensor_ref(api, "C", call.c_object, dev, layout);
  call.stream = reinterpret_cast<cudaStream_t>(s);
  return call;
}

// A call's plan= : None (the Context chooses), a Plan, or a PlanResult from ovl.plan() (its best).
std::optional<Plan> read_plan(nb::handle plan) {
  if (plan.is_none()) return std::nullopt;
  if (nb::isinstance<Plan>(plan)) return nb::cast<const Plan&>(plan);
  if (nb::hasattr(plan, "best")) return nb::cast<Plan>(plan.attr("best"));
  throw nb::type_error(
      fmt::format("ovl: plan= takes an ovl.Plan or the result of ovl.plan(); got {}", Py_TYPE(plan.ptr())->tp_name)
          .c_str());
}

void enqueue(Context& ctx, const Call& call, const std::optional<Plan>& plan) {
  switch (call.op) {
    case Op::kGemmAllReduce:
      ctx.gemm_all_reduce(call.a, call.b, call.c, plan, call.stream);
      break;
    case Op::kGemmReduceScatter:
      ctx.gemm_reduce_scatter(call.a, call.b, call.c, plan, call.stream);
      break;
    case Op::kAllGatherGemm:
      ctx.all_gather_gemm(call.a, call.b, call.c, plan, call.stream);
      break;
  }
}

void bind_world(nb::module_& m) {
  nb::class_<World> world(m, "World",
                          "The ranks a Context serves: loopback (ranks on one GPU) or a real world over NCCL.");
  world
      .def_static(
          "loopback", [](int ranks, int device) { return World::loopback(ranks, device); }, "ranks"_a, "device"_a = 0)
      .def_static("new_nccl_id",
                  [] {
                    const std::vector<std::byte> id = World::new_nccl_id();
                    return nb::bytes(reinterpret_cast<const char*>(id.data()), id.size());
                  })
      .def_static(
          "from_nccl_id",
          [](nb::bytes id, int rank, int size, int device, std::vector<int> cta_bounds) {
            WorldOptions options;
            options.nccl_cta_bounds = std::move(cta_bounds);
            const auto* bytes = reinterpret_cast<const std::byte*>(id.c_str());
            nb::gil_scoped_release release;  // every rank blocks here until all have arrived
            return World::from_nccl_id(std::span(bytes, id.size()), rank, size, device, options);
          },
          "id"_a, "rank"_a, "size"_a, "device"_a, "nccl_cta_bounds"_a = std::vector<int>{0})
      .def_prop_ro("rank", &World::rank)
      .def_prop_ro("size", &World::size)
      .def_prop_ro("device", &World::device)
      .def_prop_ro("backend",
                   [](const World& w) {
                     switch (w.backend()) {
                       case World::Backend::kLoopback:
                         return "loopback";
                       case World::Backend::kThreads:
                         return "threads";
                       case World::Backend::kMpi:
                         return "mpi";
                       case World::Backend::kNccl:
                         return "nccl";
                     }
                     return "?";
                   })
      .def("barrier", [](const World& w) {
        nb::gil_scoped_release release;
        w.barrier();
      });
}

}  // namespace

void bind_context(nb::module_& m) {
  bind_world(m);

  // The tensor readers without a Context (tests): how a tensor's type is read, and the checked TensorRef of a
  // tensor as (pointer, rows, cols, dtype).
  m.def(
      "_tensor_kind", [](nb::handle t) { return std::string(name_in(kTensorKindNames, tensor_kind(t))); }, "t"_a);
  m.def(
      "_tensor_ref",
      [](nb::handle t, const char* name, int device) {
        const TensorRef r = tensor_ref("ovl", name, t, device, BLayout::kNxK);
        return nb::make_tuple(uintptr_t(r.ptr), r.rows, r.cols, std::string(to_string(r.dtype)));
      },
      "t"_a, "name"_a = "A", "device"_a = 0);
  m.def("_stream_handle", &stream_handle, "stream"_a);
  // The current stream on `device` of the framework of tensors of kind `kind` (what _tensor_kind names; a call with
  // stream=None runs on it).
  m.def(
      "_current_stream",
      [](std::string_view kind, int device) {
        return current_stream(parse_name(kTensorKindNames, kind, "tensor kind"), device);
      },
      "kind"_a, "device"_a);

  nb::class_<Context>(m, "_Context", "The C++ Context behind ovl.Context (python/ovl/context.py).")
      .def(
          "__init__",
          [](Context* self, int loopback_world, int device, std::optional<Hardware> hardware, bool trace,
             std::optional<World> world, std::string_view loopback_share, double wait_timeout_ms,
             std::optional<std::string> tuning, int tuning_candidates, double tuning_budget_ms, double tuning_min_gain,
             std::optional<std::string> plan_cache, std::optional<std::string> link_profile) {
            ContextOptions o;
            if (link_profile) o.link_profile = link_profile_from_arg(*link_profile);
            if (tuning) o.tuning = parse_tuning(*tuning);
            o.tuning_candidates = tuning_candidates;
            o.tuning_min_gain = tuning_min_gain;
            o.tuning_budget_ms = tuning_budget_ms;
            o.plan_cache = std::move(plan_cache);
            OVL_CHECK(!(world && loopback_world > 0), "Context: give loopback_world ({}) or world, not both",
                      loopback_world);
            OVL_CHECK(loopback_world >= 0, "Context: loopback_world = {} is negative", loopback_world);
            o.device = device;
            o.hardware = std::move(hardware);
            o.trace = trace;
            if (world) o.world = *world;
            if (loopback_world > 0) o.world = World::loopback(loopback_world, device);
            o.loopback_share = parse_loopback_share(loopback_share);
            o.wait_timeout_ms = wait_timeout_ms;
            new (self) Context(o);
          },
          "loopback_world"_a, "device"_a, "hardware"_a, "trace"_a, "world"_a, "loopback_share"_a, "wait_timeout_ms"_a,
          "tuning"_a, "tuning_candidates"_a, "tuning_budget_ms"_a, "tuning_min_gain"_a, "plan_cache"_a,
          "link_profile"_a)
      .def_prop_ro("device", &Context::device)
      .def_prop_ro("rank", &Context::rank)
      .def_prop_ro("world_size", &Context::world_size)
      .def_prop_ro("loopback", &Context::loopback)
      .def_prop_ro("loopback_share", [](const Context& c) { return std::string(to_string(c.loopback_share())); })
      .def_prop_ro("link_profile",
                   [](const Context& c) -> std::optional<std::string> {
                     if (!c.link_profile()) return std::nullopt;
                     return c.link_profile()->name;
                   })
      .def_prop_ro("sm_count", &Context::sm_count)
      .def_prop_ro("hardware", &Context::hardware)
      .def_prop_ro("planning_hardware", &Context::planning_hardware)
      // The hot path, Context.gemm_*'s whole call: the tensors read here (C allocated when None), the stream and
      // the plan resolved (read_call, read_plan), the GIL released while enqueueing. Returns C.
      .def(
          "_op",
          [](Context& ctx, std::string_view op, nb::handle a, nb::handle b, nb::handle c, nb::handle plan,
             nb::handle stream, std::string_view b_layout) {
            const std::optional<Plan> chosen = read_plan(plan);
            const Call call = read_call(ctx, op, a, b, c, stream, b_layout);
            {
              nb::gil_scoped_release release;
              enqueue(ctx, call, chosen);
            }
            return call.c_object;
          },
          "op"_a, "a"_a, "b"_a, "c"_a.none(), "plan"_a.none(), "stream"_a.none(), "b_layout"_a)
      // The C++ call's own host time, for python/bench/call_overhead.py: `calls` calls of `op` made back to back
      // from C++ with the tensors read once; the mean host microseconds per call (the device is not waited for).
      .def(
          "_native_call_us",
          [](Context& ctx, std::string_view op, nb::handle a, nb::handle b, nb::handle c,
             const std::optional<Plan>& plan, nb::handle stream, std::string_view b_layout, int calls) {
            const Call call = read_call(ctx, op, a, b, c, stream, b_layout);
            nb::gil_scoped_release release;
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < calls; ++i) enqueue(ctx, call, plan);
            const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
            return elapsed.count() / std::max(calls, 1);
          },
          "op"_a, "a"_a, "b"_a, "c"_a.none(), "plan"_a.none(), "stream"_a.none(), "b_layout"_a, "calls"_a)
      .def(
          "_problem",
          [](const Context& ctx, std::string_view op, nb::handle a, nb::handle b, nb::handle c,
             std::string_view b_layout) {
            const Call call = read_call(ctx, op, a, b, c, nb::none(), b_layout);
            return ctx.problem_for(call.op, call.a, call.b, call.c);
          },
          "op"_a, "a"_a, "b"_a, "c"_a.none(), "b_layout"_a)
      .def(
          "plan_choice",
          [](const Context& ctx, const Problem& p) -> std::optional<PlanChoice> {
            const PlanChoice* c = ctx.plan_choice(p);
            return c ? std::optional<PlanChoice>(*c) : std::nullopt;
          },
          "problem"_a)
      .def("can_run", &Context::can_run, "problem"_a, "plan"_a)
      .def(
          "synchronize",
          [](Context& ctx, uintptr_t stream) {
            nb::gil_scoped_release release;
            ctx.synchronize(reinterpret_cast<cudaStream_t>(stream));
          },
          "stream"_a)
      .def("release_caches",
           [](Context& ctx) {
             nb::gil_scoped_release release;
             ctx.release_caches();
           })
      .def("set_tracing", &Context::set_tracing, "on"_a)
      .def("last_timeline",
           [](Context& ctx) {
             nb::gil_scoped_release release;
             return ctx.last_timeline();
           })
      // Loopback: copies rank `index` + 1's input (GEMM+AR/RS: its M x N partial product; AG+GEMM: its A rows) into
      // the tensor `dst` (same size), for references. The copy is enqueued on `stream`, the framework's current one:
      // `dst` comes from its caching allocator, which may hand out memory that earlier work on that stream still
      // reads, so a copy on any other stream could overwrite it under that work.
      .def(
          "_copy_loopback_peer_input",
          [](Context& ctx, const Problem& p, int index, nb::handle dst, uintptr_t stream) {
            const std::vector<const void*> peers = testing::loopback_peer_inputs(ctx, p);
            OVL_CHECK(index >= 0 && size_t(index) < peers.size(), "loopback peer input {} of {}", index, peers.size());
            const TensorRef d = tensor_ref("loopback_peer_inputs", "the destination", dst, ctx.device(), p.b_layout);
            const int64_t rows = p.op == Op::kAllGatherGemm ? p.m / p.world : p.m;
            const int64_t cols = p.op == Op::kAllGatherGemm ? p.k : p.n;
            OVL_CHECK(d.rows == rows && d.cols == cols && d.dtype == p.dtype,
                      "loopback_peer_inputs: the destination is {} x {} {}, the input is {} x {} {}", d.rows, d.cols,
                      to_string(d.dtype), rows, cols, to_string(p.dtype));
            OVL_CUDA_CHECK(cudaMemcpyAsync(d.ptr, peers[size_t(index)], size_t(rows * cols * dtype_bytes(p.dtype)),
                                           cudaMemcpyDeviceToDevice, reinterpret_cast<cudaStream_t>(stream)));
          },
          "problem"_a, "index"_a, "dst"_a, "stream"_a);
}

}  // namespace ovl::python
