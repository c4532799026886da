"""Where the neural models run: ``auto`` (a CUDA GPU when torch sees one, else the CPU), ``cpu``
or ``cuda`` (``cuda:N`` for one of several), and the mixed precision used on a GPU.

The names are checked without torch (:func:`check_device_name`, for settings objects); resolving
one (:func:`resolve_device`) imports it.
"""

from __future__ import annotations

import contextlib
import re

from ..errors import ConfigError

# what the matrix products of a GPU run in: bfloat16 autocast (float32 weights, optimizer states and
# losses), or float32 throughout; the CPU always runs float32
GPU_PRECISIONS = ("bfloat16", "float32")
_DEVICE_NAME = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device_name(name: str) -> None:
    """Refuse a device name other than auto, cpu, cuda or cuda:N (a :class:`ConfigError`)."""
    if not isinstance(name, str) or not _DEVICE_NAME.match(name):
        raise ConfigError(f"device must be one of auto, cpu, cuda or cuda:N, got {name!r}")


def resolve_device(name: str):
    """The ``torch.device`` for ``name``: ``auto`` is the first CUDA GPU when torch sees one, else
    the CPU; ``cuda`` on a machine where torch sees none is a :class:`ConfigError` saying why."""
    import torch

    check_device_name(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise ConfigError(f"device {name!r}: torch {torch.__version__} ({build}) sees no CUDA GPU; use --device cpu or auto")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"device {name!r}: torch sees {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def describe(device) -> str:
    """``cpu``, or ``cuda (NVIDIA H100 80GB HBM3)``: what a benchmark or ``training.json`` records."""
    import torch

    if device.type != "cuda":
        return "cpu"
    return f"cuda ({torch.cuda.get_device_name(device)})"


def autocast(device, precision: str):
    """Mixed precision for the forward pass on a GPU (``precision`` ``bfloat16``), else nothing:
    on the CPU results stay as they were (float32)."""
    import torch

    if device.type == "cuda" and precision == "bfloat16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
