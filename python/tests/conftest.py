"""Shared fixtures: GPU tests skip (with the reason) where there is no CUDA build, no torch/CuPy or no GPU."""

import pytest

import ovl


def _torch_gpu():
    if not ovl.CUDA:
        return None, "ovl was built without CUDA"
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "no CUDA GPU"
    if torch.cuda.get_device_capability(0) != (9, 0):
        return None, f"needs a Hopper GPU (sm_90), found sm_{''.join(map(str, torch.cuda.get_device_capability(0)))}"
    return torch, ""


@pytest.fixture(scope="module")
def torch_gpu():
    torch, why = _torch_gpu()
    if torch is None:
        pytest.skip(why)
    return torch


@pytest.fixture(scope="module")
def cupy_gpu():
    if not ovl.CUDA:
        pytest.skip("ovl was built without CUDA")
    try:
        import cupy
    except ImportError:
        pytest.skip("cupy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA GPU")
        if cupy.cuda.Device(0).compute_capability != "90":
            pytest.skip("needs a Hopper GPU (sm_90)")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"no usable CUDA GPU ({e})")
    return cupy
