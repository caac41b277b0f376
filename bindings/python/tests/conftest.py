"""Shared fixtures. libweft comes from WEFT_LIBRARY / WEFT_LIB_DIR (test.sh sets WEFT_LIBRARY)."""
import os
import tempfile

import numpy as np
import pytest

# Keep the tests' kernel cache out of the user's: one private folder for the session.
os.environ.setdefault("WEFT_CACHE_DIR", tempfile.mkdtemp(prefix="weft-pytest-cache-"))

import weft  # noqa: E402
from helpers import gpu_skip_reason  # noqa: E402


def pytest_report_header(config):
    try:
        return (f"weft {weft.version()}: package {os.path.dirname(weft.__file__)}, library {weft.lib()._name}; "
                f"CUDA: {weft.cuda_unavailable_reason() or 'available'}")
    except weft.LibraryNotFoundError as e:
        return f"libweft not loadable: {e.message}"


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def gpu():
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


