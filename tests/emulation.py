"""CPU models qemu's user-mode emulator runs a binary on, for the tests that prove machine code (the embedded
PostgreSQL's vector library, orjson) on the CPUs people have rather than on this machine's, which may have every
instruction (AVX-512 included) and so hide one an older CPU lacks."""

from __future__ import annotations

import platform
import shutil

import pytest

MACHINE = platform.machine().lower().replace("arm64", "aarch64").replace("amd64", "x86_64")
# x86-64 without AVX-512: Haswell (AVX2, 2013) is the oldest CPU the package is built for; EPYC-Rome is AMD's Zen 2.
# arm64: the Neoverse N1 (ARMv8.2: Graviton 2, Ampere Altra; the Raspberry Pi 5's Cortex-A76 is the same generation).
EMULATED = {
    "x86_64": ("qemu-x86_64", ["Haswell", "EPYC-Rome"]),
    "aarch64": ("qemu-aarch64", ["neoverse-n1"]),
}
# Older than the package supports (the x86-64 baseline; ARMv8.0's Cortex-A72 of the Raspberry Pi 4, whose HNSW build
# dies): the start-up check must answer with a paragraph, not a crash loop.
TOO_OLD = {"x86_64": "qemu64", "aarch64": "cortex-a72"}


def emulator() -> tuple[str, list[str]]:
    """This machine's emulator and its CPU models without AVX-512 (a skip where none are listed; a failure when the
    emulator is missing, so that this machine's CPU cannot hide what it would show)."""
    if MACHINE not in EMULATED:
        pytest.skip(f"no emulated CPU models listed for {MACHINE}")
    program, models = EMULATED[MACHINE]
    if shutil.which(program) is None:
        pytest.fail(
            f"{program} is missing: install Debian's qemu-user (.ci/run does) so this machine's CPU cannot hide it"
        )
    return program, models
