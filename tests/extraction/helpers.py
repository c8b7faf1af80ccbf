"""Extraction test helpers: the scripted model's story (each tier's prompt answered by its task line), turns added
to a chat, and the background work a write does, run in place."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.extraction.models import ChatPipeline, PipelineJob
from apps.extraction.services.jobs import pipeline_wake
from apps.extraction.services.runner import chat_run
from apps.memories.services.indexing import chat_index_messages

TASKS = {
    "summary": "Task: rolling summary.",
    "scene_check": "Task: scene break check.",
    "scene_recap": "Task: scene recap.",
    "epistemic": "Task: knowledge map.",
    "session": "Task: session memory extraction.",
    "longterm": "Task: long-term memory extraction.",
    "arcs": "Task: story arcs.",
    "ledger": "Task: state ledger.",
    "profiles": "Task: profiles.",
    "canon": "Task: canon.",
    "continuity": "Task: continuity check.",
    "recap": "Task: away recap.",
    "supersession": "Answer UPDATE, DUPLICATE, INDEPENDENT or CONTRADICTS.",
}

STORY = {
    "summary": "Mira and Rowan found the harbour seal forged and followed the trail to Corvin's warehouse.",
    "scene_check": "YES",
    "scene_recap": "Mira and Rowan examined the harbour ledger and found Corvin's forged seal. They left for the "
    "warehouse at dusk.",
    "epistemic": "[knows] Mira | the harbour seal on the ledger is forged\n"
    "[hiding] Corvin from Mira | he pressed the forged seal himself",
    "session": "[revelation:3:session:entity=Corvin/character] The harbour seal on the ledger is a forgery.\n"
    "[detail:2:scene:entity=brass key/object] Rowan pocketed a brass key from the ledger desk.",
    "longterm": "[fact:3:permanent:entity=Mira/character] Mira was born in the drowned village of Hollin.\n"
    "[event:2:permanent:entity=Corvin/character] Corvin burned the first harbour ledger years ago.\n"
    "[rel] Mira -> Rowan: wary(medium), curious(high)",
    "arcs": "[arc] Find out who forged the harbour seal.",
    "ledger": "[state:Rowan:character] location=harbour office | carried_items=brass key\n"
    "[state:brass key:object] owner=Rowan | condition=tarnished",
    "profiles": "<character_state>Mira is tense and sharp.</character_state>\n"
    "<world_state>The harbour is under the guild's thumb.</world_state>\n"
    "<relationship_matrix>Mira -> Rowan: wary but curious [confidence: 0.7]</relationship_matrix>",
    "canon": "Mira was born in Hollin, which the sea took. Years later she exposed the forged harbour seal.",
    "continuity": "OK",
    "recap": "Previously on the harbour mystery: Mira and Rowan found the forged seal.",
    "supersession": "INDEPENDENT",
}


def script(server, answers: dict[str, str] | None = None) -> None:
    """Answer each tier's prompt by its task line (`answers` overrides STORY by key)."""
    for key, text in {**STORY, **(answers or {})}.items():
        server.on(TASKS[key], text)


def add_turns(chat: Chat, count: int, *, user_name: str = "Rowan", speaker: str = "Mira", text=None) -> None:
    """`count` more messages, alternating user and character (the character speaks first)."""
    start = chat.message_count
    Message.objects.bulk_create(
        Message(
            chat=chat,
            index=start + i,
            name=user_name if (start + i) % 2 else speaker,
            is_user=bool((start + i) % 2),
            mes=text(start + i) if text else f"Line {start + i} of the harbour story, about the ledger and the seal.",
        )
        for i in range(count)
    )
    # A write gives the chat a new integrity (what the recall index reconciles against).
    Chat.objects.filter(pk=chat.pk).update(message_count=start + count, integrity=uuid.uuid4())
    chat.refresh_from_db()


def process(chat: Chat) -> dict:
    """What a write does in the background: index the chat (which notes changed messages), wake the pipeline,
    run it in place."""
    chat_index_messages(chat_id=chat.pk)
    pipeline_wake(chat_id=chat.pk)
    return chat_run(chat_id=chat.pk)


FIRST = "Mira and Rowan pored over the harbour ledger until the lamps were lit."
SECOND = "Mira and Rowan examined the harbour ledger and found Corvin's forged seal."


def failed_job(chat, tier: str = "session") -> PipelineJob:
    return PipelineJob.objects.create(
        user_id=chat.user_id, chat=chat, tier=tier, state="failed", attempts=3, error="server error 500"
    )


def away(chat, hours: float = 10) -> None:
    """The person last opened the chat, and the chat last changed, `hours` ago."""
    long_ago = timezone.now() - timedelta(hours=hours)
    ChatPipeline.objects.update_or_create(chat=chat, defaults={"user_id": chat.user_id, "last_active_at": long_ago})
    Chat.objects.filter(pk=chat.pk).update(updated_at=long_ago)


def versions(*texts: str) -> list[dict]:
    return [
        {"version": n, "content": text, "created_at": f"2026-01-0{n}T10:00:00+00:00", "llm_call": None}
        for n, text in enumerate(texts, 1)
    ]


LONG = " The rain hammered the harbour roofs while they argued over the ledger, the seal and the missing key."


def turns(first: int, count: int, *, text=None) -> list[dict]:
    return [
        {
            "name": "Rowan" if i % 2 else "Mira",
            "is_user": bool(i % 2),
            "mes": text(i) if text else f"Turn {i} at the harbour office.{LONG}",
            "extra": {},
        }
        for i in range(first, first + count)
    ]


def append(api, chat, messages) -> None:
    integrity = Chat.objects.get(pk=chat.pk).integrity
    response = api.post(
        f"/api/v1/chats/{chat.pk}/append", {"messages": messages}, format="json", HTTP_IF_MATCH=f'"{integrity}"'
    )
    assert response.status_code == 200, response.content
