"""What a call to a model leaves: the chunks of its answer gathered in a Record, and the Call saved from it (the
same for a blocking call and a stream), with the server's token counts or, when it sent none, counted here. The
error a person reads (LlmError) is here too: its `call` is the record."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.llm.models import Call, Connection
from apps.llm.thinking import split_message
from apps.llm.tokens import tokenizer_for

RECORD_LIMIT = 20000


class LlmError(Exception):
    def __init__(self, message: str, *, call: Call | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.call = call


@dataclass
class Chunk:
    content: str = ""
    reasoning: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False
    length: bool = False  # the model said it stopped at its reply length (finish_reason or done_reason "length")


@dataclass
class Record:
    """What the Call will say. The text is kept in pieces, joined when read: a reply grown by `+=` on an attribute
    is copied whole at each piece (CPython extends a string in place only in a local variable), which made a long
    reply's stream cost the event loop time growing with the square of its length."""

    pieces: list[str] = field(default_factory=list)
    reasoning_pieces: list[str] = field(default_factory=list)
    shown: bool = False  # set by a stream's reader once it has yielded text: no retry after that
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""
    reached: bool = True  # False: nothing answered at the model's address, at any attempt (no token was spent)

    @property
    def raw(self) -> str:
        return "".join(self.pieces)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_pieces)

    def take(self, chunk: Chunk) -> None:
        if chunk.content:
            self.pieces.append(chunk.content)
        if chunk.reasoning:
            self.reasoning_pieces.append(chunk.reasoning)
        if chunk.prompt_tokens is not None:
            self.prompt_tokens = chunk.prompt_tokens
        if chunk.completion_tokens is not None:
            self.completion_tokens = chunk.completion_tokens

    def answer(self) -> tuple[str, str]:
        """(text, reasoning): think blocks moved from the text to the reasoning."""
        return split_message({"content": self.raw, "reasoning_content": self.reasoning})


def call_save(
    *,
    connection: Connection,
    user_id: int,
    purpose: str,
    template: str = "",
    messages: list[dict],
    record: Record,
    status: str,
    ms: int,
) -> Call:
    """The Call of one request (its attempts), with the server's token counts, or counted here when it sent none."""
    text, reasoning = record.answer()
    call = Call(
        user_id=user_id,
        connection_id=connection.pk,
        purpose=purpose,
        template=template,
        model=connection.model,
        status=status,
        error=record.error,
        attempts=record.attempts,
        latency_ms=ms,
        response=text[:RECORD_LIMIT],
        reasoning=reasoning[:RECORD_LIMIT],
    )
    if not record.reached:  # a wrong address spends nothing: not counted against the day's limit either
        call.save()
        return call
    call.tokens_estimated = record.prompt_tokens is None or record.completion_tokens is None
    tokenizer = tokenizer_for(connection) if call.tokens_estimated else None
    call.prompt_tokens = (
        record.prompt_tokens if record.prompt_tokens is not None else tokenizer.count_messages(messages)
    )
    call.completion_tokens = (
        record.completion_tokens
        if record.completion_tokens is not None
        else tokenizer.count(record.raw + record.reasoning)
    )
    call.save()
    return call
