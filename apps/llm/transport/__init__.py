"""The wire to a person's model, one for blocking and streaming calls: apps/llm/client.py runs it to the end for a
whole answer, apps/llm/streaming.py yields from it as a reply arrives.

It holds, once for both APIs (OpenAI-compatible server-sent events or JSON, Ollama's NDJSON or JSON):
- the request (`request_for`): the body, and the key only in the Authorization header (`wire.py`);
- the error mapping: what a person is told of a refusal, a rate limit, a server error, a time-out, a connection that
  fails or breaks off (`wire.py`), an answer that cannot be read (`answers.py`); LlmError's message is what a person
  is shown;
- the retry rule (`wire.py`): retries with backoff on 429, 5xx and connection failures while nothing of the answer
  was read (once text was shown, a retry would say it twice), and on a time-out unless a person is watching a
  stream (they have waited the whole time-out already);
- reading the answer into chunks, streamed or sent whole, whichever the server chose (`answers.py`);
- the Call record of every request (`records.py`).

Every request goes through the guarded aiohttp session of apps/llm/outbound.py: the address policy of
apps/common/netguard.py at every connection, no redirect followed, no proxy from the environment.
"""

from apps.llm.transport.records import RECORD_LIMIT, Chunk, LlmError, Record, call_save
from apps.llm.transport.wire import Request, answer_chunks, answer_whole, request_for

__all__ = [
    "RECORD_LIMIT",
    "Chunk",
    "LlmError",
    "Record",
    "Request",
    "answer_chunks",
    "answer_whole",
    "call_save",
    "request_for",
]
