"""Shared fixtures. libweft comes from WEFT_LIBRARY / WEFT_LIB_DIR (test.sh sets WEFT_LIBRARY)."""
import os
import tempfile

import numpy as np
import pytest

# Keep the tests' kernel cache out of the user's: one private folder for the session.
os.environ.setdefault("WEFT_CACHE_DIR", tempfile.mkdtemp(prefix="weft-pytest-cache-"))

import weft  # noqa: E402


def pytest_report_header(config):
    try:
        return f"weft {weft.version()} from {weft.lib()._name}; CUDA: {weft.cuda_unavailable_reason() or 'available'}"
    except weft.LibraryNotFoundError as e:
        return f"libweft not loadable: {e.message}"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def gpu_skip_reason():
    """None when a GPU test can run, else why not (printed by pytest -rs)."""
    reason = weft.cuda_unavailable_reason()
    if reason:
        return f"no CUDA device: {reason}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


@pytest.fixture
def gpu():
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


