import io
import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.jsonl"))


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def json_lines(data: bytes) -> list:
    """The JSON value of every non-blank line. Lines end at "\n" only, as SillyTavern splits them: U+0085 and
    U+2028 are ordinary characters inside JSON strings (str.splitlines would cut there)."""
    return [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]


def stream(data: bytes) -> io.BytesIO:
    return io.BytesIO(data)
