"""The bounds of a streamed reply (settings.LOREKEEPER_GENERATION): its length in tokens, the message limit in
characters, its total time and the time between tokens. A bound stops the reply; what arrived is kept, and the
generation says which bound stopped it (`stop_reason`) in words a person reads (`error`).

The reply is held once, here, as it arrives (`Arrived`). Its tokens are counted piece by piece (a piece is what
one read from the model brought) with the connection's tokenizer, which a piece's edges make err high; when that
running count reaches the bound, the text before the piece is counted once exactly, and the piece is cut at the
tokens left. So a reply costs one count of each piece and a few whole counts near its end, and stops at its length
give or take a token where the cut piece meets the text before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.conf import settings

from apps.generation.models import Generation
from apps.llm.tokens import Tokenizer

MAX_MESSAGE = 100_000
Reason = Generation.Reason


def generation_settings() -> dict:
    return settings.LOREKEEPER_GENERATION


@dataclass(frozen=True)
class Bounds:
    tokens: int  # the reply stops when its exact count reaches this
    chars: int  # the reply is cut at this many characters (the message limit, less what a continuation adds to)
    seconds: float  # the whole stream
    idle: float  # between two reads, once the reply has begun
    reply_tokens: int  # the connection's reply length, as a person set it

    @classmethod
    def of(cls, generation: Generation, reply_tokens: int) -> Bounds:
        conf = generation_settings()
        before = int(generation.extends.get("chars", 0)) + 1 if generation.mode == Generation.Mode.CONTINUE else 0
        return cls(
            tokens=max(1, math.ceil(reply_tokens * conf["reply_tokens_margin"])),
            chars=max(0, MAX_MESSAGE - before),
            seconds=conf["max_seconds"],
            idle=conf["idle_seconds"],
            reply_tokens=reply_tokens,
        )

    def says(self, reason: str) -> str:
        """What a person is told of a reply this bound stopped."""
        if reason == Reason.LENGTH:
            return f"stopped: the reply reached its length of {self.reply_tokens:,} tokens"
        if reason == Reason.CHARACTERS:
            return f"stopped: the reply reached {MAX_MESSAGE:,} characters, the most a message holds"
        if reason == Reason.TIME:
            return f"stopped: the reply took longer than {self.seconds:g} s"
        if reason == Reason.IDLE:
            return f"stopped: the model sent nothing for {self.idle:g} s"
        raise ValueError(reason)


@dataclass
class Arrived:
    """The reply so far, held once: its pieces (joined into one when read), their length and token count."""

    bounds: Bounds
    tokenizer: Tokenizer
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    tokens: int = 0  # a running count that errs high, made exact near the bound
    reason: str = ""  # the bound that stopped it

    def add(self, delta: str) -> str:
        """Take a piece of the reply and answer what of it is kept: all of it, or up to the bound it reached (then
        `reason` says which)."""
        room = self.bounds.chars - self.chars
        if len(delta) >= room:
            delta, self.reason = delta[:room], Reason.CHARACTERS
        tokens = self.tokenizer.count(delta)
        if self.tokens + tokens >= self.bounds.tokens:
            self.tokens = self.tokenizer.count(self.text())  # exact, before this piece
            need = self.bounds.tokens - self.tokens
            if tokens >= need:
                delta, tokens, self.reason = self._first(delta, need), need, Reason.LENGTH
        if delta:
            self.parts.append(delta)
            self.chars += len(delta)
            self.tokens += tokens
        return delta

    def _first(self, piece: str, tokens: int) -> str:
        """The longest start of `piece` of at most `tokens` tokens (a piece is one read: a search over it is cheap)."""
        low, high = 0, len(piece)
        while low < high:
            middle = (low + high + 1) // 2
            if self.tokenizer.count(piece[:middle]) <= tokens:
                low = middle
            else:
                high = middle - 1
        return piece[:low]

    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""
