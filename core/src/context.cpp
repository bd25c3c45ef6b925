// Context: the public entry points. They validate and record the call, choose its plan, then hand it to the
// plan's executor (executors.hpp). Caches: buffers per Problem, device tables per (Problem, Plan), plan choices per
// Problem (tuning.cpp).
#include "ovl/core/context.hpp"

#include <cmath>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "context_impl.hpp"
#include "loopback_ranges.hpp"
#include "ovl/core/driver_api.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/kernels/reduce.hpp"
#include "ovl/sim/planner.hpp"
#include "ovl/tensor_checks.hpp"

namespace ovl {
namespace {

// OVL_WAIT_TIMEOUT_MS, read once.
double env_timeout_ms() {
  static const double value = [] {
    const char* text = std::getenv("OVL_WAIT_TIMEOUT_MS");
    if (text == nullptr || *text == '\0') return 10000.0;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    OVL_CHECK(end != text && *end == '\0' && v > 0, "OVL_WAIT_TIMEOUT_MS = \"{}\" is not a positive number", text);
    return v;
  }();
  return value;
}

// `what` of tensor `name` ("pointer" or "scale") at p is device (or managed) memory of the context's device.
void check_device_memory(const char* api, const char* name, const char* what, const void* p, int device) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    OVL_FAIL("{}: {} {} {} is not known to CUDA", api, name, what, p);
  }
  OVL_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
            "{}: {} {} {} is not device memory (CUDA reports it as {} memory)", api, name, what, p,
            attr.type == cudaMemoryTypeHost ? "pinned host" : "unregistered host");
  OVL_CHECK(attr.type == cudaMemoryTypeManaged || attr.device == device,
            "{}: {} {} {} is on device {}, the context's device is {}", api, name, what, p, attr.device, device);
}

// Where the tensor lives: non-null, aligned, device (or managed) memory of the context's device, inside its allocation
// (when the driver says where that is). Its element type is checked before (check_operand_types). Returns its byte
// span.
TensorSpan check_tensor(const char* api, const char* name, const TensorRef& t, int device) {
  OVL_CHECK(t.ptr != nullptr, "{}: {} is a null pointer", api, name);
  OVL_CHECK(reinterpret_cast<uintptr_t>(t.ptr) % 16 == 0, "{}: {} pointer {} is not 16-byte aligned", api, name, t.ptr);
  const TensorSpan span = tensor_span(api, name, t.ptr, t.rows, t.cols, dtype_bytes(t.dtype));
  check_device_memory(api, name, "pointer", t.ptr, device);
  if (const auto get_range = driver_api().cuMemGetAddressRange) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (get_range(&base, &size, CUdeviceptr(reinterpret_cast<uintptr_t>(t.ptr))) == CUDA_SUCCESS) {
      check_inside_allocation(api, span, uintptr_t(base), uint64_t(size));
    }
  }
  return span;
}

}  // namespace

std::string detail::plan_key(const Problem& p, const Plan& plan) {
  nlohmann::json j = plan;
  return p.name() + "|" + j.dump();
}

namespace {

// What a Context made with `options` is: its device and world, the profiles it plans and checks plans with, its
// wait timeout. Selects the device.
detail::ContextIdentity identity_of(const ContextOptions& options) {
  detail::ContextIdentity id;
  id.device = options.device;
  OVL_CHECK(options.loopback_share == LoopbackShare::kRank0 || options.loopback_share == LoopbackShare::kWholeWorld,
            "ContextOptions: loopback_share = {} is not kRank0 or kWholeWorld", int(options.loopback_share));
  id.share = options.loopback_share;
  if (options.world.valid()) {
    id.device = options.world.device();
    if (options.world.is_loopback() && options.world.size() > 1) {
      id.loopback = true;
      id.world = options.world.size();
    } else {
      // A real World, or a loopback World of one rank (a one-rank communicator).
      id.world_ref = options.world;
      id.rank = options.world.rank();
      id.world = options.world.size();
    }
  }
  int count = 0;
  OVL_CUDA_CHECK(cudaGetDeviceCount(&count));
  OVL_CHECK(id.device >= 0 && id.device < count, "ContextOptions: device = {} is not in [0, {})", id.device, count);
  OVL_CUDA_CHECK(cudaSetDevice(id.device));
  cudaDeviceProp prop{};
  OVL_CUDA_CHECK(cudaGetDeviceProperties(&prop, id.device));
  id.sms = prop.multiProcessorCount;

  if (options.hardware) {
    id.hw = *options.hardware;
  } else if (const char* profile = std::getenv("OVL_PROFILE"); profile != nullptr && *profile != '\0') {
    id.hw = load_hardware(profile);  // `ovl tune` writes such a profile
  } else {
    try {
      id.hw = hardware_for_device_name(prop.name);
    } catch (const Error&) {
      id.hw = builtin_hardware("h100");  // an unknown GPU: keep the H100's rates, take the real SM count
      id.hw.name = prop.name;
    }
  }
  id.gpu_name = prop.name;
  id.hw.spec.sm_count = id.sms;  // Plan::validate checks SM counts and the architecture against the device we run on
  id.hw.spec.compute_capability = prop.major * 10 + prop.minor;
  id.hw.validate();
  // The link (the option, else OVL_LINK_PROFILE): a loopback is paced to it (docs/overlap.md, "Paced loopback"); a
  // real world's planner prices the calls its measured tables hold by them (with_link).
  id.link = options.link_profile ? options.link_profile : link_profile_from_env();
  id.plan_hw = id.loopback ? loopback_hardware(id.hw, id.world, id.share, id.link)
               : id.link   ? with_link(id.hw, *id.link)
                           : id.hw;
  OVL_CHECK(std::isfinite(options.wait_timeout_ms) && options.wait_timeout_ms >= 0 &&
                options.wait_timeout_ms <= 3.6e6,
            "ContextOptions::wait_timeout_ms = {} must be between 0 (the default) and 3600000 (one hour)",
            options.wait_timeout_ms);
  const double timeout_ms = options.wait_timeout_ms > 0 ? options.wait_timeout_ms : env_timeout_ms();
  id.timeout_ns = std::max<uint64_t>(1, uint64_t(timeout_ms * 1e6));  // a positive wait (the GEMM's waits refuse 0)
  return id;
}

}  // namespace

Context::Context(const ContextOptions& options) : impl_(std::make_unique<Impl>(options)) {}

// Every resource is a member (or a member's), so a constructor that throws half-way leaks nothing.
Context::Impl::Impl(const ContextOptions& o)
    : ContextIdentity(identity_of(o)), options(o), fixed_inputs(o.loopback_fixed_inputs), trace(o.trace), res(*this) {
  init_tuning(o);
}

// Destructors log, never throw.
Context::Impl::~Impl() {
  // comm_algo ce waits that were never synchronized: released past the timeout, so the device can drain.
  try {
    if (cudaSetDevice(device) == cudaSuccess) (void)copy_engine.watchdog();
  } catch (const std::exception& e) {
    fmt::print(stderr, "ovl: ~Context: {}\n", e.what());
  }
  if (cudaSetDevice(device) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    fmt::print(stderr, "ovl: ~Context: device {} reported {}\n", device, cudaGetErrorString(cudaGetLastError()));
  }
  shapes.clear();  // their nccl-symmetric windows before the communicators (Resources, destroyed last)
  plans.clear();
  if (call_done != nullptr) (void)cudaEventDestroy(call_done);
}

Context::~Context() = default;

void Context::Impl::release_caches() {
  plans.clear();
  for (detail::Executor* e :
       std::initializer_list<detail::Executor*>{&sequential, &decomposed, &signaled, &tma, &copy_engine})
    e->release_shapes();
  shapes.clear();
  choices.clear();
}

void Context::release_caches() {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);  // waits for a call being enqueued on another thread
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  OVL_CUDA_CHECK(cudaDeviceSynchronize());  // nothing in flight may still use the buffers
  s.release_caches();
}

int Context::device() const { return impl_->device; }
int Context::rank() const { return impl_->rank; }
int Context::world_size() const { return impl_->world; }
bool Context::loopback() const { return impl_->loopback; }
LoopbackShare Context::loopback_share() const { return impl_->share; }
int Context::sm_count() const { return impl_->sms; }
const Hardware& Context::hardware() const { return impl_->hw; }
const Hardware& Context::planning_hardware() const { return impl_->plan_hw; }
const std::optional<LinkProfile>& Context::link_profile() const { return impl_->link; }
void Context::set_tracing(bool on) { impl_->trace = on; }

// ---- Impl helpers ----

detail::Executor& Context::Impl::executor_for(const Plan& plan) {
  switch (plan.mode) {
    case Mode::kSequential:
      if (world_tma(plan)) return tma;  // between the symmetric buffers the tma executor keeps
      return sequential;
    case Mode::kDecomposed:
      return decomposed;
    case Mode::kTileSignal:
    case Mode::kGreenContext:
      if (plan.comm_algo == CommAlgo::kCopyEngine) return copy_engine;
      return signaled;
    case Mode::kTma:
      return tma;
  }
  OVL_FAIL("plan mode {} has no executor", int(plan.mode));
}

detail::ShapeState& Context::Impl::shape(const Problem& p) {
  const std::string key = p.name();
  auto it = shapes.find(key);
  if (it != shapes.end()) return *it->second;
  auto st = std::make_unique<detail::ShapeState>();
  st->problem = p;
  // A (and FP8 B) in the input type, the collective's buffers in what it moves.
  const int64_t in_bytes = dtype_bytes(p.dtype);
  const int64_t comm_bytes = dtype_bytes(p.comm_dtype());
  const int w = world;
  if (loopback) {
    // The other ranks' inputs, from their own random data (seeded by rank): partial products made with the
    // sequential mode's GEMM from random A_r and B_r, or their A rows. FP8: e4m3 values in [-2, 2) (A_r and B_r with
    // scales 0.5, so their values are in [-1, 1) as bf16 peers'; AG+GEMM's rows are scaled by the caller's A scale).
    // Their outputs only where the play writes or reads them: every rank's with kWholeWorld; with kRank0 only for
    // GEMM+AR (the reduced pieces rank 0 copies in, filled by prepare_loopback_peers on the first call).
    const bool peer_outputs = share == LoopbackShare::kWholeWorld || p.op == Op::kGemmAllReduce;
    const bool fp8 = is_fp8(p.dtype);
    const DType b_dtype = fp8 ? DType::kE4M3 : p.dtype;
    const float range = fp8 ? 2.0f : 1.0f;
    cudaStream_t st0 = res.comm_stream;
    const int64_t b_elems = p.k * p.n;
    DeviceBuffer a_tmp, b_tmp, scales;
    if (p.op != Op::kAllGatherGemm) {
      a_tmp = detail::context_buffer(size_t(p.m * p.k * in_bytes));
      b_tmp = detail::context_buffer(size_t(b_elems * dtype_bytes(b_dtype)));
      if (fp8) {
        const float half[2] = {0.5f, 0.5f};
        scales = detail::context_buffer(sizeof(half));
        OVL_CUDA_CHECK(cudaMemcpyAsync(scales.get(), half, sizeof(half), cudaMemcpyHostToDevice, st0));
      }
    }
    const float* a_scale = scales.as<float>();
    const float* b_scale = fp8 ? a_scale + 1 : nullptr;
    const detail::LoopbackBufferElements elems = detail::loopback_buffer_elements(p, w);
    for (int r = 1; r < w; ++r) {
      const uint64_t seed = options.loopback_seed * 1000003ull + uint64_t(r) * 7919ull;
      st->peer_src.emplace_back(size_t(elems.src * comm_bytes));
      if (p.op == Op::kAllGatherGemm) {
        kernels::launch_fill_random(st->peer_src.back().get(), elems.src, p.dtype, seed, range, st0);
      } else {
        kernels::launch_fill_random(a_tmp.get(), p.m * p.k, p.dtype, seed, range, st0);
        kernels::launch_fill_random(b_tmp.get(), b_elems, b_dtype, seed + 1, range, st0);
        detail::Call call{p.op,
                          p,
                          Plan{},
                          TensorRef{a_tmp.get(), p.m, p.k, p.dtype, p.b_layout, a_scale},
                          TensorRef{b_tmp.get(), p.b_layout == BLayout::kNxK ? p.n : p.k,
                                    p.b_layout == BLayout::kNxK ? p.k : p.n, b_dtype, p.b_layout, b_scale},
                          TensorRef{},
                          st0,
                          st.get(),
                          nullptr};
        res.cublas_gemm(call, a_tmp.get(), st->peer_src.back().get(), 0, p.m, st0);
      }
      if (peer_outputs) st->peer_dst.emplace_back(size_t(elems.dst * comm_bytes));
    }
    OVL_CUDA_CHECK(cudaStreamSynchronize(st0));
  }
  return *shapes.emplace(key, std::move(st)).first->second;
}

// The peers' reduced pieces for kRank0 GEMM+AR: rank 0's partial product of this call (cuBLAS), then the
// whole-world AllReduce (SIMT mover, every SM, ungated) into the peers' outputs. Rank 0's own output slot of that
// launch points at peer 1's buffer: the same thread stores the same value to both, so there is no race and no
// extra buffer. Enqueued on the call's stream before the executor runs: on every public call (its inputs may have
// changed in place), once for all candidate runs of measured tuning, and with loopback_fixed_inputs once per shape
// and A / B pointers.
void Context::Impl::prepare_loopback_peers(const detail::Call& call) {
  detail::ShapeState& st = *call.shape;
  if (!loopback || share != LoopbackShare::kRank0 || call.op != Op::kGemmAllReduce) return;
  const bool same_pointers = st.reduced_call != 0 && st.reduced_a == call.a.ptr && st.reduced_b == call.b.ptr;
  if (same_pointers && (fixed_inputs || st.reduced_call == call_epoch)) return;
  OVL_CHECK(st.peer_dst.size() == size_t(world - 1), "loopback: the peers' output buffers of {} are missing",
            call.problem.name());
  res.cublas_gemm(call, call.a.ptr, call.partial, 0, call.problem.m, call.stream);
  kernels::LoopbackArguments a = res.loopback_args(call, sms);
  a.play = LoopbackShare::kWholeWorld;
  a.mover = CommAlgo::kSimt;
  a.dst[0] = st.peer_dst[0].get();
  a.pace_ns_per_byte = 0;  // setup of the emulation, not a collective of rank 0's: never paced
  a.pace_latency_ns = 0;
  a.first_group = 0;
  a.num_groups = call.ps->units;
  kernels::launch_loopback_collective(a, call.stream);
  st.reduced_call = call_epoch;
  st.reduced_a = call.a.ptr;
  st.reduced_b = call.b.ptr;
}

// The plan's units and each unit's owners (ovl::unit_rows, ovl::owner_rows: one definition for the executors, the
// model and the simulator). A decomposed chunk may span several owners' blocks: each owner's part is one range of the
// table and one NCCL call.
detail::PlanState& Context::Impl::plan_state(const Problem& p, const Plan& plan) {
  const std::string key = detail::plan_key(p, plan);
  auto it = plans.find(key);
  if (it != plans.end()) return *it->second;
  auto ps = std::make_unique<detail::PlanState>();
  const std::vector<UnitRows> units = unit_rows(p, plan);
  const std::vector<kernels::LoopbackRange> table = detail::loopback_range_table(p, units, world);
  for (const UnitRows& u : units) {
    ps->row_begin.push_back(u.begin);
    ps->row_end.push_back(u.end);
    if (mode_signals(plan.mode)) {
      ps->tile_rows_begin.push_back(int(u.tile_row_begin));
      ps->tile_rows_end.push_back(int(u.tile_row_end));
      ps->expected_host.push_back(unsigned(u.tiles));
    }
  }
  ps->units = int(ps->row_begin.size());
  const size_t groups = ps->expected_host.size();
  std::vector<unsigned> fault = ps->expected_host;
  if (groups > 0) {
    fault.back() += 1;
    ps->expected = detail::context_buffer(groups * sizeof(unsigned));
    ps->expected_fault = detail::context_buffer(groups * sizeof(unsigned));
  }
  ps->ranges = detail::context_buffer(table.size() * sizeof(kernels::LoopbackRange));
  detail::enqueue_and_wait(nullptr, [&](cudaStream_t st) {  // the tables, landed before any kernel reads them
    const auto upload = [&](void* dst, const void* src, size_t bytes) {
      OVL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st));
    };
    if (groups > 0) {
      upload(ps->expected.get(), ps->expected_host.data(), groups * sizeof(unsigned));
      upload(ps->expected_fault.get(), fault.data(), groups * sizeof(unsigned));
    }
    upload(ps->ranges.get(), table.data(), table.size() * sizeof(kernels::LoopbackRange));
  });
  return *plans.emplace(key, std::move(ps)).first->second;
}

// ---- validation ----

Problem Context::problem_for(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c) const {
  const char* api = op == Op::kGemmAllReduce       ? "gemm_all_reduce"
                    : op == Op::kGemmReduceScatter ? "gemm_reduce_scatter"
                                                   : "all_gather_gemm";
  const Impl& s = *impl_;
  check_operand_types(api, {"A", a.dtype, a.scale}, {"B", b.dtype, b.scale}, b.b_layout, {"C", c.dtype, c.scale});
  const TensorSpan sa = check_tensor(api, "A", a, s.device);
  const TensorSpan sb = check_tensor(api, "B", b, s.device);
  const TensorSpan sc = check_tensor(api, "C", c, s.device);
  check_no_overlap(api, sc, sa);
  check_no_overlap(api, sc, sb);
  if (is_fp8(a.dtype)) {
    check_device_memory(api, "A", "scale", a.scale, s.device);
    check_device_memory(api, "B", "scale", b.scale, s.device);
  }
  Problem p;
  p.op = op;
  p.dtype = a.dtype;
  p.out_dtype = c.dtype;  // FP8 only (otherwise C's type is A's)
  p.b_layout = b.b_layout;
  p.world = s.world;
  p.gpus_per_node = std::max(8, s.world);
  p.k = a.cols;
  const int64_t b_k = b.b_layout == BLayout::kNxK ? b.cols : b.rows;
  p.n = b.b_layout == BLayout::kNxK ? b.rows : b.cols;
  OVL_CHECK(b_k == p.k, "{}: B ({} x {}, layout {}) has K = {}, but A has K = {} columns", api, b.rows, b.cols,
            to_string(b.b_layout), b_k, p.k);
  OVL_CHECK(c.cols == p.n, "{}: C has {} columns, but B has N = {}", api, c.cols, p.n);
  switch (op) {
    case Op::kGemmAllReduce:
      p.m = a.rows;
      OVL_CHECK(c.rows == p.m, "{}: C has {} rows, but A has M = {}", api, c.rows, p.m);
      break;
    case Op::kGemmReduceScatter:
      p.m = a.rows;
      OVL_CHECK(p.m % s.world == 0, "{}: M = {} (A's rows) is not divisible by world = {}", api, p.m, s.world);
      OVL_CHECK(c.rows * s.world == p.m, "{}: C has {} rows, but M / world = {} / {} = {}", api, c.rows, p.m, s.world,
                p.m / s.world);
      break;
    case Op::kAllGatherGemm:
      p.m = a.rows * s.world;
      OVL_CHECK(c.rows == p.m, "{}: C has {} rows, but A's {} rows x world {} = {}", api, c.rows, a.rows, s.world, p.m);
      break;
  }
  p.validate();
  return p;
}

std::string Context::can_run(const Problem& p, const Plan& plan) const {
  const Impl& s = *impl_;
  try {
    // The problem (FP8 types and layouts the GEMM runs included), then the plan on the device's profile; a loopback
    // world's says so (nccl-symmetric needs NCCL).
    plan.validate(p, s.plan_hw);
  } catch (const Error& e) {
    return e.message();
  }
  if (plan.comm_algo == CommAlgo::kNcclSymmetric) {
    if (std::string why = nccl_symmetric_refusal(plan.cta_policy); !why.empty())
      return "comm_algo nccl-symmetric: " + why;
    if (!s.loopback && s.world > 1 && s.world_ref.nccl_cta_bounds().empty()) {
      return fmt::format(
          "comm_algo nccl-symmetric: this Context's World of {} ranks has no NCCL communicator (made with "
          "WorldOptions::create_nccl = false) to split its own off",
          s.world);
    }
  }
  if (std::string why = mode_refusal(p, plan); !why.empty()) return why;
  const bool signals = mode_signals(plan.mode);
  if (p.op == Op::kAllGatherGemm && signals) {
    const int ctas = plan.comm_ctas;
    if (plan.mode == Mode::kTileSignal) {
      // The GEMM's CTAs wait in place for the gather, so the gather's CTAs need SMs of their own.
      if (ctas >= s.sms) {
        return fmt::format(
            "plan field \"comm_ctas\" = {}: tile-signal allgather-gemm needs SMs for the gather beside the GEMM, "
            "and the device has {}",
            ctas, s.sms);
      }
      // nccl-symmetric's communicator is always bounded to comm_ctas (Impl::nccl_symmetric).
      if (!s.loopback && s.world > 1 && plan.comm_algo != CommAlgo::kCopyEngine &&
          plan.comm_algo != CommAlgo::kNcclSymmetric) {
        if (plan.comm_ctas <= 0 || !s.has_nccl_bound(plan.comm_ctas)) {
          return fmt::format(
              "plan field \"comm_ctas\" = {}: tile-signal allgather-gemm in a real world needs NCCL bounded to the "
              "plan's CTAs (a World made with that bound in WorldOptions::nccl_cta_bounds), since the GEMM holds "
              "the other SMs while it waits for the gather; or use green-context",
              plan.comm_ctas);
        }
      }
    }
  }
  if (signals) {
    const kernels::GemmTileShape t = kernels::gemm_tile_shape();
    if (plan.tile.m != t.m || plan.tile.n != t.n) {
      return fmt::format("plan tile {} x {} differs from the GEMM's tile {} x {}", plan.tile.m, plan.tile.n, t.m, t.n);
    }
    if (int(plan.tile_groups.size()) > detail::Resources::kMaxGroups) {
      return fmt::format("plan has {} tile groups, more than the {} counters of a context", plan.tile_groups.size(),
                         detail::Resources::kMaxGroups);
    }
  }
  if (plan.comm_algo == CommAlgo::kCopyEngine) {
    if (!driver_api().stream_memory_ops()) {
      return "comm_algo ce needs the driver's stream memory operations (cuStreamWaitValue32 / cuStreamWriteValue32), "
             "which this driver lacks";
    }
    if (s.world > kernels::kMaxSumSources) {
      return fmt::format("comm_algo ce runs worlds of at most {} ranks (this one: {})", kernels::kMaxSumSources,
                         s.world);
    }
    if (s.loopback && s.link) {
      return fmt::format(
          "comm_algo ce in a paced loopback (link profile {}): its copies are same-device copies on SMs, which "
          "pacing cannot turn into copy-engine transfers",
          s.link->name);
    }
    if (s.loopback && s.world > 1 && p.op == Op::kAllGatherGemm && plan.comm_ctas >= s.sms) {
      return fmt::format(
          "plan field \"comm_ctas\" = {}: ce allgather-gemm in loopback leaves comm_ctas SMs beside the GEMM for its "
          "same-device copies, and the device has {}",
          plan.comm_ctas, s.sms);
    }
  }
  // The World's TMA collective in a real world (TmaExecutor::run_real, run_real_sequential) pushes: a pull reads the
  // peers' partial products, which their next call may overwrite.
  if (s.world_tma(plan) && plan.comm_algo != CommAlgo::kTmaPush) {
    return fmt::format(
        "plan field \"comm_algo\" = {}: mode {} in a real world of {} ranks runs tma-push only (a pull reads "
        "the peers' partial products, which their next call may overwrite)",
        to_string(plan.comm_algo), to_string(plan.mode), s.world);
  }
  return "";
}

detail::ShapeState& Context::Impl::loopback_shape(const Problem& problem, const char* api) {
  const std::lock_guard lock(mutex);
  OVL_CHECK(loopback, "{}: the context is not a loopback world (world = {})", api, world);
  problem.validate();
  OVL_CHECK(problem.world == world, "{}: problem world {} differs from the context's {}", api, problem.world, world);
  OVL_CUDA_CHECK(cudaSetDevice(device));  // the shape's buffers live on the context's device
  return shape(problem);
}

// ---- entry points ----

void Context::gemm_all_reduce(const TensorRef& a, const TensorRef& b, const TensorRef& c,
                              const std::optional<Plan>& plan, cudaStream_t stream) {
  run(Op::kGemmAllReduce, a, b, c, plan, stream);
}
void Context::gemm_reduce_scatter(const TensorRef& a, const TensorRef& b, const TensorRef& c,
                                  const std::optional<Plan>& plan, cudaStream_t stream) {
  run(Op::kGemmReduceScatter, a, b, c, plan, stream);
}
void Context::all_gather_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& c,
                              const std::optional<Plan>& plan, cudaStream_t stream) {
  run(Op::kAllGatherGemm, a, b, c, plan, stream);
}

void Context::run(Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c, const std::optional<Plan>& plan,
                  cudaStream_t stream) {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);
  const detail::CallScope scope(s);
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  const Problem p = problem_for(op, a, b, c);
  const bool capturing = s.check_capture(p, plan, stream);
  const Plan chosen = plan ? *plan : plan_for(op, a, b, c, stream).plan;
  if (const std::string why = can_run(p, chosen); !why.empty()) {
    OVL_FAIL("{} with plan \"{}\": {}", p.name(), chosen.summary(), why);
  }
  // A graph would replay the call's epoch, which the flags of its first replay already hold: ce's flags, and those of
  // the World's TMA collective in a real world (mode tma, sequential with tma-push).
  const bool world_tma = s.world_tma(chosen);
  OVL_CHECK(!capturing || (chosen.comm_algo != CommAlgo::kCopyEngine && !world_tma),
            "{} with plan \"{}\": comm_algo {}{} cannot be captured in a CUDA Graph (its flags carry a per-call epoch)",
            p.name(), chosen.summary(), to_string(chosen.comm_algo), world_tma ? " in a real world" : "");
  detail::ShapeState& st = s.shape(p);
  detail::PlanState& ps = s.plan_state(p, chosen);
  detail::Call call{op, p, chosen, a, b, c, stream, &st, &ps, s.part, s.fault};
  call.out = c.ptr;
  call.rows = a.ptr;
  detail::Executor& executor = s.executor_for(chosen);
  s.res.begin_call(op, s.trace);
  if (s.call_done == nullptr) OVL_CUDA_CHECK(cudaEventCreateWithFlags(&s.call_done, cudaEventDisableTiming));
  // Always, not only when the stream differs: a destroyed stream's handle may come back as a new stream's.
  // Not while capturing: a captured call may not depend on an event recorded outside the capture; the caller orders
  // a graph's replays against eager calls.
  if (!capturing && s.call_done_recorded) OVL_CUDA_CHECK(cudaStreamWaitEvent(stream, s.call_done, 0));
  executor.bind(call);  // after that wait: it may copy A into a buffer the previous call gathers from
  s.prepare_loopback_peers(call);
  // Test-only: AG+GEMM's gathered A full of NaN before each call, so that a GEMM reading a row before its gather
  // (a missing wait) gives NaN instead of the previous call's identical rows. In a real world the peers write into it
  // only after this rank's call has started on the communication stream, which follows this memset.
  if (call.fault == testing::Fault::kPoisonGather && op == Op::kAllGatherGemm) {
    OVL_CUDA_CHECK(cudaMemsetAsync(call.gathered, 0xFF, size_t(p.m * p.k * dtype_bytes(p.dtype)), stream));
  }
  executor.run(call);
  s.res.record.slots_used = s.res.next_slot;
  if (!capturing) {
    OVL_CUDA_CHECK(cudaEventRecord(s.call_done, stream));
    s.call_done_recorded = true;
    s.note_warm(ps);
  }
}

void* Context::symmetric_output(const Problem& problem) {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);
  OVL_CHECK(!s.loopback && s.world > 1,
            "symmetric_output: needs a Context on a real World of more than one rank (this one: {}, world {})",
            s.loopback ? "loopback" : "real", s.world);
  OVL_CHECK(problem.op != Op::kAllGatherGemm,
            "symmetric_output: op allgather-gemm: its C is the GEMM's output, not a collective's (only GEMM+AR and "
            "GEMM+RS write C from a symmetric buffer)");
  OVL_CHECK(problem.world == s.world, "symmetric_output: problem world = {} on a context of world {}", problem.world,
            s.world);
  problem.validate();
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  return s.tma.symmetric_output(problem);
}

void Context::synchronize(cudaStream_t stream) {
  Impl& s = *impl_;
  const std::lock_guard lock(s.mutex);
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  // comm_algo ce: its stream memory waits cannot time out; the watchdog releases them past the timeout (before the
  // caller's stream, which joined the communication stream, is waited for).
  const std::string ce_missing = s.copy_engine.watchdog();
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
  OVL_CUDA_CHECK(cudaStreamSynchronize(s.res.comm_stream));
  // Every record is read and cleared before any is reported, so a timeout never surfaces at a later call: mode
  // tma's collective in a real world (its own record, Collectives::check), then the Context's.
  cudaStream_t comm_st = s.res.comm_stream;
  const std::string collective = s.tma.collective_failure(comm_st);
  kernels::DeviceError e{};
  copy_now(&e, s.res.error.get(), sizeof(e), cudaMemcpyDeviceToHost, comm_st);
  if (e.code != 0) fill_now(s.res.error.get(), 0, sizeof(e), comm_st);
  std::vector<std::string> waits;  // the Context's record, then comm_algo ce's watchdog
  if (e.code != 0) waits.push_back(kernels::describe(e));
  if (!ce_missing.empty()) waits.push_back(ce_missing);
  std::vector<std::string> failures;
  if (!collective.empty()) failures.push_back(collective);
  if (!waits.empty()) {
    failures.push_back(fmt::format("device-side wait timed out after {} ms: {}", double(s.timeout_ns) * 1e-6,
                                   fmt::join(waits, "; and ")));
  }
  if (!failures.empty()) OVL_FAIL("{}", fmt::join(failures, "; and "));
}

Timeline Context::last_timeline() {
  Impl& s = *impl_;
  Timeline t;
  t.source = "measured";
  const detail::TraceRecord& rec = s.res.record;
  if (!rec.valid) return t;
  OVL_CUDA_CHECK(cudaSetDevice(s.device));
  OVL_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned long long> slots(size_t(std::max(rec.slots_used, 1)));
  copy_now(slots.data(), s.res.stamps.get(), slots.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
           s.res.comm_stream);
  const int gpu = s.rank;
  auto add = [&](const std::string& lane, const std::string& name, const std::string& cat, unsigned long long a,
                 unsigned long long b) {
    t.intervals.push_back(Interval{gpu, lane, name, cat, int64_t(a), int64_t(std::max(a, b))});
  };
  for (const auto& sp : rec.spans)
    add(sp.lane, sp.name, sp.category, slots[size_t(sp.start_slot)], slots[size_t(sp.end_slot)]);
  if (rec.tile_stamps && rec.gemm_start_slot >= 0 && !rec.group_tiles.empty()) {
    const int64_t count = rec.group_tiles.back().second;
    std::vector<unsigned long long> ts(static_cast<size_t>(count));
    copy_now(ts.data(), rec.tile_stamp_ptr, ts.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
             s.res.comm_stream);
    unsigned long long prev = slots[size_t(rec.gemm_start_slot)];
    for (size_t g = 0; g < rec.group_tiles.size(); ++g) {
      unsigned long long end = prev;
      for (int64_t i = rec.group_tiles[g].first; i < rec.group_tiles[g].second; ++i) end = std::max(end, ts[size_t(i)]);
      add("gemm", fmt::format("group {}", g), "gemm", prev, end);
      prev = end;
    }
  }
  if (rec.cta_base >= 0) {
    for (int g = 0; g < rec.cta_groups; ++g) {
      unsigned long long a = ~0ull, b = 0;
      for (int c = 0; c < rec.cta_count; ++c) {
        const size_t i = size_t(rec.cta_base) + (size_t(g) * size_t(rec.cta_count) + size_t(c)) * 2;
        a = std::min(a, slots[i]);
        b = std::max(b, slots[i + 1]);
      }
      add("comm", fmt::format("{} group {}", rec.comm_name, g), "comm", a, b);
    }
  }
  // Times from the call's first stamp.
  int64_t origin = INT64_MAX;
  for (const Interval& i : t.intervals) origin = std::min(origin, i.start_ns);
  for (Interval& i : t.intervals) {
    i.start_ns -= origin;
    i.end_ns -= origin;
  }
  return t;
}

}  // namespace ovl
