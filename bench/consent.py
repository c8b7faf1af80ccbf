"""What the estimate before a history's extraction says, against what the run then spends.

    .venv/bin/python bench/consent.py [--messages 3000]

A chat of --messages messages (prose of varied length, bench/context.py's generator) is written at once, as an
import is. The planner must not call the model: the chat waits for the person (`awaiting_consent`) with an estimate.
Then Run, and the whole backlog is extracted in this process against the scripted model of the tests
(tests/llm_server.py, bench/extraction.py's varied answers: new memories every batch). Prints the estimate, what was
spent (calls, prompt tokens counted as the estimate counts them: 3.6 characters a token, and as the server counted
them), the ratios, the seconds, and the model calls made before Run (must be 0). Test settings, in the database
`lorekeeper_bench_extraction`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import extraction as extraction_bench  # noqa: E402 — the database, the user, the chat, the varied answers
from context import message_text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    args = parser.parse_args()
    extraction_bench._setup_django()
    with extraction_bench._elsewhere():  # this process runs the runner itself: no wake-ups of its own
        run(args)


def run(args) -> None:
    """The chat, its estimate, the run, the comparison."""
    from apps.chats.models import Chat, Message
    from apps.extraction.selectors import pipeline_status
    from apps.extraction.services.consent import pipeline_run
    from apps.extraction.services.jobs import pipeline_wake
    from apps.extraction.services.runner import chat_run
    from apps.llm.models import Call
    from apps.llm.selectors import FOREGROUND
    from apps.llm.services import connection_update
    from apps.memories.services.indexing import chat_index_messages
    from tests.llm_server import start_llm_server

    server = start_llm_server()
    extraction_bench.vary(server)
    try:
        user = extraction_bench._fresh_user("bench_consent", server)
        connection = user.llm_connections.get()
        connection_update(connection=connection, data={"is_default": True})  # ticked for background work
        chat = extraction_bench._chat(user, "A long import")
        Message.objects.bulk_create(
            Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2),
                    mes=message_text(random.Random(i), i))
            for i in range(args.messages)
        )  # fmt: skip
        Chat.objects.filter(pk=chat.pk).update(message_count=args.messages)
        chat.refresh_from_db()
        chat_index_messages(chat_id=chat.pk)
        pipeline_wake(chat_id=chat.pk)
        chat_run(chat_id=chat.pk)
        before = len(server.requests)
        status = pipeline_status(user=user, chat=chat)
        estimate = status.estimate
        print(
            f"A {args.messages:,}-message chat written at once: state {status.state}, model calls before Run: {before}"
        )
        if estimate is None:
            raise SystemExit("no estimate: the chat did not wait for the person")
        if before:
            raise SystemExit(f"{before} model calls before Run: the chat did not wait for the person")
        print(f"  estimate: {estimate.calls:,} calls, {estimate.prompt_tokens:,} prompt tokens, "
              f"{estimate.reply_tokens:,} reply tokens")  # fmt: skip

        started = time.perf_counter()
        pipeline_run(chat=chat)
        while chat_run(chat_id=chat.pk).get("ran"):
            pass
        seconds = time.perf_counter() - started
        calls = Call.objects.filter(user=user).exclude(FOREGROUND)
        counted = sum(len(json.dumps(request["body"]["messages"])) / 3.6 for request in server.requests)
        words = sum(calls.values_list("prompt_tokens", flat=True))
        print(f"  spent:    {calls.count():,} calls, {counted:,.0f} prompt tokens (3.6 characters a token; the "
              f"server counted {words:,} words), in {seconds:.0f} s")  # fmt: skip
        print(f"  estimate / spent: calls {estimate.calls / max(calls.count(), 1):.2f}, prompt tokens "
              f"{estimate.prompt_tokens / max(counted, 1):.2f}")  # fmt: skip
        per_message = estimate.prompt_tokens / args.messages
        print(f"  per message: estimate {estimate.calls / args.messages:.2f} calls and {per_message:,.0f} prompt "
              f"tokens; spent {calls.count() / args.messages:.2f} and {counted / args.messages:,.0f}")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()
