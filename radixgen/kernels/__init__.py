"""Triton kernels with plain-torch references (no radixgen imports). Filled by the kernels issue."""
