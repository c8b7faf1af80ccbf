"""Shared by the benchmarks: functions switched off for a measurement (what production runs in other tasks)."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def switched_off(*targets: tuple[object, str]):
    """Each `(module, name)` does nothing while inside; put back after."""
    originals = [getattr(module, name) for module, name in targets]
    for module, name in targets:
        setattr(module, name, lambda *args, **kwargs: None)
    try:
        yield
    finally:
        for (module, name), original in zip(targets, originals, strict=True):
            setattr(module, name, original)
