"""The JSON encoder of the model's request body (apps/common/jsonsafe.py, orjson) on the CPUs people have.

orjson is machine code that picks SIMD paths for its string escaping when the CPU offers them. This machine may
offer AVX-512 and so hide an instruction an older CPU lacks: here the test's own Python runs `json_bytes` under
qemu's user-mode emulator with CPU models without AVX-512 (and without AVX at all: the x86-64 baseline), and the
bytes must be the ones this machine writes.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from apps.common.jsonsafe import json_bytes

ROOT = Path(__file__).resolve().parents[2]
# The x86-64 baseline (no SSE4, no AVX), Intel's Haswell (AVX2, 2013) and AMD's Zen 2: none has AVX-512.
CPUS = ["qemu64", "Haswell", "EPYC-Rome"]

# A long history as a front end sends it: escapes, accents, emoji and long strings (the SIMD paths), and the
# values orjson refuses, which the standard library then encodes (an integer past 64 bits, a lone surrogate).
BODY = """
def body():
    history = [
        {"role": "user" if i % 2 else "assistant",
          "content": f"Mira sagt: «Grüße» — line {i}\\n\\t\\"quoted\\" \\\\ {'é' * (i % 7)} 🌙 " * 20}
        for i in range(2000)
    ]
    return {"model": "m", "messages": history, "temperature": 0.7, "stream": True, "max_tokens": 512}

def refused():
    return [{"seed": 2**70}, {"content": "half a pair: \\ud83c"}]
"""

CHILD = f"""
import hashlib, json, sys
sys.path.insert(0, {str(ROOT)!r})
from apps.common.jsonsafe import json_bytes
{BODY}
for value in [body(), *refused()]:
    encoded = json_bytes(value)
    assert json.loads(encoded) == value
    print(hashlib.sha256(encoded).hexdigest())
"""


def _here() -> list[str]:
    namespace: dict = {}
    exec(BODY, namespace)  # noqa: S102 — the same values the child encodes, from the same text
    return [hashlib.sha256(json_bytes(value)).hexdigest() for value in [namespace["body"](), *namespace["refused"]()]]


@pytest.mark.parametrize("cpu", CPUS)
def test_the_model_request_encoder_writes_the_same_bytes_on_a_cpu_without_avx512(cpu):
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the emulated CPU models are x86-64 ones")
    if shutil.which("qemu-x86_64") is None:
        pytest.fail("qemu-x86_64 is missing: install Debian's qemu-user (.ci/run does) so this CPU cannot hide it")
    run = subprocess.run(
        ["qemu-x86_64", "-cpu", cpu, sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, f"under -cpu {cpu}: exit {run.returncode}\n{run.stderr[-2000:]}"
    assert run.stdout.split() == _here()
