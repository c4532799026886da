"""How many threads numba's parallel kernels and torch's operators use: set once, by an entry point.

Both start a pool of one thread a core. A script's ``--threads`` that only reaches the linear
solver's workers leaves those pools at every core, so two runs side by side on the same cores each
spin every core's threads against the other's (docs/decisions.md, "A run's thread count reaches
torch and numba"). The setting is process-wide, so only entry points call it; the CLI sets the same
counts through the environment before either library is imported.
"""

from __future__ import annotations


def limit_threads(threads: int) -> int:
    """Run numba's parallel kernels and torch's operators on at most ``threads`` threads.

    Args:
        threads: the count asked for (at least 1).

    Returns:
        The count numba took: ``threads``, or the size of its pool where that is smaller (it cannot
        grow after import). torch, where it is installed, takes ``threads`` as asked.
    """
    import numba

    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    taken = min(threads, numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    numba.set_num_threads(taken)  # the calling thread's count: the entry point's main thread
    try:
        import torch
    except ModuleNotFoundError:  # the core package alone
        return taken
    torch.set_num_threads(threads)
    return taken
