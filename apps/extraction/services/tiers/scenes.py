"""T2 scene layer (docs/GLOSSARY.md; recap versions as auto-recap keeps them): scene breaks found by heuristics over
the messages batch extraction has covered (optionally confirmed by the model), a 2–3 sentence recap of each closed
scene linked to the memories extracted from it, recap versions kept, and once per break the epistemic pass: who
knows, suspects, wrongly believes, does not know, or hides what."""

from __future__ import annotations

from collections import Counter, defaultdict

from apps.extraction.models import PipelineJob, Scene
from apps.extraction.services import transcript
from apps.extraction.services.jobs import job_queue
from apps.extraction.services.parsing.epistemics import parse_epistemics
from apps.extraction.services.parsing.prose import parse_prose, parse_yes_no
from apps.extraction.services.scene_breaks import find_break
from apps.extraction.services.tiers.base import (
    JobContext,
    Work,
    active,
    decide,
    listing,
    now_iso,
    submit_by_owner,
)
from apps.extraction.services.tiers.memories import usable
from apps.llm.client import UnreadableAnswer
from apps.memories.models import Decision, Kind, Memory, Status
from apps.memories.services.lifecycle.judge import Candidate
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS
from apps.memories.services.memories import memory_create, memory_supersede

T3_TIERS = ("session", "longterm", "arcs", "ledger")
HISTORY = 60
RECAP_TOKENS = 300
EPISTEMIC_TOKENS = 900


def t3_covered(ctx: JobContext) -> int:
    return min(ctx.through(tier) for tier in T3_TIERS)


def produce_scenes(ctx: JobContext) -> Work | None:
    if ctx.job.params.get("scene"):
        return produce_recap_again(ctx, scene_id=int(ctx.job.params["scene"]))
    covered, checked = t3_covered(ctx), ctx.through("scenes")
    last = Scene.objects.filter(chat=ctx.chat).order_by("-start_index").first()
    scene_start = last.end_index if last else 0
    if max(checked, scene_start) >= covered:
        return _caught_up(ctx, checked=checked, scene_start=scene_start)
    checked = max(checked, scene_start)
    read_start = max(scene_start, checked - HISTORY)
    lines = ctx.read(read_start, covered)
    found, declined = _confirmed_break(ctx, lines, checked=checked, scene_start=scene_start)
    if not found:

        def nothing() -> dict:
            ctx.set_through("scenes", covered)
            return {"range": [checked, covered - 1], "breaks": 0, "declined": declined}

        return Work(nothing)
    line, reason = found
    scene_lines = [item for item in lines if item.index < line.index]
    if read_start > scene_start:  # a long scene: its beginning was not read for the heuristics
        scene_lines = ctx.read(scene_start, line.index)
    return _close_scene(ctx, scene_lines, scene_start=scene_start, line=line, reason=reason, declined=declined)


def _caught_up(ctx: JobContext, *, checked: int, scene_start: int) -> Work | None:
    """Batch extraction has covered nothing past the checked mark and the last scene: nothing to do, unless that
    scene ends past the mark, which is then moved to its end."""
    if checked >= scene_start:
        return None

    def to_scene_end() -> dict:  # after a rebuild the last scene may end past what is covered: checked to it
        ctx.set_through("scenes", scene_start)
        return {"range": [checked, scene_start - 1], "breaks": 0}

    return Work(to_scene_end)


def _confirmed_break(
    ctx: JobContext, lines: list[transcript.Line], *, checked: int, scene_start: int
) -> tuple[tuple[transcript.Line, str] | None, list[dict]]:
    """The first break the heuristics find in the lines from `checked` on (and the model confirms, when the settings
    ask it to), with the candidates the model declined."""
    history = [line for line in lines if line.index < checked]
    pending = [line for line in lines if line.index >= checked]
    group = len(ctx.characters) > 1
    minimum = ctx.settings.min_scene_messages
    found = find_break(history, pending, scene_start=scene_start, min_length=minimum, group=group)
    declined: list[dict] = []
    while found and ctx.settings.scene_model_check:
        line, reason = found
        if _model_confirms(ctx, history + pending, line=line, reason=reason):
            break
        declined.append({"index": line.index, "cue": reason})
        seen = [item for item in history + pending if item.index <= line.index]
        later = [item for item in pending if item.index > line.index]
        found = find_break(seen, later, scene_start=scene_start, min_length=minimum, group=group)
    return found, declined


def _model_confirms(ctx: JobContext, lines: list[transcript.Line], *, line: transcript.Line, reason: str) -> bool:
    """Whether the model agrees that `line` opens a new scene, shown the six messages before it."""
    before = [item for item in lines if item.index < line.index][-6:]
    completion = ctx.ask(
        "scene_check",
        purpose="scene_check",
        max_tokens=5,
        before=transcript.render(before),
        candidate=line.render(),
        index=f"#{line.index}",
        cue=reason,
    )
    answer = parse_yes_no(completion.text)
    if answer is None:
        raise UnreadableAnswer(f"neither YES nor NO: {completion.text[:120]!r}")
    return answer


def _close_scene(
    ctx: JobContext,
    scene_lines: list[transcript.Line],
    *,
    scene_start: int,
    line: transcript.Line,
    reason: str,
    declined: list[dict],
) -> Work:
    """The scene from `scene_start` to the break at `line`: its recap asked for now, the scene, its recap memory and
    the epistemic job written by the Work."""
    recap, call = _recap(ctx, scene_lines, first=scene_start, last=line.index - 1)

    def write() -> dict:
        scene = Scene.objects.create(
            user_id=ctx.chat.user_id,
            chat=ctx.chat,
            start_index=scene_start,
            end_index=line.index,
            cue=reason,
            model_confirmed=True if ctx.settings.scene_model_check else None,
            recap_versions=[_version(1, recap, call, ctx, scene_start, line.index)],
            recap_hash=transcript.fingerprint(chat_id=ctx.chat.pk, start=scene_start, end=line.index),
        )
        store_recap(chat=ctx.chat, scene=scene, recap=recap, call=call, previous=None)
        job_queue(chat=ctx.chat, tier=PipelineJob.Tier.EPISTEMIC, params={"scene": scene.pk})
        ctx.set_through("scenes", line.index)
        return {"scene": scene.pk, "range": [scene_start, line.index - 1], "cue": reason, "declined": declined}

    return Work(write, scopes=[ctx.chat_scope])


def _recap(ctx: JobContext, lines, *, first: int, last: int) -> tuple[str, int]:
    fitted = transcript.fit_newest(lines, ctx.budget(response=RECAP_TOKENS, share=0.9))
    completion = ctx.ask(
        "scene_recap",
        purpose="scene_recap",
        max_tokens=RECAP_TOKENS,
        characters=ctx.speaker_names(),
        messages=transcript.render(fitted),
        first=f"#{first}",
        last=f"#{last}",
    )
    recap = parse_prose(completion.text, limit=2000)
    if not recap:
        raise UnreadableAnswer("the model answered no recap")
    return recap, completion.call.pk


def _version(number: int, content: str, call: int, ctx: JobContext, start: int, end: int) -> dict:
    return {
        "version": number,
        "content": content,
        "created_at": now_iso(),
        "llm_call": call,
        "source_hash": transcript.fingerprint(chat_id=ctx.chat.pk, start=start, end=end),
    }


def scene_sources(chat, start: int, end: int) -> list[int]:
    """The memories extracted from the scene's messages (its recap links to them, as Smart Memory's
    source_memory_ids do)."""
    return list(
        Memory.objects.filter(
            user_id=chat.user_id,
            source_chat=chat,
            origin="extraction",
            status=Status.ACTIVE,
            kind__in=[*SESSION_KINDS, *LONG_TERM_KINDS, Kind.ARC],
            source_message_indices__overlap=list(range(start, end)),
        )
        .order_by("id")
        .values_list("id", flat=True)[:500]
    )


def store_recap(*, chat, scene: Scene, recap: str, call: int | None, previous: Memory | None) -> Memory:
    """The scene's current recap as a `scene_recap` memory (superseding the previous one), linked to the memories
    extracted from the scene."""
    sources = scene_sources(chat, scene.start_index, scene.end_index)
    memory = memory_create(
        user=chat.user,
        kind=Kind.SCENE_RECAP,
        content=recap,
        chat=chat,
        source_message_indices=list(range(scene.start_index, scene.end_index)),
        data={
            "scene": scene.pk,
            "start": scene.start_index,
            "end": scene.end_index,
            "version": scene.current_version + 1,
            "source_memory_ids": sources,
        },
        valid_from=scene.start_index,
        origin="extraction",
    )
    if previous is not None:
        memory_supersede(old=previous, new=memory)
    decide(
        memory=memory,
        related=previous,
        outcome=Decision.Outcome.SUPERSEDED if previous else Decision.Outcome.PASSED,
        kind=Kind.SCENE_RECAP,
        content=recap,
        reason=f"recap of the scene #{scene.start_index}–#{scene.end_index - 1} (break: {scene.cue or 'by hand'})",
        call=call,
    )
    Scene.objects.filter(pk=scene.pk).update(recap_memory=memory, source_memory_ids=sources)
    return memory


def produce_recap_again(ctx: JobContext, *, scene_id: int) -> Work | None:
    """A new version of a scene's recap (asked for by a person); earlier versions are kept."""
    scene = Scene.objects.filter(pk=scene_id, chat=ctx.chat).first()
    if scene is None:
        return None
    lines = ctx.read(scene.start_index, scene.end_index)
    recap, call = _recap(ctx, lines, first=scene.start_index, last=scene.end_index - 1)

    def write() -> dict:
        current = Scene.objects.select_for_update().get(pk=scene.pk)
        number = len(current.recap_versions) + 1
        current.recap_versions = [
            *current.recap_versions,
            _version(number, recap, call, ctx, scene.start_index, scene.end_index),
        ]
        current.current_version = number - 1
        current.recap_hash = transcript.fingerprint(chat_id=ctx.chat.pk, start=scene.start_index, end=scene.end_index)
        current.save(update_fields=["recap_versions", "current_version", "recap_hash"])
        previous = Memory.objects.filter(pk=current.recap_memory_id, status=Status.ACTIVE).first()
        store_recap(chat=ctx.chat, scene=current, recap=recap, call=call, previous=previous)
        return {"scene": scene.pk, "version": number}

    return Work(write, scopes=[ctx.chat_scope])


def produce_epistemic(ctx: JobContext) -> Work | None:
    scene = Scene.objects.filter(pk=ctx.job.params.get("scene"), chat=ctx.chat).first()
    if scene is None:
        return None
    lines = ctx.read(scene.start_index, scene.end_index)
    lines = transcript.fit_newest(lines, ctx.budget(response=EPISTEMIC_TOKENS, share=0.7))
    names = list(dict.fromkeys([*(c.name for c in ctx.characters), *(line.name for line in lines if line.name)]))
    known = listing(active(ctx, Kind.EPISTEMIC)[:200], budget=ctx.budget(response=EPISTEMIC_TOKENS, share=0.15))
    completion = ctx.ask(
        "epistemic",
        purpose="epistemic",
        max_tokens=EPISTEMIC_TOKENS,
        characters=", ".join(names) or ctx.speaker_names(),
        known=known,
        recap=scene.recap or "(none)",
        messages=transcript.render(lines),
        first=f"#{scene.start_index}",
        last=f"#{scene.end_index - 1}",
        cap=ctx.cap * 4,
    )
    parsed = usable(parse_epistemics(completion.text), completion.text)
    items = parsed.items[: ctx.cap * 4]
    sources = list(range(scene.start_index, scene.end_index))
    by_name = {c.name.lower(): c for c in ctx.characters}
    groups: dict[int | None, list[Candidate]] = defaultdict(list)
    for item in items:
        holder = by_name.get(item.holder.lower())  # persistent per character; others stay with the chat
        entities = [{"name": item.holder, "type": "character"}]
        if item.target:
            entities.append({"name": item.target, "type": "character"})
        groups[holder.pk if holder else None].append(
            Candidate(
                kind=Kind.EPISTEMIC,
                content=item.text,
                importance=2,
                time_scope="permanent" if holder else "session",
                source_message_indices=sources,
                entities=entities,
                data={
                    "holder": item.holder,
                    "stance": item.stance,
                    "target": item.target,
                    "fact": item.fact,
                    "scene": scene.pk,
                },
                origin="extraction",
            )
        )

    def write() -> dict:
        outcomes: Counter = Counter()
        for results in submit_by_owner(ctx, groups).values():
            outcomes.update(r.outcome for r in results)
        Scene.objects.filter(pk=scene.pk).update(epistemic_done=True)
        return {"scene": scene.pk, "outcomes": dict(outcomes), "unparsed": parsed.unparsed[:20]}

    return Work(write, scopes=[ctx.chat_scope, *(ctx.character_scope(c) for c in ctx.characters)])
