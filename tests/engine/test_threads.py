"""limit_threads: what numba and torch run on after an entry point's --threads, in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

COUNTS = """
import json, numba
try:
    import torch
    torch_threads = torch.get_num_threads()
except ModuleNotFoundError:
    torch_threads = None
print(json.dumps({"taken": TAKEN, "numba": numba.get_num_threads(), "torch": torch_threads, "pool": numba.config.NUMBA_NUM_THREADS}))
"""


def counts_after(call: str, env_threads: int = 4) -> dict:
    """The thread counts a fresh process reports after ``call`` (numba's pool started at ``env_threads``)."""
    code = f"from gandalf_xmc.engine.threads import limit_threads\nTAKEN = {call}\n" + COUNTS
    env = {"PATH": "", "NUMBA_NUM_THREADS": str(env_threads), "OMP_NUM_THREADS": str(env_threads)}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def test_one_thread_reaches_numba_and_torch_from_a_pool_of_four():
    got = counts_after("limit_threads(1)")
    assert got["pool"] == 4 and got["taken"] == 1 and got["numba"] == 1
    assert got["torch"] in (1, None)  # None: the core package, without torch


def test_more_threads_than_numba_s_pool_take_the_pool_and_torch_takes_what_was_asked():
    got = counts_after("limit_threads(6)", env_threads=2)
    assert (got["taken"], got["numba"]) == (2, 2)
    assert got["torch"] in (6, None)


def test_no_threads_is_an_error():
    from gandalf_xmc.engine.threads import limit_threads

    with pytest.raises(ValueError, match="at least 1"):
        limit_threads(0)


def test_the_suite_s_threads_reach_numba_and_torch_before_any_run(tmp_path):
    """benchmarks/suite.py --threads 1: the runs' grid starts with numba and torch at one thread."""
    code = f"""
import json, sys
sys.path.insert(0, {str(BENCHMARKS)!r})
sys.argv = ["suite.py", "--threads", "1", "--datasets", "jargon", "--out", {str(tmp_path / "rows.json")!r}]
import numba, suite
seen = {{}}
def grid(datasets, runs, one):
    seen["numba"] = numba.get_num_threads()
    try:
        import torch
        seen["torch"] = torch.get_num_threads()
    except ModuleNotFoundError:
        seen["torch"] = None
    return []
suite.run_grid = grid
suite.main()
print(json.dumps(seen))
"""
    env = {"PATH": "", "NUMBA_NUM_THREADS": "4", "OMP_NUM_THREADS": "4"}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    seen = json.loads(out.splitlines()[-1])
    assert seen["numba"] == 1 and seen["torch"] in (1, None)
