"""Kernel tests run the Triton kernels in the CPU interpreter when there is no GPU.

TRITON_INTERPRET must be set before `@triton.jit` runs, i.e. before radixgen.kernels.<op>
modules are imported; they are imported lazily, by these tests only.
"""

import os

import pytest
import torch

from tests.runtime.conftest import tiny_model_path  # noqa: F401 (the engine tests' fixture)

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# the device the Triton kernels run on here: a GPU, or the CPU under the interpreter
KERNEL_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def kernel_device() -> str:
    return KERNEL_DEVICE
