"""Shared pieces of the benchmark scripts (run from bench/, so `import harness` works)."""

from __future__ import annotations

import time


class StepTimer:
    """Time spent inside wrapped functions (and inside iterating wrapped generators)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

        return timed

    def wrap_iter(self, fn):
        def timed(*args, **kwargs):
            it = iter(fn(*args, **kwargs))
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    self.seconds += time.perf_counter() - t0
                    return
                self.seconds += time.perf_counter() - t0
                yield item

        return timed
