"""T4 derived layers (docs/GLOSSARY.md): profiles (character, world, relationship matrix) rebuilt on a cadence, canon
prose from resolved arcs and important long-term memories, and the continuity check of the latest reply with its
optional one-shot repair note."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from apps.chats.models import Character, Message
from apps.extraction.models import ChatPipeline, ContinuityCheck
from apps.extraction.services import transcript
from apps.extraction.services.parsing.profiles import parse_profiles
from apps.extraction.services.parsing.prose import parse_continuity, parse_prose
from apps.extraction.services.tiers.base import JobContext, Work, active, decide, listing
from apps.extraction.services.tiers.ledger import ledger, render_ledger
from apps.llm.client import UnreadableAnswer
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS
from apps.memories.services.memories import memory_create, memory_supersede

PROFILE_TOKENS = 1200
CANON_TOKENS = 1500
CONTINUITY_TOKENS = 400
RECENT = 30
CANON_IMPORTANCE = 2  # Smart Memory's canon reads "confidence ≥ 2": importance on our 1–3 scale

Canon = tuple[Character | None, str, Memory | None, int]  # owner, text, the canon it replaces, the call


def produce_profiles(ctx: JobContext) -> Work | None:
    end = ctx.chat.message_count
    if end <= 0:
        return None
    budget = ctx.budget(response=PROFILE_TOKENS)
    recent = transcript.fit_newest(ctx.read(end - RECENT, end), int(budget * 0.35))
    pairs = active(ctx, Kind.RELATIONSHIP).filter(data__history=True)
    completion = ctx.ask(
        "profiles",
        purpose="profiles",
        max_tokens=PROFILE_TOKENS,
        characters=ctx.speaker_names(),
        memories=listing(
            active(ctx, *LONG_TERM_KINDS).exclude(data__has_key="history")[:200], budget=int(budget * 0.25)
        ),
        session=listing(active(ctx, *SESSION_KINDS).order_by("-created_at", "-id")[:100], budget=int(budget * 0.15)),
        ledger=render_ledger(ledger(ctx.chat.pk)),
        relationships=listing(pairs[:60], budget=int(budget * 0.1)),
        messages=transcript.render(recent),
    )
    parsed = parse_profiles(completion.text)
    if not parsed.items:
        raise UnreadableAnswer(f"no profile sections in the answer: {completion.text[:200]!r}")

    def write() -> dict:
        current = {
            m.data_field("section", str): m
            for m in Memory.objects.filter(chat=ctx.chat, kind=Kind.PROFILE, status=Status.ACTIVE).defer("embedding")
        }
        for section in parsed.items:
            memory = memory_create(
                user=ctx.chat.user,
                kind=Kind.PROFILE,
                content=section.text,
                chat=ctx.chat,
                importance=3,
                data={"section": section.section, "built_through": end, "relationships": section.relationships},
                origin="extraction",
            )
            previous = current.get(section.section)
            if previous is not None:
                memory_supersede(old=previous, new=memory)
            decide(
                memory=memory,
                related=previous,
                outcome=Decision.Outcome.SUPERSEDED if previous else Decision.Outcome.PASSED,
                kind=Kind.PROFILE,
                content=section.text,
                reason=f"{section.section.replace('_', ' ')} rebuilt through message #{end - 1}",
                call=completion.call.pk,
            )
        ChatPipeline.objects.filter(pk=ctx.pipeline.pk).update(profiles_built_at=timezone.now())
        ctx.set_through("profiles", end)
        return {"sections": [s.section for s in parsed.items], "missing": parsed.unparsed, "through": end - 1}

    return Work(write, scopes=[ctx.chat_scope])


def produce_canon(ctx: JobContext) -> Work | None:
    """Canon per character of the chat (persistent: it is theirs across chats); a chat without characters keeps
    its own."""
    owners = ctx.characters or [None]
    budget = ctx.budget(response=CANON_TOKENS)
    texts: list[Canon] = []
    for owner in owners:
        canon = _ask_canon(ctx, owner, budget=budget)
        if canon is not None:
            texts.append(canon)

    def write() -> dict:
        written = [_store_canon(ctx, *canon).pk for canon in texts]
        ChatPipeline.objects.filter(pk=ctx.pipeline.pk).update(canon_due=False)
        return {"canon": written, "characters": len(texts)}

    return Work(write, scopes=[ctx.character_scope(c) for c in owners])


def _ask_canon(ctx: JobContext, owner: Character | None, *, budget: int) -> Canon | None:
    """The owner's canon rewritten from their resolved arcs and important long-term memories, with the canon it
    replaces and the call; None when there is nothing to write it from."""
    scope = ctx.character_scope(owner)
    # The character's persistent arcs, and (for a character) the chat arcs of every chat they are in.
    reach = scope.q() | Q(user_id=ctx.chat.user_id, chat__characters=owner) if owner else scope.q()
    arcs = (
        Memory.objects.filter(reach, status=Status.ACTIVE, kind=Kind.ARC, data__status="resolved")
        .defer("embedding")
        .distinct()
        .order_by("created_at", "id")
    )
    facts = (
        Memory.objects.filter(scope.q(), status=Status.ACTIVE, kind__in=LONG_TERM_KINDS)
        .filter(importance__gte=CANON_IMPORTANCE)
        .exclude(data__has_key="history")
        .defer("embedding")
        .order_by("-importance", "created_at")
    )
    previous = Memory.objects.filter(scope.q(), kind=Kind.CANON, status=Status.ACTIVE).defer("embedding").first()
    if not arcs.exists() and not facts.exists():
        return None
    completion = ctx.ask(
        "canon",
        purpose="canon",
        max_tokens=CANON_TOKENS,
        character=owner.name if owner else ctx.chat.title,
        arcs=listing(arcs[:100], budget=int(budget * 0.35)),
        memories=listing(facts[:300], budget=int(budget * 0.35)),
        previous=previous.content if previous else "(none yet)",
    )
    text = parse_prose(completion.text)
    if not text:
        raise UnreadableAnswer("the model answered no canon")
    return owner, text, previous, completion.call.pk


def _store_canon(ctx: JobContext, owner: Character | None, text: str, previous: Memory | None, call: int) -> Memory:
    """A `canon` memory superseding the one the model was shown, if that is still active."""
    memory = memory_create(
        user=ctx.chat.user,
        kind=Kind.CANON,
        content=text,
        character=owner,
        chat=None if owner else ctx.chat,
        importance=3,
        source_chat=ctx.chat,
        data={"written_through": ctx.chat.message_count},
        origin="extraction",
    )
    current = Memory.objects.filter(pk=previous.pk, status=Status.ACTIVE).first() if previous else None
    if current is not None:
        memory_supersede(old=current, new=memory)
    decide(
        memory=memory,
        related=current,
        outcome=Decision.Outcome.SUPERSEDED if current else Decision.Outcome.PASSED,
        kind=Kind.CANON,
        content=text,
        reason="canon rewritten from the resolved arcs and the important memories",
        call=call,
    )
    return memory


def latest_reply(chat_id: int, count: int) -> int | None:
    return (
        Message.objects.filter(chat_id=chat_id, index__lt=count, is_user=False, is_system=False)
        .exclude(mes="")
        .order_by("-index")
        .values_list("index", flat=True)
        .first()
    )


def produce_continuity(ctx: JobContext) -> Work | None:
    index = ctx.job.params.get("index")
    if index is None:
        index = latest_reply(ctx.chat.pk, ctx.chat.message_count)
    if index is None or index >= ctx.chat.message_count:
        return None
    lines = ctx.read(index - 6, index + 1)
    reply = next((line for line in lines if line.index == index), None)
    if reply is None or reply.is_user:
        return None
    speaker = next((c for c in ctx.characters if c.name.lower() == reply.name.lower()), None)
    speaker = speaker or (ctx.characters[0] if ctx.characters else None)
    budget = ctx.budget(response=CONTINUITY_TOKENS)
    card = "\n".join(
        f"{label}: {value}"
        for label, value in (
            ("Name", speaker.name if speaker else reply.name),
            ("Description", speaker.description if speaker else ""),
            ("Personality", speaker.personality if speaker else ""),
            ("Scenario", speaker.scenario if speaker else ""),
        )
        if value
    )
    completion = ctx.ask(
        "continuity",
        purpose="continuity",
        max_tokens=CONTINUITY_TOKENS,
        card=card[: budget * 2],
        memories=listing(active(ctx, *LONG_TERM_KINDS)[:200], budget=int(budget * 0.25)),
        session=listing(active(ctx, *SESSION_KINDS).order_by("-created_at", "-id")[:60], budget=int(budget * 0.15)),
        ledger=render_ledger(ledger(ctx.chat.pk)),
        context=transcript.render([line for line in lines if line.index < index]) or "(none)",
        index=f"#{index}",
        reply=reply.render(),
    )
    verdict = parse_continuity(completion.text)
    if verdict is None:
        raise UnreadableAnswer(f"neither OK nor [contradiction] lines: {completion.text[:200]!r}")

    def write() -> dict:
        check = ContinuityCheck.objects.create(
            user_id=ctx.chat.user_id,
            chat=ctx.chat,
            message_index=index,
            fingerprint=ctx.fingerprint[:50],
            status=ContinuityCheck.Status.OK if verdict.ok else ContinuityCheck.Status.CONTRADICTION,
            findings=verdict.findings,
            repair_note=verdict.repair,
            llm_call_id=completion.call.pk,
        )
        if index + 1 > ctx.through("continuity"):
            ctx.set_through("continuity", index + 1)
        return {"check": check.pk, "index": index, "ok": verdict.ok, "findings": len(verdict.findings)}

    return Work(write)
