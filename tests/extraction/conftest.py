"""Extraction tests: the scripted model (tests/llm_server.py, real HTTP) answers each tier's prompt by its task
line with a small story's worth of output; the scripted embedder (tests/memories/conftest.py) gives vectors."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.extraction.models import ChatPipeline, PipelineJob, Scene
from apps.extraction.services.pipeline import pipeline_wake
from apps.extraction.services.runner import chat_run
from apps.extraction.services.tiers.scenes import store_recap
from apps.memories.services.indexing import chat_index_messages
from apps.memories.services.schema import chat_schema_ensure
from tests.chats.factories import CharacterFactory
from tests.memories.conftest import embedder, scripted  # noqa: F401 — fixtures shared with the store's tests

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


@pytest.fixture
def character(user):
    return CharacterFactory(user=user, name="Mira", description="A harbour clerk with a sharp eye.")


@pytest.fixture
def model(user, llm_server, scripted):  # noqa: F811 — the imported fixture, requested
    """The user's default connection (hosted, profile B) to the scripted model, answering the story script."""
    from apps.llm.services import connection_create

    connection = connection_create(
        user=user, name="scripted", base_url=llm_server.url, model="scripted-model", profile="B", api_key="sk-x"
    )
    script(llm_server)
    connection.server = llm_server
    return connection


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


@pytest.fixture
def story(user, character):
    chat = chat_create(user=user, title="Harbour", character_ids=[character.pk], user_name="Rowan")
    chat_schema_ensure(chat=chat)
    return chat


def process(chat: Chat) -> dict:
    """What a write does in the background: index the chat (which notes changed messages), wake the pipeline,
    run it in place."""
    chat_index_messages(chat_id=chat.pk)
    pipeline_wake(chat_id=chat.pk)
    return chat_run(chat_id=chat.pk)


@pytest.fixture
def other_story(db):
    other = get_user_model().objects.create_user(username="carol", password="x")
    return chat_create(user=other, title="Not yours")


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


@pytest.fixture
def scene(model, story):
    """A closed scene of the story with two recap versions, the second current (and stored as its memory)."""
    add_turns(story, 14)
    scene = Scene.objects.create(
        user=story.user,
        chat=story,
        start_index=0,
        end_index=12,
        cue="time: “The next morning”",
        recap_versions=versions(FIRST, SECOND),
        current_version=1,
    )
    store_recap(chat=story, scene=scene, recap=SECOND, call=None, previous=None)
    scene.refresh_from_db()
    return scene
