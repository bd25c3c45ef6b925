"""The CPU part of the Python module: planner, simulator, model, profiles, errors and JSON round trips.
Runs everywhere (no GPU); the expected values come from the C++ library itself, so these test the binding."""

import json

import pytest

import ovl

SHAPE = dict(op="gemm-reducescatter", m=8192, n=8192, k=4096, world=8)


def test_plan_result_fields():
    r = ovl.plan(**SHAPE)
    assert isinstance(r.best, ovl.Plan)
    assert r.best.mode in ovl.modes()
    assert r.predicted_us > 0 and r.sequential_us > 0
    assert r.speedup == pytest.approx(r.sequential_us / r.predicted_us)
    assert r.alternatives[0].plan == r.best
    assert r.alternatives[0].predicted_us == pytest.approx(r.predicted_us)
    assert r.candidates >= r.simulated > 0
    assert r.problem.name == "gemm-reducescatter/8192x8192x4096/bf16/nt/world:8"
    assert r.hardware == ovl.Hardware.builtin("h200").name
    # Every key of the library's JSON is an attribute (a field added to PlanResult needs one def_ro line).
    for key in r.to_dict():
        if key not in ("plan",):  # the JSON calls `best` "plan"
            assert hasattr(r, key), key
    assert "speedup" in str(r)


def test_plan_attributes_cover_json():
    plan = ovl.plan(**SHAPE).best
    for key in json.loads(plan.to_json()):
        assert hasattr(plan, key), f"Plan.{key} is not bound (python/src/module.cpp)"


def test_plan_options_and_aliases():
    r = ovl.plan("gemm_reduce_scatter", 8192, 8192, 4096, 8, modes=["sequential", "decomposed"], use_simulator=False)
    assert r.best.mode in ("sequential", "decomposed")
    assert all(a.plan.mode in ("sequential", "decomposed") for a in r.alternatives)
    loop = ovl.plan(**SHAPE, loopback=True)
    assert loop.predicted_us > 0


def test_plan_json_round_trip(tmp_path):
    plan = ovl.plan(**SHAPE).best
    again = ovl.Plan.from_json(plan.to_json())
    assert again == plan
    assert ovl.Plan.from_json(plan.to_dict()) == plan
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    assert ovl.load_plan(str(path)) == plan


def test_plan_attributes_write():
    p = ovl.Plan()
    p.mode = "tma"
    p.comm_algo = "tma-pull"
    p.tile_groups = [4, 4]
    p.comm_sms = 16
    assert (p.mode, p.comm_algo, p.tile_groups, p.comm_sms) == ("tma", "tma-pull", [4, 4], 16)
    with pytest.raises(ovl.Error, match="mode"):
        p.mode = "fastest"
    assert p.cta_policy == "default"
    p.comm_algo, p.cta_policy = "nccl-symmetric", "zero"
    assert (p.comm_algo, p.cta_policy) == ("nccl-symmetric", "zero")
    with pytest.raises(ovl.Error, match="fewest"):
        p.cta_policy = "fewest"


def test_simulate_timeline_and_trace(tmp_path):
    trace = tmp_path / "trace.json"
    r = ovl.simulate(**SHAPE, plan="tma", trace=trace)
    assert r.total_us > 0
    assert r.intervals and len(r.intervals) == len(r.timeline.intervals)
    lanes = {i.lane for i in r.timeline.intervals}
    assert "gemm" in lanes
    assert all(i.end_ns >= i.start_ns for i in r.intervals)
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    # The planner's plan simulates to its own prediction.
    best = ovl.plan(**SHAPE)
    assert ovl.simulate(**SHAPE, plan=best.best).total_us == pytest.approx(best.predicted_us, rel=1e-9)


def test_estimate():
    e = ovl.estimate(**SHAPE, plan="sequential")
    assert e.total_us == pytest.approx(e.gemm_us + e.exposed_comm_us, rel=0.05)
    assert e.gemm_alone_us > 0 and e.comm_alone_us > 0


def test_hardware_fields_and_round_trip(tmp_path):
    assert "h200" in ovl.Hardware.builtin_names()
    hw = ovl.Hardware.builtin("h200")
    for path in ovl.Hardware.field_names():  # "spec.sm_count", "fit.gemm_efficiency", ...
        part, name = path.split(".")
        assert isinstance(getattr(getattr(hw, part), name), (int, float)), f"{path}: not bound (python/src/module.cpp)"
    hw.spec.hbm_GBps = 4000.0  # the parts are the profile's own, not copies
    hw.fit.gemm_efficiency = 0.6
    assert hw.spec.hbm_GBps == 4000.0 and hw.to_dict()["fit"]["gemm_efficiency"] == 0.6
    assert set(hw.to_dict()) == {"name", "spec", "fit"}
    assert not hw.emulation.loopback and hw.loopback(8, "rank0").emulation.loopback_rank0
    path = tmp_path / "hw.json"
    hw.save(str(path))
    again = ovl.Hardware.load(str(path))
    assert again.spec.hbm_GBps == 4000.0 and again.spec.sm_count == hw.spec.sm_count
    assert json.loads(again.to_json()) == json.loads(hw.to_json())
    slower = ovl.plan(**SHAPE, profile=path)
    assert slower.predicted_us > 0
    assert ovl.Hardware.for_device_name("NVIDIA H200").name == hw.name


def test_errors_carry_the_message():
    assert issubclass(ovl.Error, RuntimeError)
    with pytest.raises(ovl.Error, match="world"):
        ovl.plan("gemm-reducescatter", 8190, 8192, 4096, 8)  # M not divisible by world
    with pytest.raises(ovl.Error, match="a100x"):
        ovl.Hardware.builtin("a100x")
    with pytest.raises(ovl.Error, match="op"):
        ovl.plan("gemm-bogus", 1024, 1024, 1024, 8)
    with pytest.raises(ovl.Error):
        ovl.Hardware.load("/nonexistent/profile.json")
    hw = ovl.Hardware.builtin("h200")
    hw.fit.gemm_efficiency = 1.5
    with pytest.raises(ovl.Error, match="fit.gemm_efficiency"):
        hw.validate()
    with pytest.raises(ovl.Error, match='"sm_count" is at the top level: move it into "spec"'):
        ovl.Hardware.from_json({"sm_count": 132})


def test_bad_arguments_are_named_never_coerced_or_crashing(tmp_path, monkeypatch):
    # Sizes are integers: a float, a string or a bool is refused by name, not truncated or taken as 1.
    for bad in (dict(m=8192.5), dict(m="8192"), dict(world=True), dict(k=2**70)):
        with pytest.raises((TypeError, ValueError), match=next(iter(bad))):
            ovl.plan(**{**SHAPE, **bad})
    with pytest.raises(ovl.Error, match="tma given twice"):
        ovl.plan(**SHAPE, modes=["tma", "tma"])
    assert {a.plan.mode for a in ovl.plan(**SHAPE, modes="tma").alternatives} == {"tma"}  # one name, not letters
    with pytest.raises(TypeError, match="dtype"):
        ovl.plan(**SHAPE, dtype=3.0)
    with pytest.raises(ovl.Error, match="junk.bf16"):
        ovl.plan(**SHAPE, dtype="junk.bf16")
    with pytest.raises(ValueError, match="gpu and hardware"):
        ovl.plan(**SHAPE, gpu="h100", hardware=ovl.Hardware.builtin("a100"))
    # OVL_PROFILE, as for `ovl plan`.
    path = tmp_path / "h100.json"
    ovl.Hardware.builtin("h100").save(path)
    monkeypatch.setenv("OVL_PROFILE", str(path))
    assert ovl.plan(**SHAPE).hardware == ovl.Hardware.builtin("h100").name
    monkeypatch.delenv("OVL_PROFILE")
    # A loopback profile is neither emulated twice nor saved (its emulation is not in the JSON).
    lb = ovl.Hardware.builtin("h200").loopback(8)
    assert lb.emulation.loopback_rank0
    with pytest.raises(ovl.Error, match="loopback profile already"):
        ovl.plan(**SHAPE, hardware=lb, loopback=True)
    with pytest.raises(ovl.Error, match="loopback profile"):
        lb.save(tmp_path / "lb.json")
    # JSON: damaged or deeply nested input is an ovl.Error (it crashed); unknown problem fields are refused.
    for cls in (ovl.Plan, ovl.Problem, ovl.Hardware):
        with pytest.raises(ovl.Error, match="100000 levels deep"):
            cls.from_json("[" * 100000 + "]" * 100000)
        with pytest.raises(ovl.Error):
            cls.from_json("not json")
    with pytest.raises(ovl.Error, match="gpus_per_nodes"):
        ovl.Problem.from_json({**ovl.problem(**SHAPE).to_dict(), "gpus_per_nodes": 4})
    # A file that is not UTF-8 gives ovl.Error, not UnicodeDecodeError.
    bad = tmp_path / "utf16.json"
    bad.write_bytes('{"name": 1}'.encode("utf-16"))
    with pytest.raises(ovl.Error):
        ovl.Hardware.load(bad)


def test_values_compare_copy_and_pickle():
    import copy
    import pickle
    r = ovl.plan(**SHAPE)
    plan, prob = r.best, r.problem
    assert plan != None and plan not in [None, 1]  # noqa: E711
    assert pickle.loads(pickle.dumps(plan)) == plan and copy.deepcopy(plan) == plan
    assert pickle.loads(pickle.dumps(prob)) == prob == ovl.problem(**SHAPE)
    with pytest.raises(TypeError):
        hash(plan)
    # A result's plan is a copy: changing it leaves the result as the planner returned it.
    best = r.best
    best.comm_sms = 99
    assert r.best == plan and r.to_dict()["plan"]["comm_sms"] == plan.comm_sms
    # FP8 with fp16 output can be planned.
    fp8 = ovl.plan(**SHAPE, dtype="e4m3", out_dtype="fp16")
    assert fp8.problem.out_dtype == "fp16"


def _bench(name, us):
    return {"name": name, "run_type": "iteration", "real_time": us, "time_unit": "us", "iterations": 10}


def test_validate_and_calibrate(tmp_path):
    names = ["gemm/cublas/8192x8192x8192/nt/sms:132", "gemm/cublas/4096x8192x8192/nt/sms:132",
             "gemm/ovl/8192x8192x8192/nt/sms:132"]
    data = {"context": {"gpu": "NVIDIA H200", "gpu_count": "8"}, "benchmarks": [_bench(n, 1500.0) for n in names]}
    path = tmp_path / "bench_gemm.json"
    path.write_text(json.dumps(data))

    v = ovl.validate(path)
    assert v.hardware == ovl.Hardware.builtin("h200").name
    assert len(v.cases) == 3 and v.model.cases == 3
    apes = [100 * abs(c.model_us - c.measured_us) / c.measured_us for c in v.cases]
    assert v.model.mape == pytest.approx(sum(apes) / len(apes))
    assert "MAPE" in v.summary() or v.summary()

    out = tmp_path / "fitted.json"
    c = ovl.calibrate([path], output=out)
    assert c.measurements == 3
    assert isinstance(c.hardware, ovl.Hardware)
    assert ovl.Hardware.load(str(out)).spec.sm_count == c.hardware.spec.sm_count
    with pytest.raises(ovl.Error, match="missing.json"):
        ovl.validate(tmp_path / "missing.json")


def test_context_without_cuda_is_a_clear_error():
    if ovl.CUDA:
        pytest.skip("CUDA build: ovl.Context exists (tests/test_gpu.py)")
    with pytest.raises(ovl.Error, match="CUDA build"):
        ovl.Context(loopback_world=8)


def test_type_stubs_beside_the_extension():
    # ovl/_ovl.pyi is generated from the built module (python/CMakeLists.txt) and installed with it, with py.typed.
    import ast
    import pathlib

    here = pathlib.Path(ovl._ovl.__file__).parent
    assert (here / "py.typed").exists()
    tree = ast.parse((here / "_ovl.pyi").read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for name in ("Plan", "Problem", "Hardware", "PlanResult", "SimResult", "Error"):
        assert name in classes, name
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"default_plan", "load_plan", "modes"} <= functions, functions


def test_every_public_class_and_function_says_what_it_is():
    import inspect

    missing = [name for name, x in vars(ovl._ovl).items()
               if not name.startswith("_") and (inspect.isclass(x) or callable(x)) and not (x.__doc__ or "").strip()]
    assert not missing, missing


def test_paced_loopback_planning(tmp_path):
    """link_profile (a built-in name or a file) paces the loopback as `ovl plan --loopback rank0 --link-profile`
    does: the sequential baseline's collective crosses the slower link, so it is priced slower than unpaced."""
    unpaced = ovl.plan(**SHAPE, loopback=True)
    paced = ovl.plan(**SHAPE, loopback=True, link_profile="nvlink4-node8")
    assert "paced: nvlink4-node8" in paced.hardware
    assert paced.sequential_us > unpaced.sequential_us
    hw = ovl.Hardware.builtin("h200").loopback(8, link_profile="nvlink4-node8")
    assert hw.emulation.loopback_rank0 and hw.name == paced.hardware
    est = ovl.estimate(**SHAPE, plan="sequential", loopback=True, link_profile="h200x2")
    assert est.total_us > ovl.estimate(**SHAPE, plan="sequential", loopback=True).total_us
    # Without a loopback the link is a real world's as measured: its tables price the calls they hold (SHAPE is a
    # world of 8; h200x2 measured NCCL on 2 GPUs: the same AllReduce at world 2).
    real = dict(SHAPE, world=2, op="gemm-allreduce")
    linked = ovl.estimate(**real, plan="sequential", link_profile="h200x2")
    assert linked.total_us != ovl.estimate(**real, plan="sequential").total_us
    assert ovl.Hardware.builtin("h200").with_link("h200x2").name == "H200 SXM over h200x2"
    assert "over h200x2" in ovl.plan(**real, link_profile="h200x2").hardware
    with pytest.raises(ovl.Error, match="no-such-link"):
        ovl.plan(**SHAPE, loopback=True, link_profile="no-such-link")
    bad = tmp_path / "link.json"
    bad.write_text('{"name": "x"}')
    with pytest.raises(ovl.Error, match="link.json"):
        ovl.simulate(**SHAPE, plan="sequential", loopback=True, link_profile=bad)
    with pytest.raises(ovl.Error, match="paces rank 0"):
        ovl.Hardware.builtin("h200").loopback(8, "whole-world", "nvlink4-node8")
