"""ovl: a GEMM overlapped with its collective (GEMM+AllReduce, GEMM+ReduceScatter, AllGather+GEMM).

CPU everywhere: ``plan``, ``simulate``, ``estimate``, ``Hardware``, ``calibrate``, ``validate``.
CUDA builds: ``Context`` over torch / CuPy / DLPack tensors (see ``ovl.context``), and ``ovl.distributed`` for
torch.distributed worlds. Errors from the library are ``ovl.Error`` (a RuntimeError) carrying its message.
"""

from __future__ import annotations

import importlib.util
import operator
import os
from typing import Iterable, Optional, Sequence, Union

# torch, when installed, is loaded before ovl's extension: loaded the other way round (ovl's CUDA, cuBLAS and NCCL
# libraries first), `import torch` aborted with "free(): invalid pointer" (docs/reliability.md; torch's wheel brings
# its own copies of those libraries). OVL_IMPORT_TORCH=0 skips it.
if os.environ.get("OVL_IMPORT_TORCH", "1") != "0" and importlib.util.find_spec("torch") is not None:
    import torch  # noqa: F401

from . import _ovl
from ._ovl import (  # noqa: F401  (re-exported)
    CalibrationResult,
    DeviceSpec,
    Emulation,
    Error,
    Hardware,
    Interval,
    ModeEstimate,
    ModelParams,
    Plan,
    PlanAlternative,
    PlannerOptions,
    PlanResult,
    Problem,
    SimResult,
    TileShape,
    Timeline,
    ValidationResult,
    default_plan,
    load_plan,
    modes,
)

__all__ = [
    "CUDA", "Context", "Error", "Hardware", "Plan", "PlanResult", "Problem", "SimResult", "Timeline", "calibrate",
    "estimate", "load_plan", "modes", "plan", "problem", "simulate", "validate",
]

CUDA: bool = bool(_ovl.cuda)  # built with the Context (nvcc was found at build time)

_OP_ALIASES = {
    "gemm_all_reduce": "gemm-allreduce",
    "gemm_allreduce": "gemm-allreduce",
    "gemm_reduce_scatter": "gemm-reducescatter",
    "gemm_reducescatter": "gemm-reducescatter",
    "all_gather_gemm": "allgather-gemm",
    "allgather_gemm": "allgather-gemm",
}
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32"}


def _op_name(op: str) -> str:
    if not isinstance(op, str):
        raise TypeError(f"op = {op!r} is not a string (gemm-allreduce, gemm-reducescatter or allgather-gemm)")
    return _OP_ALIASES.get(op, op)


def _dtype_name(dtype) -> str:
    """A library dtype name from a name ("bf16", "bfloat16"), a torch dtype or a numpy dtype (or its type)."""
    if isinstance(dtype, str):
        text = dtype
    elif type(dtype).__module__.startswith("torch"):
        text = str(dtype).removeprefix("torch.")  # torch.bfloat16 -> bfloat16
    else:
        try:
            import numpy
            text = numpy.dtype(dtype).name  # numpy.float16, numpy.dtype("float16") -> float16
        except (ImportError, TypeError):
            raise TypeError(f"dtype = {dtype!r} is not a dtype name, a torch dtype or a numpy dtype") from None
    return _DTYPE_ALIASES.get(text, text)


def _int(name: str, value, bits: int = 64) -> int:
    """``value`` as an int when it is one (numpy integers too; not bool, float or str), else TypeError / ValueError
    naming ``name``; the range of a signed ``bits``-bit field is checked here so that the message names it."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{name} = {value!r} is not an integer")
    v = operator.index(value)
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"{name} = {v} is out of range")
    return v


def _hw(gpu: Optional[str] = None, profile: Optional[Union[str, os.PathLike]] = None,
        hardware: Optional[Hardware] = None) -> Hardware:
    """The profile to use: ``hardware`` as given, else the JSON file ``profile``, else the built-in ``gpu``, else the
    profile file in env OVL_PROFILE, else the H200's (as ``ovl plan``). At most one of the three may be given."""
    given = [name for name, v in (("gpu", gpu), ("profile", profile), ("hardware", hardware)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one of gpu, profile and hardware, not {' and '.join(given)}")
    if hardware is not None:
        return hardware
    if profile is not None:
        return Hardware.load(os.fspath(profile))
    if gpu is None and os.environ.get("OVL_PROFILE"):
        return Hardware.load(os.environ["OVL_PROFILE"])
    return Hardware.builtin(gpu or "h200")


def problem(op: str, m: int, n: int, k: int, world: int, dtype="bf16", b_layout: str = "nt",
            gpus_per_node: int = 8, out_dtype=None) -> Problem:
    """A validated Problem (sizes per rank, as in ``ovl plan``; see model/problem.hpp). ``out_dtype``: C's type for
    FP8 inputs (bf16 by default, or fp16); bf16 / fp16 inputs write C in their own type."""
    p = Problem()
    p.op = _op_name(op)
    p.m, p.n, p.k = _int("m", m), _int("n", n), _int("k", k)
    p.world = _int("world", world, 32)
    p.dtype = _dtype_name(dtype)
    if out_dtype is not None:
        p.out_dtype = _dtype_name(out_dtype)
    p.b_layout = b_layout
    p.gpus_per_node = _int("gpus_per_node", gpus_per_node, 32)
    p.validate()
    return p


def _modes(modes) -> list:
    """Mode names from one name, a comma-separated string or an iterable of names (the planner refuses a repeat)."""
    names = modes.split(",") if isinstance(modes, str) else list(modes)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"modes: {name!r} is not a mode name")
    return names


def _world_hardware(hw: Hardware, world: int, loopback: Union[bool, str], link_profile=None) -> Hardware:
    # loopback=True plans for rank 0's share on one GPU, as Context(loopback_world=W) runs it; link_profile paces it
    # (as Context(link_profile=...) or env OVL_LINK_PROFILE runs it). Without a loopback, link_profile is the real
    # world's link as measured: its tables price the calls they hold (Hardware.with_link).
    if not loopback:
        return hw if link_profile is None else hw.with_link(link_profile)
    return hw.loopback(world, "rank0" if loopback is True else loopback, link_profile)


def plan(op: str, m: int, n: int, k: int, world: int, *, gpu: Optional[str] = None, profile=None,
         hardware: Optional[Hardware] = None, dtype="bf16", b_layout: str = "nt", gpus_per_node: int = 8,
         out_dtype=None, loopback: Union[bool, str] = False,
         link_profile: Optional[Union[str, os.PathLike]] = None, modes: Optional[Union[str, Iterable[str]]] = None,
         min_comm_sms: int = 8,
         max_comm_sms: int = 64, simulate_top: int = 8, max_groups: int = 64, use_simulator: bool = True,
         runnable_only: bool = True, min_gain: float = 0.0) -> PlanResult:
    """The planner's choice for one problem: ``result.best`` (a Plan), ``predicted_us``, the baseline
    (``sequential``, ``sequential_us``; ``sequential_best`` when the baseline itself is the answer), ``speedup`` and the
    ranked ``alternatives`` (sim/planner.hpp). ``loopback`` plans for a loopback world, ``link_profile`` (a built-in
    name or a JSON file) for a paced one, or without ``loopback`` for a real world over that measured link; an
    overlapped plan must be predicted faster than the baseline by ``min_gain`` (a fraction)."""
    p = problem(op, m, n, k, world, dtype, b_layout, gpus_per_node, out_dtype)
    hw = _world_hardware(_hw(gpu, profile, hardware), p.world, loopback, link_profile)
    o = PlannerOptions()
    if modes is not None:
        o.modes = _modes(modes)
    o.min_comm_sms, o.max_comm_sms = _int("min_comm_sms", min_comm_sms, 32), _int("max_comm_sms", max_comm_sms, 32)
    o.simulate_top, o.max_groups = _int("simulate_top", simulate_top, 32), _int("max_groups", max_groups, 32)
    o.use_simulator, o.runnable_only = bool(use_simulator), bool(runnable_only)
    o.min_gain = float(min_gain)
    return _ovl._plan(p, hw, o)


def _plan_for(p: Problem, hw: Hardware, plan_or_mode: Union[Plan, str, None]) -> Plan:
    if isinstance(plan_or_mode, Plan):
        return plan_or_mode
    if plan_or_mode is None:
        return _ovl._plan(p, hw, PlannerOptions()).best
    return default_plan(plan_or_mode, p, hw, 0 if plan_or_mode == "sequential" else 16)


def simulate(op: str, m: int, n: int, k: int, world: int, plan: Union[Plan, str, None] = None, *,
             gpu: Optional[str] = None, profile=None, hardware: Optional[Hardware] = None, dtype="bf16",
             b_layout: str = "nt", gpus_per_node: int = 8, out_dtype=None, loopback: Union[bool, str] = False,
             link_profile: Optional[Union[str, os.PathLike]] = None,
             trace: Optional[Union[str, os.PathLike]] = None, counters: bool = True, steps: bool = True,
             trace_ranks: int = 1) -> SimResult:
    """Simulates ``plan`` (a Plan, a mode name for its default plan, or None for the planner's best) and returns
    the SimResult (``total_us``, ``timeline.intervals`` ...); ``trace`` writes its Chrome trace (Perfetto) there."""
    p = problem(op, m, n, k, world, dtype, b_layout, gpus_per_node, out_dtype)
    hw = _world_hardware(_hw(gpu, profile, hardware), p.world, loopback, link_profile)
    result = _ovl._simulate(p, _plan_for(p, hw, plan), hw, True, counters, steps, _int("trace_ranks", trace_ranks, 32))
    if trace is not None:
        result.timeline.write_chrome_trace(os.fspath(trace))
    return result


def estimate(op: str, m: int, n: int, k: int, world: int, plan: Union[Plan, str, None] = None, *,
             gpu: Optional[str] = None, profile=None, hardware: Optional[Hardware] = None, dtype="bf16",
             b_layout: str = "nt", gpus_per_node: int = 8, out_dtype=None,
             loopback: Union[bool, str] = False,
             link_profile: Optional[Union[str, os.PathLike]] = None) -> ModeEstimate:
    """The closed-form model's estimate (model/estimate.hpp) of ``plan`` (as for simulate)."""
    p = problem(op, m, n, k, world, dtype, b_layout, gpus_per_node, out_dtype)
    hw = _world_hardware(_hw(gpu, profile, hardware), p.world, loopback, link_profile)
    return _ovl._estimate(p, _plan_for(p, hw, plan), hw)


def _paths(files) -> list:
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    return [os.fspath(f) for f in files]


def calibrate(files: Union[str, os.PathLike, Sequence], *, gpu: Optional[str] = None, profile=None,
              hardware: Optional[Hardware] = None, output: Optional[Union[str, os.PathLike]] = None
              ) -> CalibrationResult:
    """Fits a hardware profile to benchmark JSON files (as ``ovl calibrate``). The base profile: ``hardware`` /
    ``profile`` / ``gpu`` when given, else the built-in profile of the GPU the files name (an error when it has none),
    else the H200's. ``output`` saves it."""
    base = None
    if hardware is not None or profile is not None or gpu is not None:
        base = _hw(gpu, profile, hardware)
    result = _ovl._calibrate(_paths(files), base)
    if output is not None:
        result.hardware.save(os.fspath(output))
    return result


def validate(files: Union[str, os.PathLike, Sequence], *, gpu: Optional[str] = None, profile=None,
             hardware: Optional[Hardware] = None) -> ValidationResult:
    """Predicted versus measured over benchmark JSON files (as ``ovl validate``): per-case model and simulator
    times, error statistics and ranking quality. Without a profile, each file's own GPU."""
    chosen = None
    if hardware is not None or profile is not None or gpu is not None:
        chosen = _hw(gpu, profile, hardware)
    return _ovl._validate(_paths(files), chosen)


if CUDA:
    from .context import Context, World  # noqa: E402,F401
else:
    class Context:  # noqa: D101
        """Unavailable: this build of ovl has no CUDA part (nvcc was not found when it was built)."""

        def __init__(self, *args, **kwargs):
            raise Error("ovl.Context needs the CUDA build of ovl; this one was built without nvcc "
                        "(rebuild where the CUDA toolkit is installed: pip install . with nvcc on PATH)")
