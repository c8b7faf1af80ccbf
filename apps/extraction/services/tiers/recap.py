"""Away recap (as in Smart Memory, docs/GLOSSARY.md): a “Previously on…” written when a person comes back to a chat
after `recap_after_hours`, from the rolling summary, the latest scenes, the open arcs and the last messages."""

from __future__ import annotations

from django.utils import timezone

from apps.extraction.models import Recap, Scene
from apps.extraction.services import transcript
from apps.extraction.services.parsing.prose import parse_prose
from apps.extraction.services.tiers.arcs import open_arcs
from apps.extraction.services.tiers.base import JobContext, Work, summary_memory
from apps.extraction.services.tiers.compaction import summary_tail
from apps.llm.client import UnreadableAnswer

RECAP_TOKENS = 500
LAST_MESSAGES = 20


def away_label(hours: float) -> str:
    if hours < 48:
        return f"{hours:.0f} hours"
    return f"{hours / 24:.0f} days"


def produce_recap(ctx: JobContext) -> Work | None:
    recap = Recap.objects.filter(pk=ctx.job.params.get("recap"), chat=ctx.chat, state=Recap.State.PENDING).first()
    if recap is None:
        return None
    end = ctx.chat.message_count
    budget = ctx.budget(response=RECAP_TOKENS)
    lines = transcript.fit_newest(ctx.read(end - LAST_MESSAGES, end), int(budget * 0.4)) if end else []
    summary = summary_memory(ctx.chat)
    scenes = Scene.objects.filter(chat=ctx.chat).order_by("-start_index")[:3]
    hours = (timezone.now() - recap.away_since).total_seconds() / 3600
    completion = ctx.ask(
        "recap",
        purpose="recap",
        max_tokens=RECAP_TOKENS,
        hours=away_label(hours),
        summary=summary_tail(summary.content, int(budget * 0.3)) if summary else "(no summary yet)",
        scenes="\n".join(f"- {scene.recap}" for scene in reversed(scenes) if scene.recap) or "(none)",
        arcs="\n".join(f"- {arc.content}" for arc in open_arcs(ctx)) or "(none)",
        messages=transcript.render(lines) or "(no messages yet)",
    )
    text = parse_prose(completion.text, limit=4000)
    if not text:
        raise UnreadableAnswer("the model answered no recap")

    def write() -> dict:
        Recap.objects.filter(pk=recap.pk, state=Recap.State.PENDING).update(
            state=Recap.State.READY, text=text, ready_at=timezone.now(), llm_call_id=completion.call.pk, error=""
        )
        return {"recap": recap.pk, "words": len(text.split())}

    return Work(write)
