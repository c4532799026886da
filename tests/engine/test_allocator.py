"""engine/allocator.py: glibc's thresholds raised where glibc is, nothing done elsewhere."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import types

import pytest

from gandalf_xmc.engine import allocator


def test_elsewhere_than_linux_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    called = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *a: called.append(a))
    assert allocator.reuse_step_memory() is False and not called


def test_without_glibc_nothing_is_changed(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")

    def no_glibc(name):
        raise OSError(name)

    monkeypatch.setattr(ctypes, "CDLL", no_glibc)
    assert allocator.reuse_step_memory() is False


def test_glibc_gets_both_thresholds(monkeypatch):
    calls = []

    class Mallopt:  # a stand-in for ctypes' function object (it takes argtypes and restype)
        def __call__(self, option, value):
            calls.append((option, value))
            return 1

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace(mallopt=Mallopt()))
    assert allocator.reuse_step_memory(1 << 20) is True
    assert calls == [(allocator.M_MMAP_THRESHOLD, 1 << 20), (allocator.M_TRIM_THRESHOLD, 4 << 20)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_on_this_linux_glibc_takes_it():
    try:
        ctypes.CDLL("libc.so.6")
    except OSError:
        pytest.skip("not glibc")
    # in a process of its own: the setting is process-wide, and the tests' process is not an entry point
    code = "from gandalf_xmc.engine.allocator import reuse_step_memory; print(reuse_step_memory())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
