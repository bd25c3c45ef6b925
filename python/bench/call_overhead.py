#!/usr/bin/env python3
"""The Python call's host overhead over the C++ call, as JSON.

For each framework present (torch, CuPy) and each plan: the mean host time of one ``ctx.gemm_reduce_scatter(a, b,
c, plan=plan)`` made from Python (python_us); of the binding alone, ``ctx._ctx._op`` called from Python with the
stream already resolved (binding_us: the tensors read and checked in C++, the GIL released, no Python layer); and of
the same call made back to back from C++ (native_us: ``_native_call_us``, the tensors read once). A small problem in
a loopback world of 8, in batches of BATCH calls with the device drained between batches (so a full launch queue
never stalls a loop). overhead_us = python_us - native_us, the aim being below 5 us; of it, layer_us = python_us -
binding_us is the Python layer (the method's frame and keywords) with the current stream's look-up, and the rest
the binding's.

    PYTHONPATH=build/python python3 python/bench/call_overhead.py [--calls 2000]
"""

import argparse
import json
import statistics
import sys
import time

import ovl

BATCH = 50


def measure(ctx, a, b, c, plan, sync, calls):
    run = ctx.gemm_reduce_scatter
    for _ in range(BATCH):  # warm: the shape's buffers and plan state exist
        run(a, b, c, plan=plan)
    sync()
    stream = ovl._ovl._current_stream(ovl._ovl._tensor_kind(a), ctx.device)
    binding = ctx._ctx._op
    op = "gemm-reducescatter"
    py, bound, native = [], [], []
    for _ in range(max(calls // BATCH, 1)):
        start = time.perf_counter()
        for _ in range(BATCH):
            run(a, b, c, plan=plan)
        py.append((time.perf_counter() - start) * 1e6 / BATCH)
        sync()
        start = time.perf_counter()
        for _ in range(BATCH):
            binding(op, a, b, c, plan, stream, "nt")
        bound.append((time.perf_counter() - start) * 1e6 / BATCH)
        sync()
        native.append(ctx._ctx._native_call_us(op, a, b, c, plan, stream, "nt", BATCH))
        sync()
    p, bd, n = statistics.median(py), statistics.median(bound), statistics.median(native)
    return {"python_us": round(p, 3), "binding_us": round(bd, 3), "native_us": round(n, 3),
            "overhead_us": round(p - n, 3), "layer_us": round(p - bd, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--m", type=int, default=1024)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--frameworks", default="torch,cupy", help="comma-separated: torch, cupy")
    args = parser.parse_args()
    wanted = set(args.frameworks.split(","))
    if not ovl.CUDA:
        print(json.dumps({"error": "ovl was built without CUDA"}))
        return 1
    try:
        ctx = ovl.Context(loopback_world=8)
    except ovl.Error as e:  # no GPU (or no usable one): say so as JSON, as for a build without CUDA
        print(json.dumps({"error": str(e)}))
        return 1
    results = []
    frameworks = []
    try:
        if "torch" not in wanted:
            raise ImportError("not asked for")
        import torch

        if torch.cuda.is_available():
            a = torch.randn(args.m, args.k, device="cuda").bfloat16()
            b = torch.randn(args.n, args.k, device="cuda").bfloat16()
            frameworks.append(("torch", a, b, torch.cuda.synchronize))
    except ImportError:
        pass
    try:
        if "cupy" not in wanted:
            raise ImportError("not asked for")
        import cupy

        a = cupy.random.uniform(-1, 1, (args.m, args.k)).astype(cupy.float16)
        b = cupy.random.uniform(-1, 1, (args.n, args.k)).astype(cupy.float16)
        frameworks.append(("cupy", a, b, lambda: cupy.cuda.Device().synchronize()))
    except Exception:  # no CuPy, or no GPU for it
        pass
    for name, a, b, sync in frameworks:
        problem = ctx.problem("gemm-reducescatter", a, b)
        c = ovl.context._empty(a, args.m // 8, args.n)
        for mode in ("sequential", "decomposed", "tma"):
            plan = ovl.default_plan(mode, problem, ctx.hardware, 16)
            r = measure(ctx, a, b, c, plan, sync, args.calls)
            results.append({"framework": name, "mode": mode, "problem": problem.name, **r})
        r = measure(ctx, a, b, c, None, sync, args.calls)  # plan=None: the cached planner choice
        results.append({"framework": name, "mode": "auto", "problem": problem.name, **r})
    print(json.dumps({"calls": args.calls, "batch": BATCH, "results": results}, indent=2), flush=True)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
