"""python/bench/call_overhead.py and the C++ hook it times (``_Context._native_call_us``), in fresh interpreters:
the bench itself (its startup without a GPU everywhere; its torch run on a Hopper GPU), a Context made before the
script imports torch (the bench's order: `import ovl` loads torch first, since loading ovl's libraries first made
`import torch` abort), and the hook against the Python call."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ovl

BENCH = Path(__file__).resolve().parents[1] / "bench" / "call_overhead.py"


def run_python(args, timeout=300):
    """A fresh interpreter with this one's ovl on its path; faulthandler prints the Python stack of a fatal signal
    (an abort in native code names the line that called it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(ovl.__file__).parents[1]), env.get("PYTHONPATH")] if p)
    return subprocess.run([sys.executable, "-X", "faulthandler", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_bench_without_a_gpu_reports_json():
    """Without a usable GPU (or without the CUDA build) the bench prints one JSON error and exits 1, no traceback."""
    if ovl.CUDA:
        try:
            ovl.Context(loopback_world=8)
            pytest.skip("a GPU is present: test_bench_torch runs the bench")
        except ovl.Error:
            pass
    r = run_python([str(BENCH), "--frameworks", "torch"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error" in json.loads(r.stdout.strip().splitlines()[-1])
    assert "Traceback" not in r.stderr and "Fatal Python error" not in r.stderr, r.stderr


def test_bench_torch(torch_gpu):
    """The bench with torch tensors runs to the end: every mode timed from Python, through the binding alone and from
    C++."""
    r = run_python([str(BENCH), "--frameworks", "torch", "--calls", "100"])
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = json.loads(r.stdout)
    assert [x["mode"] for x in out["results"]] == ["sequential", "decomposed", "tma", "auto"]
    for x in out["results"]:
        assert x["framework"] == "torch"
        assert x["python_us"] > 0 and x["binding_us"] > 0 and x["native_us"] > 0, x


CONTEXT_FIRST = """
import ovl
ctx = ovl.Context(loopback_world=8)      # CUDA, cuBLAS and the executors' kernels initialised before torch loads
import torch
g = torch.Generator(device="cuda").manual_seed(0)
a = (torch.rand(1024, 256, generator=g, device="cuda") * 2 - 1).bfloat16()
b = (torch.rand(768, 256, generator=g, device="cuda") * 2 - 1).bfloat16()
p = ctx.problem("gemm-reducescatter", a, b)
outs = {}
for mode in ("sequential", "decomposed", "tma"):
    outs[mode] = ctx.gemm_reduce_scatter(a, b, plan=ovl.default_plan(mode, p, ctx.hardware, 16))
outs["auto"] = ctx.gemm_reduce_scatter(a, b)            # measured tuning
ctx.synchronize()
ref = outs["sequential"].double()
for mode, c in outs.items():
    err = float((c.double() - ref).norm() / ref.norm())
    assert err < 1e-2, (mode, err)                     # the bound of test_gpu.py
print("ok")
"""


def test_context_made_before_torch_is_imported(torch_gpu):
    """The bench's order: a Context first, torch afterwards. Every mode equals the sequential one (the bound of
    test_gpu.py: summation order only) and the interpreter exits cleanly."""
    r = run_python(["-c", CONTEXT_FIRST])
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), \
        f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_native_call_us_runs_the_same_call(torch_gpu):
    """_native_call_us enqueues the same call as the Python one (same output) and returns a positive time; a bad
    tensor is an ovl.Error naming it, not a crash."""
    torch = torch_gpu
    ctx = ovl.Context(loopback_world=8)
    g = torch.Generator(device="cuda").manual_seed(1)
    a = (torch.rand(1024, 256, generator=g, device="cuda") * 2 - 1).bfloat16()
    b = (torch.rand(256, 256, generator=g, device="cuda") * 2 - 1).bfloat16()
    p = ctx.problem("gemm-reducescatter", a, b)
    plan = ovl.default_plan("decomposed", p, ctx.hardware, 16)
    expected = ctx.gemm_reduce_scatter(a, b, plan=plan)
    c = torch.full_like(expected, float("nan"))
    stream = ovl._ovl._current_stream(ovl._ovl._tensor_kind(a), ctx.device)
    us = ctx._ctx._native_call_us("gemm-reducescatter", a, b, c, plan, stream, "nt", 3)
    torch.cuda.synchronize()
    assert us > 0
    assert torch.equal(c, expected)  # the same plan on the same inputs: the same bits
    with pytest.raises(ovl.Error, match="C has 3 dimensions"):
        ctx._ctx._native_call_us("gemm-reducescatter", a, b, c.view(1, *c.shape), plan, stream, "nt", 1)
