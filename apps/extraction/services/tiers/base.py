"""What every tier is given (a JobContext) and what it gives back (Work): the messages it read, and a `write` that
stores its results. The runner calls `write` inside one transaction that it commits only if those messages are
still exactly as they were read; otherwise nothing of it is kept."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.chats.models import Character, Chat
from apps.chats.selectors import chat_person_name
from apps.extraction.models import ChatPipeline, ExtractionSettings, PipelineJob
from apps.extraction.services import transcript
from apps.llm.client import Completion, LlmError, complete_prompt
from apps.llm.models import Connection
from apps.llm.profiles import connection_context_size
from apps.llm.prompts import prompt_get
from apps.llm.tokens import count_tokens
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.classify import Candidate, Classified, memories_submit
from apps.memories.services.lifecycle.scope import ScopeKey

PROMPT_OVERHEAD = 900  # tokens of instructions and lists around the messages of a prompt


@dataclass
class Work:
    write: Callable[[], dict[str, Any]]
    scopes: list[ScopeKey] = field(default_factory=list)  # locked while writing (classification into them)


@dataclass
class JobContext:
    job: PipelineJob
    chat: Chat
    pipeline: ChatPipeline
    settings: ExtractionSettings
    connection: Connection
    characters: list[Character]
    read_from: int | None = None
    read_to: int | None = None
    fingerprint: str = ""
    calls: list[int] = field(default_factory=list)

    @property
    def profile(self) -> str:
        return self.connection.effective_profile

    @property
    def cap(self) -> int:
        """Items per kind and pass (Smart Memory's caps, docs/GLOSSARY.md: 2 on profile A, 4 on B)."""
        return settings.LOREKEEPER_LIFECYCLE["caps_per_pass"].get(self.profile, 4)

    @property
    def window(self) -> int:
        return connection_context_size(self.connection)

    def budget(self, *, response: int, share: float = 1.0) -> int:
        """Tokens left for messages in a prompt answered in at most `response` tokens (`share` of them)."""
        return max(256, int((self.window - response - PROMPT_OVERHEAD) * share))

    def through(self, tier: str) -> int:
        return int(self.pipeline.through.get(tier, 0))

    def read(self, start: int, end: int) -> list[transcript.Line]:
        """Messages [start, end), remembered as what this job's results depend on. The fingerprint is taken before
        the messages are read: an edit in between makes the job discard its results, never keep stale ones."""
        start = max(0, start)
        self.read_from = start if self.read_from is None else min(self.read_from, start)
        self.read_to = end if self.read_to is None else max(self.read_to, end)
        self.fingerprint = transcript.fingerprint(chat_id=self.chat.pk, start=self.read_from, end=self.read_to)
        return transcript.lines(chat_id=self.chat.pk, start=start, end=end)

    def still_current(self) -> bool:
        if self.read_from is None:
            return Chat.objects.filter(pk=self.chat.pk).exists()
        now = transcript.fingerprint(chat_id=self.chat.pk, start=self.read_from, end=self.read_to)
        return now == self.fingerprint and Chat.objects.filter(pk=self.chat.pk).exists()

    def ask(self, prompt: str, *, purpose: str, max_tokens: int, **values: Any) -> Completion:
        PipelineJob.objects.filter(pk=self.job.pk).update(progress=f"asking the model ({purpose})")
        try:
            completion = complete_prompt(
                self.connection,
                prompt_get("extraction", prompt),
                purpose=f"extraction:{purpose}",
                max_tokens=max_tokens,
                **values,
            )
        except LlmError as exc:
            if exc.call:
                self.calls.append(exc.call.pk)
            raise
        self.calls.append(completion.call.pk)
        return completion

    def set_through(self, tier: str, index: int) -> None:
        """Advance (or, for a rebuild, move back) a tier's coverage, in the write's transaction."""
        locked = ChatPipeline.objects.select_for_update().get(pk=self.pipeline.pk)
        locked.through = {**locked.through, tier: int(index)}
        locked.save(update_fields=["through", "updated_at"])
        self.pipeline.through = locked.through

    # --- scopes -------------------------------------------------------------------------------------------------

    @property
    def chat_scope(self) -> ScopeKey:
        return ScopeKey(self.chat.user_id, None, self.chat.pk)

    def character_scope(self, character: Character | None) -> ScopeKey:
        return ScopeKey(self.chat.user_id, character.pk, None) if character else self.chat_scope

    def owner_of(self, *texts: str) -> Character | None:
        """The chat character a persistent memory belongs to: the one it names (entity tags first), else the
        chat's first character; None in a chat without characters (the memory then stays with the chat)."""
        for text in texts:
            for character in self.characters:
                if character.name and re.search(rf"\b{re.escape(character.name)}\b", text or "", re.IGNORECASE):
                    return character
        return self.characters[0] if self.characters else None

    def speaker_names(self) -> str:
        names = [c.name for c in self.characters]
        person = chat_person_name(chat=self.chat)
        if person and person not in names:
            names.append(f"{person} (the user's character)")
        return ", ".join(names) or "(not named)"

    def persistent_scope_q(self) -> Q:
        """The chat's own memories and its characters' persistent ones (what the chat can see)."""
        return Q(user_id=self.chat.user_id) & (
            Q(chat_id=self.chat.pk) | Q(chat__isnull=True, character_id__in=[c.pk for c in self.characters])
        )


def submit_by_owner(ctx: JobContext, groups: dict[int | None, list[Candidate]]) -> dict[int | None, list[Classified]]:
    """Classify each group of candidates into its owner's scope: a chat character's persistent memories (by the
    character's id), or the chat's own (None). The model is asked about same-topic candidates (full retries: this
    is background work)."""
    owners = {c.pk: c for c in ctx.characters}
    results: dict[int | None, list[Classified]] = {}
    for owner_id, batch in groups.items():
        owner = owners.get(owner_id) if owner_id is not None else None
        results[owner_id] = memories_submit(
            user=ctx.chat.user,
            candidates=batch,
            character=owner,
            chat=None if owner else ctx.chat,
            source_chat=ctx.chat,
            connection=ctx.connection,
        )
    return results


def active(ctx: JobContext, *kinds: str) -> Any:
    return (
        Memory.objects.filter(ctx.persistent_scope_q(), status=Status.ACTIVE, kind__in=kinds)
        .defer("embedding")
        .order_by("-importance", "-created_at", "-id")
    )


def listing(memories, *, budget: int, empty: str = "(nothing yet)") -> str:
    """Memories as lines for a prompt, the most important first, within `budget` tokens."""
    lines, used = [], 0
    for memory in memories:
        line = f"- {memory.content}"
        cost = count_tokens(line) + 1
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines) or empty


def decide(
    *, memory: Memory | None, related: Memory | None, outcome: str, kind: str, content: str, reason: str, call: int
) -> Decision:
    """A lifecycle decision for a memory a tier wrote directly (state, relationship history, summaries…)."""
    return Decision.objects.create(
        user_id=(memory or related).user_id,
        memory=memory,
        related=related,
        outcome=outcome,
        kind=kind,
        content=content,
        method="extraction",
        reason=reason,
        llm_call_id=call,
    )


def summary_memory(chat: Chat) -> Memory | None:
    return (
        Memory.objects.filter(chat=chat, kind=Kind.SUMMARY, status=Status.ACTIVE, origin="extraction")
        .defer("embedding")
        .order_by("-id")
        .first()
    )


def now_iso() -> str:
    return timezone.now().isoformat()
