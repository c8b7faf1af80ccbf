import io
import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.jsonl"))


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def json_lines(data: bytes) -> list:
    """The JSON value of every non-blank line."""
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def stream(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)
