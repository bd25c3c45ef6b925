"""ovl.Context over framework tensors (CUDA builds only).

Tensors: torch tensors, CuPy arrays, anything with ``__cuda_array_interface__`` (Numba, ...) or ``__dlpack__`` (JAX,
...), read by the library itself (python/src/tensors.cpp: torch and CuPy through their own attributes, cheaper than
the interface dict or a DLPack export per call). Every tensor is 2-D, contiguous row-major, bf16 or fp16, on the
context's device; the library checks the rest and names the tensor (A, B, C).
Streams: ``stream=`` (an int handle, a torch or CuPy stream, or an object with ``__cuda_stream__``), else the
current stream of the input's framework (torch.cuda.current_stream(), cupy.cuda.get_current_stream()), else the
legacy default stream. Outputs are allocated with the input's framework when ``c`` is not given.
"""

from __future__ import annotations

import os
import sys
from typing import Optional, Union

from . import _ovl
from ._ovl import Error, Hardware, Plan, Problem, Timeline, World  # noqa: F401

__all__ = ["Context", "World"]


def _torch_empty(cls):
    import torch

    def empty(t, rows, cols, stream):
        if stream is None:
            return torch.empty((rows, cols), dtype=t.dtype, device=t.device)
        s = torch.cuda.default_stream(t.device) if stream == 0 else torch.cuda.ExternalStream(stream, device=t.device)
        with torch.cuda.stream(s):
            return torch.empty((rows, cols), dtype=t.dtype, device=t.device)

    return empty


def _cupy_empty(cls):
    import cupy

    def empty(t, rows, cols, stream):
        with cupy.cuda.Device(t.device.id):
            if stream is None:
                return cupy.empty((rows, cols), dtype=t.dtype)
            with cupy.cuda.Stream.null if stream == 0 else cupy.cuda.ExternalStream(stream):
                return cupy.empty((rows, cols), dtype=t.dtype)

    return empty


def _foreign_empty(cls):
    # __cuda_array_interface__ or DLPack from another framework: how to allocate its tensors is unknown.
    def empty(t, rows, cols, stream):
        raise Error(f"no output given and ovl cannot allocate a {cls.__name__}: pass c=")

    return empty


_MAKERS = {"torch": _torch_empty, "cupy": _cupy_empty, "cuda-array-interface": _foreign_empty,
           "dlpack": _foreign_empty}
_EMPTY: dict = {}


def _empty(t, rows, cols, stream=None):
    """A new rows x cols tensor of ``t``'s framework, dtype and device, allocated in the order of ``stream`` (a
    handle; None: the framework's current stream), so that the work on that stream may write it; a TypeError for an
    object that is no tensor (the library decides)."""
    cls = type(t)
    f = _EMPTY.get(cls)
    if f is None:
        f = _EMPTY[cls] = _MAKERS[_ovl._tensor_kind(t)](cls)
    return f(t, rows, cols, stream)


def _cupy_current_stream(device: int) -> int:
    import cupy

    with cupy.cuda.Device(device):
        return cupy.cuda.get_current_stream().ptr


def _default_stream(device: int) -> int:
    # No tensor to ask: the current stream on `device` of whichever framework is loaded, else the legacy default
    # stream.
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return _ovl._current_stream("torch", device)
    if sys.modules.get("cupy") is not None:
        return _ovl._current_stream("cupy", device)
    return 0


def _profile(hardware) -> Optional[Hardware]:
    if hardware is None or isinstance(hardware, Hardware):
        return hardware
    text = os.fspath(hardware)
    if text.endswith(".json") or os.path.exists(text):
        return Hardware.load(text)
    return Hardware.builtin(text)


class Context:
    """One overlapped GEMM + collective per call (core/include/ovl/core/context.hpp).

    ``loopback_world=W`` emulates W ranks on one GPU (rank 0 runs on your tensors; see ``loopback_peer_inputs``);
    ``world=`` takes an ``ovl.World`` (``ovl.distributed.world()`` for torch.distributed); neither: a world of 1.
    ``hardware``: a Hardware, a built-in name or a profile JSON path (default: the detected GPU's profile).
    """

    def __init__(self, loopback_world: int = 0, device: Optional[int] = None, hardware=None, trace: bool = False,
                 world: Optional[World] = None, loopback_share: str = "rank0", wait_timeout_ms: float = 0.0,
                 tuning: Optional[str] = None, tuning_candidates: int = 4, tuning_budget_ms: float = 300.0,
                 tuning_min_gain: float = 0.02, plan_cache: Optional[str] = None,
                 link_profile: Optional[Union[str, os.PathLike]] = None):
        """``tuning``: "measured" (time the best candidates on the first call of a shape) or "predicted" (the
        planner alone); default: env OVL_TUNING, else measured. An overlapped plan is chosen only when faster than
        the best sequential one by ``tuning_min_gain`` (a fraction). ``plan_cache``: a file of chosen plans (default: env
        OVL_PLAN_CACHE; "" for none). ``link_profile``: the world's link (a built-in name, "nvlink4-node8" or "h200x2",
        or a JSON file; default: env OVL_LINK_PROFILE, else none): a loopback world is paced to it, a real world's
        planner prices the calls its measured tables hold by them; ``planning_hardware`` prices it."""
        if device is None:
            device = world.device if world is not None else 0
        self._ctx = _ovl._Context(loopback_world, int(device), _profile(hardware), bool(trace), world, loopback_share,
                                  float(wait_timeout_ms), tuning, int(tuning_candidates), float(tuning_budget_ms),
                                  float(tuning_min_gain),
                                  None if plan_cache is None else str(plan_cache),
                                  None if link_profile is None else os.fspath(link_profile))
        self._world_size = self._ctx.world_size
        self._op = self._ctx._op

    # ---- properties ----
    device = property(lambda self: self._ctx.device)
    rank = property(lambda self: self._ctx.rank)
    world_size = property(lambda self: self._world_size)
    loopback = property(lambda self: self._ctx.loopback)
    link_profile = property(lambda self: self._ctx.link_profile)  # the world's link profile name, or None
    sm_count = property(lambda self: self._ctx.sm_count)
    hardware = property(lambda self: self._ctx.hardware)
    planning_hardware = property(lambda self: self._ctx.planning_hardware)

    # ---- the three operators ----
    def gemm_all_reduce(self, a, b, c=None, *, plan: Optional[Plan] = None, stream=None, b_layout: str = "nt"):
        """C (M x N) = sum over ranks of A_r (M x K) B_r; B is N x K ("nt", a weight) or K x N ("nn")."""
        return self._op("gemm-allreduce", a, b, c, plan, stream, b_layout)

    def gemm_reduce_scatter(self, a, b, c=None, *, plan: Optional[Plan] = None, stream=None, b_layout: str = "nt"):
        """C (M/W x N) = this rank's rows of sum over ranks of A_r B_r."""
        return self._op("gemm-reducescatter", a, b, c, plan, stream, b_layout)

    def all_gather_gemm(self, a, b, c=None, *, plan: Optional[Plan] = None, stream=None, b_layout: str = "nt"):
        """C (M x N) = gather(A) B, A being this rank's M/W x K rows."""
        return self._op("allgather-gemm", a, b, c, plan, stream, b_layout)

    # ---- planning and state ----
    def problem(self, op: str, a, b, c=None, b_layout: str = "nt") -> Problem:
        """The Problem a call with these tensors describes (shapes checked as a call checks them)."""
        from . import _op_name

        op = _op_name(op)
        return self._ctx._problem(op, a, b, c, b_layout)

    def plan_choice(self, problem: Problem):
        """How the plan of a call without ``plan=`` was chosen for this problem (a PlanChoice: ``plan``,
        ``chosen_by``, ``measured_us``, ``sequential_us``, ``tuning_ms``, ``candidates``), or None before such a
        call."""
        return self._ctx.plan_choice(problem)

    def can_run(self, problem: Problem, plan: Plan) -> str:
        """"" when this context can run ``plan`` for ``problem``, else why not."""
        return self._ctx.can_run(problem, plan)

    def synchronize(self, stream=None) -> None:
        """Waits for ``stream`` (default: the current stream of torch / CuPy) and the context's own streams; a
        device-side wait that timed out raises ovl.Error."""
        self._ctx.synchronize(_default_stream(self.device) if stream is None else _ovl._stream_handle(stream))

    def release_caches(self) -> None:
        """Frees every per-shape buffer and cached plan (collective in a real world with mode tma)."""
        self._ctx.release_caches()

    def set_tracing(self, on: bool) -> None:
        self._ctx.set_tracing(bool(on))

    def last_timeline(self) -> Timeline:
        """The measured Timeline of the last call (tracing on); synchronizes the device."""
        return self._ctx.last_timeline()

    def loopback_peer_inputs(self, op: str, a, b, c=None, b_layout: str = "nt") -> list:
        """Loopback only: ranks 1..W-1's inputs for this call's shape, as new tensors of ``a``'s framework:
        GEMM+AR/RS their M x N partial products, AG+GEMM their M/W x K rows of A (references for tests)."""
        p = self.problem(op, a, b, c, b_layout)
        # The tensors are the framework's: their copies go in its stream order.
        stream = _ovl._current_stream(_ovl._tensor_kind(a), self.device)
        rows, cols = (p.m // p.world, p.k) if p.op == "allgather-gemm" else (p.m, p.n)
        out = []
        for r in range(p.world - 1):
            t = _empty(a, rows, cols)
            self._ctx._copy_loopback_peer_input(p, r, t, stream)
            out.append(t)
        return out
