"""ovl.Context on a GPU: every mode of the three operators in a loopback world of 8 against a float64 reference,
CUDA Graph capture and replay, streams, CuPy and DLPack tensors, the errors for bad inputs, and the tensor-parallel
MLP example against torch. Skipped without a Hopper GPU (conftest.py)."""

import os
import subprocess
import sys

import pytest

import ovl

WORLD = 8
M, N, K = 1024, 768, 256  # 8 row bands of 3 tiles; M / 8 = 128 rows per rank
# Inputs are exact in bf16 and products are summed in fp32; the output's bf16 rounding (2^-9 relative per element)
# dominates, so the relative Frobenius error against float64 is about 2e-3: 1e-2 leaves room for the summation
# order of the reductions (as tests/gpu/test_overlap.cu).
TOL = 1e-2
OPS = ["gemm-reducescatter", "gemm-allreduce", "allgather-gemm"]


def rel_error(x, ref):
    x = x.double()
    return float((x - ref).norm() / ref.norm())


def plans(ctx, problem):
    """Every mode with its defaults on 16 communication SMs, plus tma-pull on shared SMs."""
    hw = ctx.hardware
    out = []
    for mode in ovl.modes():
        plan = ovl.default_plan(mode, problem, hw, 16)
        if mode == "tile-signal":
            plan.gemm_sms = hw.spec.sm_count - 16
        out.append(plan)
    shared = ovl.default_plan("tma", problem, hw, 16)
    shared.partitioned, shared.gemm_sms, shared.comm_algo = False, hw.spec.sm_count - 16, "tma-pull"
    out.append(shared)
    return out


@pytest.fixture(scope="module")
def ctx(torch_gpu):
    return ovl.Context(loopback_world=WORLD)


def inputs(torch, op, dtype=None, seed=0):
    dtype = dtype or torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(seed)
    rows = M // WORLD if op == "allgather-gemm" else M
    a = (torch.rand(rows, K, generator=g, device="cuda") * 2 - 1).to(dtype)
    b = (torch.rand(N, K, generator=g, device="cuda") * 2 - 1).to(dtype)
    return a, b


def reference(ctx, op, a, b):
    """Rank 0's output of the emulated world in float64, from rank 0's inputs and the other ranks' (made by the
    context: their partial products, or their rows of A)."""
    peers = ctx.loopback_peer_inputs(op, a, b)
    if op == "allgather-gemm":
        import torch

        return torch.cat([a] + peers).double() @ b.double().T
    total = a.double() @ b.double().T
    for p in peers:
        total += p.double()
    return total[: M // WORLD] if op == "gemm-reducescatter" else total


METHODS = {"gemm-reducescatter": "gemm_reduce_scatter", "gemm-allreduce": "gemm_all_reduce",
           "allgather-gemm": "all_gather_gemm"}


def call(ctx, op, *args, **kwargs):
    return getattr(ctx, METHODS[op])(*args, **kwargs)


@pytest.mark.parametrize("op", OPS)
def test_every_mode_against_float64(torch_gpu, ctx, op):
    torch = torch_gpu
    a, b = inputs(torch, op)
    ref = reference(ctx, op, a, b)
    problem = ctx.problem(op, a, b)
    for plan in plans(ctx, problem) + [None]:  # None: the planner's choice
        for _ in range(2):  # twice: the executor resets its counters itself
            c = call(ctx, op, a, b, plan=plan)
            torch.cuda.synchronize()
            assert c.shape == ref.shape and c.dtype == a.dtype
            err = rel_error(c, ref)
            assert err < TOL, f"{op} {plan}: relative error {err:.3g}"


@pytest.mark.parametrize("op", OPS)
def test_graph_capture_replays_every_mode(torch_gpu, ctx, op):
    torch = torch_gpu
    a, b = inputs(torch, op, seed=1)
    problem = ctx.problem(op, a, b)
    for plan in plans(ctx, problem):
        eager = call(ctx, op, a, b, plan=plan)  # the warm-up, and the expected result
        torch.cuda.synchronize()
        out = torch.empty_like(eager)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call(ctx, op, a, b, out, plan=plan)
        for i in range(3):
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            assert rel_error(out, eager.double()) < TOL, f"{op} {plan}: replay {i}"


def test_cold_capture_raises_warm_up_error(torch_gpu):
    torch = torch_gpu
    cold = ovl.Context(loopback_world=WORLD)
    a, b = inputs(torch, "gemm-reducescatter", seed=2)
    c = torch.empty(M // WORLD, N, dtype=a.dtype, device="cuda")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ovl.Error, match="run the same call once before capturing"):
        with torch.cuda.graph(graph):
            cold.gemm_reduce_scatter(a, b, c)


def test_streams_and_fp16(torch_gpu, ctx):
    torch = torch_gpu
    op = "gemm-reducescatter"
    a, b = inputs(torch, op, dtype=torch.float16, seed=3)
    ref = reference(ctx, op, a, b)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # the current stream by default
        c1 = ctx.gemm_reduce_scatter(a, b)
    c2 = ctx.gemm_reduce_scatter(a, b, stream=side)  # given explicitly
    c3 = ctx.gemm_reduce_scatter(a, b, stream=side.cuda_stream)  # as a handle
    side.synchronize()
    ctx.synchronize(side)
    for c in (c1, c2, c3):
        assert c.dtype == torch.float16 and rel_error(c, ref) < TOL


def test_b_as_k_by_n(torch_gpu, ctx):
    torch = torch_gpu
    op = "gemm-allreduce"
    a, b = inputs(torch, op, seed=4)
    b_kn = b.T.contiguous()
    # The emulated ranks' partial products belong to the K x N problem (a shape of its own), so they come from it.
    peers = ctx.loopback_peer_inputs(op, a, b_kn, b_layout="nn")
    ref = a.double() @ b.double().T
    for p in peers:
        ref += p.double()
    c = ctx.gemm_all_reduce(a, b_kn, b_layout="nn")
    torch.cuda.synchronize()
    assert rel_error(c, ref) < TOL


def test_trace_timeline(torch_gpu):
    torch = torch_gpu
    traced = ovl.Context(loopback_world=WORLD, trace=True)
    a, b = inputs(torch, "gemm-reducescatter", seed=5)
    plan = ovl.default_plan("tma", traced.problem("gemm-reducescatter", a, b), traced.hardware, 16)
    traced.gemm_reduce_scatter(a, b, plan=plan)
    t = traced.last_timeline()
    assert t.source == "measured" and {"gemm", "comm"} <= {i.lane for i in t.intervals}


def test_bad_inputs_name_the_tensor(torch_gpu, ctx):
    torch = torch_gpu
    a, b = inputs(torch, "gemm-reducescatter", seed=6)
    c = torch.empty(M // WORLD, N, dtype=a.dtype, device="cuda")
    with pytest.raises(ovl.Error, match=r"A has dtype fp32"):
        ctx.gemm_reduce_scatter(a.float(), b, c)
    with pytest.raises(ovl.Error, match=r"B has strides \(1, 768\).*contiguous"):
        ctx.gemm_reduce_scatter(a, b.T.contiguous().T, c)
    with pytest.raises(ovl.Error, match=r"A is on device cpu"):
        ctx.gemm_reduce_scatter(a.cpu(), b, c)
    with pytest.raises(ovl.Error, match=r"C has 3 dimensions"):
        ctx.gemm_reduce_scatter(a, b, c.view(M // WORLD, N, 1))
    with pytest.raises(ovl.Error, match=r"C has 256 rows"):
        ctx.gemm_reduce_scatter(a, b, torch.empty(256, N, dtype=a.dtype, device="cuda"))
    with pytest.raises(ovl.Error, match=r"K = 128"):
        ctx.gemm_reduce_scatter(a, b[:, :128].contiguous(), c)
    with pytest.raises(TypeError, match="no tensor"):
        ctx.gemm_reduce_scatter([1, 2], b, c)
    bad = ovl.default_plan("decomposed", ctx.problem("gemm-reducescatter", a, b), ctx.hardware, 16)
    bad.chunks = 7  # does not divide M
    with pytest.raises(ovl.Error, match="chunks"):
        ctx.gemm_reduce_scatter(a, b, c, plan=bad)


class DLPackOnly:
    """A tensor that speaks only DLPack (what JAX and others hand over)."""

    def __init__(self, t):
        self.t = t
        self.shape = t.shape

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_dlpack_tensors(torch_gpu, ctx):
    torch = torch_gpu
    op = "gemm-reducescatter"
    a, b = inputs(torch, op, seed=7)
    ref = reference(ctx, op, a, b)
    c = torch.empty(M // WORLD, N, dtype=a.dtype, device="cuda")
    torch.cuda.synchronize()
    ctx.gemm_reduce_scatter(DLPackOnly(a), DLPackOnly(b), DLPackOnly(c), stream=torch.cuda.current_stream())
    torch.cuda.synchronize()
    assert rel_error(c, ref) < TOL
    with pytest.raises(ovl.Error, match="pass c="):
        ctx.gemm_reduce_scatter(DLPackOnly(a), DLPackOnly(b))


def test_cupy_tensors(cupy_gpu):
    cupy = cupy_gpu
    import numpy as np

    ctx = ovl.Context(loopback_world=WORLD)
    rng = np.random.default_rng(8)
    a = cupy.asarray(rng.uniform(-1, 1, (M, K)).astype(np.float16))
    b = cupy.asarray(rng.uniform(-1, 1, (N, K)).astype(np.float16))
    problem = ctx.problem("gemm-reducescatter", a, b)
    peers = ctx.loopback_peer_inputs("gemm-reducescatter", a, b)
    total = cupy.asnumpy(a).astype(np.float64) @ cupy.asnumpy(b).astype(np.float64).T
    for p in peers:
        total += cupy.asnumpy(p).astype(np.float64)
    ref = total[: M // WORLD]
    for plan in plans(ctx, problem):
        c = ctx.gemm_reduce_scatter(a, b, plan=plan)  # CuPy's current stream, output allocated by CuPy
        cupy.cuda.get_current_stream().synchronize()
        assert isinstance(c, cupy.ndarray) and c.dtype == cupy.float16
        err = np.linalg.norm(cupy.asnumpy(c).astype(np.float64) - ref) / np.linalg.norm(ref)
        assert err < TOL, f"{plan}: {err:.3g}"
    with pytest.raises(ovl.Error, match="A has strides"):
        ctx.gemm_reduce_scatter(a[:, ::2], b)


EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "tp_mlp.py")


@pytest.mark.parametrize("sizes", [[], ["--tokens", "1024", "--hidden", "768", "--ffn", "2048"]],
                         ids=["example-sizes", "small"])
def test_tp_mlp_example_matches_torch(torch_gpu, sizes):
    """examples/python/tp_mlp.py in a loopback world of 8 with CUDA Graph replay: it prints OK and exits 0 when both
    operators and the replay match its float64 torch reference within 1e-2."""
    run = subprocess.run([sys.executable, EXAMPLE, "--loopback", "8", "--graph"] + sizes, capture_output=True,
                         text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0 and run.stdout.rstrip().endswith("OK"), run.stdout + run.stderr


def test_loopback_peer_inputs_follow_the_current_stream(torch_gpu):
    """The peers' partial products are copied in the current stream's order: with that stream held busy, the
    reference built from them (whose temporaries the caching allocator hands back at once) still matches the
    GEMM+RS output within TOL. A copy on another stream would land in memory the queued reference math still
    reads or writes."""
    torch = torch_gpu
    ctx = ovl.Context(loopback_world=WORLD)
    m, n, k = 4096, 2048, 1024
    g = torch.Generator(device="cuda").manual_seed(77)
    a = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
    b = (torch.randn(n, k, generator=g, device="cuda") / k**0.5).to(torch.bfloat16)
    y = ctx.gemm_reduce_scatter(a, b)
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # about 0.1 s of the current stream busy before the reference math runs
    ref = (a.double() @ b.double().T)[: m // WORLD]
    for p in ctx.loopback_peer_inputs("gemm-reducescatter", a, b):
        ref += p.double()[: m // WORLD]
    err = rel_error(y, ref)
    assert err < TOL, f"relative error {err:.3g}"


def test_paced_loopback_context(torch_gpu):
    """Context(link_profile=...) paces the loopback world's link: the name is reported, the planning profile prices
    that link (as ovl.plan(loopback=True, link_profile=...) does), and a GEMM+AllReduce still matches float64."""
    torch = torch_gpu
    ctx = ovl.Context(loopback_world=WORLD, link_profile="nvlink4-node8")
    assert ctx.link_profile == "nvlink4-node8"
    assert ctx.planning_hardware.name == ctx.hardware.loopback(WORLD, link_profile="nvlink4-node8").name
    a, b = inputs(torch, "gemm-allreduce", seed=5)
    y = ctx.gemm_all_reduce(a, b)
    err = rel_error(y, reference(ctx, "gemm-allreduce", a, b))
    assert err < TOL, f"relative error {err:.3g}"
    with pytest.raises(ovl.Error, match="no-such-link"):
        ovl.Context(loopback_world=WORLD, link_profile="no-such-link")
