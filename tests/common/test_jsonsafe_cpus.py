"""The JSON encoder of the model's request body (apps/common/jsonsafe.py, orjson) on the CPUs people have.

orjson is machine code that picks SIMD paths for its string escaping when the CPU offers them. This machine may
offer AVX-512 and so hide an instruction an older CPU lacks: here the test's own Python runs `json_bytes` under
qemu's user-mode emulator (tests/emulation.py) with CPU models without AVX-512, and with the architecture's baseline
(on x86-64, no AVX at all), and the bytes must be the ones this machine writes.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from apps.common.jsonsafe import json_bytes
from tests.emulation import EMULATED, MACHINE, TOO_OLD, emulator

ROOT = Path(__file__).resolve().parents[2]
CPUS = [cpu for cpu in [TOO_OLD.get(MACHINE), *EMULATED.get(MACHINE, ("", []))[1]] if cpu]

# The child encodes this module's values, as this process does.
CHILD = f"""
import hashlib, json, sys
sys.path.insert(0, {str(ROOT)!r})
from apps.common.jsonsafe import json_bytes
from tests.common.test_jsonsafe_cpus import encoded
for value in encoded():
    written = json_bytes(value)
    assert json.loads(written) == value
    print(hashlib.sha256(written).hexdigest())
"""


def encoded() -> list:
    """A long history as a front end sends it: escapes, accents, emoji and long strings (the SIMD paths); and the
    values orjson refuses, which the standard library then encodes (an integer past 64 bits, a lone surrogate)."""
    history = [
        {
            "role": "user" if i % 2 else "assistant",
            "content": f'Mira sagt: «Grüße» — line {i}\n\t"quoted" \\ {"é" * (i % 7)} 🌙 ' * 20,
        }
        for i in range(2000)
    ]
    body = {"model": "m", "messages": history, "temperature": 0.7, "stream": True, "max_tokens": 512}
    return [body, {"seed": 2**70}, {"content": "half a pair: \ud83c"}]


@pytest.mark.parametrize("cpu", CPUS or ["none listed"])
def test_the_model_request_encoder_writes_the_same_bytes_on_a_cpu_without_avx512(cpu):
    program, _ = emulator()
    run = subprocess.run(
        [program, "-cpu", cpu, sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"under -cpu {cpu}: exit {run.returncode}\n{run.stderr[-2000:]}"
    assert run.stdout.split() == [hashlib.sha256(json_bytes(value)).hexdigest() for value in encoded()]
