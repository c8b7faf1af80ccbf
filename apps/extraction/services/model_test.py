"""The extraction model test (as in Smart Memory, docs/GLOSSARY.md): three fixed scenarios (a 30-message investigation,
a village healer scene, a dungeon heist) run through every tier with the pipeline's own prompts and parsers against a
chosen connection. It writes nothing but its own record: the raw answers, what parsed and what did not, and hints on
the quality (format drift, expected facts missed, a contradiction not caught, thinking that leaked)."""

from __future__ import annotations

import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.common.exceptions import ApplicationError
from apps.extraction.models import ModelTest
from apps.extraction.services import queue
from apps.extraction.services.parsing.arcs import ArcLine, parse_arcs
from apps.extraction.services.parsing.epistemics import parse_epistemics
from apps.extraction.services.parsing.lines import Parsed
from apps.extraction.services.parsing.memories import MemoryLine, parse_memories
from apps.extraction.services.parsing.profiles import ProfileSection, parse_profiles
from apps.extraction.services.parsing.prose import ContinuityVerdict, parse_continuity, parse_prose
from apps.extraction.services.parsing.state import StateLine, parse_state
from apps.extraction.services.transcript import Line, render
from apps.llm.client import LlmError, complete_prompt
from apps.llm.models import Connection
from apps.llm.prompts import prompt_get
from apps.memories.services.lifecycle.scope import LONG_TERM_KINDS, SESSION_KINDS

log = logging.getLogger(__name__)
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
ORDER = ("investigation", "healer", "heist")
CAPS = {"A": 2, "B": 4}


@cache
def scenario(name: str) -> dict:
    return json.loads((SCENARIOS / f"{name}.json").read_text(encoding="utf-8"))


def scenario_lines(data: dict) -> list[Line]:
    return [
        Line(i, m["name"], bool(m.get("is_user")), bool(m.get("is_system")), m["mes"])
        for i, m in enumerate(data["messages"])
    ]


@transaction.atomic
def model_test_start(*, user: AbstractUser, connection: Connection) -> ModelTest:
    if connection.user_id != user.pk:
        raise ApplicationError("Unknown connection.", {"field": "connection"})
    test = ModelTest.objects.create(
        user=user,
        connection=connection,
        connection_name=connection.name,
        model=connection.model,
        profile=connection.effective_profile,
    )
    transaction.on_commit(lambda: queue.enqueue_model_test(test.pk))
    return test


def model_test_run(*, test_id: int) -> ModelTest | None:
    claimed = ModelTest.objects.filter(pk=test_id, state=ModelTest.State.QUEUED).update(
        state=ModelTest.State.RUNNING, progress="starting"
    )
    test = ModelTest.objects.select_related("connection").filter(pk=test_id).first()
    if not claimed or test is None:
        return test
    if test.connection is None:
        ModelTest.objects.filter(pk=test_id).update(
            state=ModelTest.State.FAILED, error="The connection was removed.", finished_at=timezone.now()
        )
        return ModelTest.objects.get(pk=test_id)
    results: list[dict] = []
    for name in ORDER:
        data = scenario(name)
        trial = Trial(test, data)
        results.append({"scenario": name, "title": data["title"], "tiers": trial.run()})
        ModelTest.objects.filter(pk=test_id).update(results=results)
    ModelTest.objects.filter(pk=test_id).update(
        state=ModelTest.State.DONE, progress="", results=results, finished_at=timezone.now()
    )
    return ModelTest.objects.get(pk=test_id)


class Trial:
    """One scenario through every tier, in the pipeline's order; later tiers read what earlier ones parsed."""

    def __init__(self, test: ModelTest, data: dict) -> None:
        self.test, self.data = test, data
        self.connection = test.connection
        self.cap = CAPS.get(test.profile, 4)
        self.lines = scenario_lines(data)
        self.expect = data.get("expect", {})
        self.names = ", ".join([*data["characters"], f"{data['user_name']} (the user's character)"])
        self.parsed: dict[str, Parsed] = {}
        self.results: list[dict] = []

    def run(self) -> list[dict]:
        messages = render(self.lines)
        span = {"first": "#0", "last": f"#{self.lines[-1].index}"}
        self._compaction(messages, span)
        self._batch_extraction(messages, span)
        self._scene_layer(messages, span)
        self._derived_layers(messages)
        return self.results

    def _compaction(self, messages: str, span: dict[str, str]) -> None:
        """T1: the rolling summary, from none, over the whole scenario."""
        self.tier("compaction", "compaction", parse_prose, summary="(none yet)", messages=messages, words=150, **span)

    def _batch_extraction(self, messages: str, span: dict[str, str]) -> None:
        """T3: session and long-term memories, arcs and the state ledger, each starting from nothing."""
        self.tier(
            "session",
            "session",
            lambda t: parse_memories(t, SESSION_KINDS),
            characters=self.names,
            context="(the story begins here)",
            messages=messages,
            cap=self.cap,
            **span,
        )
        self.tier(
            "longterm",
            "longterm",
            lambda t: parse_memories(t, LONG_TERM_KINDS, relationships=True),
            characters=self.names,
            known="(nothing yet)",
            context="(the story begins here)",
            messages=messages,
            cap=self.cap,
            **span,
        )
        self.tier(
            "arcs",
            "arcs",
            parse_arcs,
            open=self.data.get("open_arcs_text", "(none)"),
            messages=messages,
            cap=self.cap,
            **span,
        )
        self.tier("ledger", "state_ledger", parse_state, ledger="(empty)", messages=messages, **span)

    def _scene_layer(self, messages: str, span: dict[str, str]) -> None:
        """T2: the scene recap, then the epistemic pass, which reads that recap."""
        recap = self.tier("scene_recap", "scene_recap", parse_prose, characters=self.names, messages=messages, **span)
        self.tier(
            "epistemic",
            "epistemic",
            parse_epistemics,
            characters=self.names,
            known="(nothing yet)",
            recap=recap or "(none)",
            messages=messages,
            cap=self.cap * 4,
            **span,
        )

    def _derived_layers(self, messages: str) -> None:
        """T4: profiles and canon from what the batch tiers parsed, then the continuity check of the last message,
        with the six before it as its context."""
        before, last = self.lines[:-1], self.lines[-1]
        self.tier(
            "profiles",
            "profiles",
            parse_profiles,
            characters=self.names,
            memories=self.listed("longterm"),
            session=self.listed("session"),
            ledger=self.listed("ledger"),
            relationships="(none)",
            messages=messages,
        )
        self.tier(
            "canon",
            "canon",
            parse_prose,
            character=self.data["characters"][0],
            arcs=self.listed("arcs"),
            memories=self.listed("longterm"),
            previous="(none yet)",
        )
        self.tier(
            "continuity",
            "continuity",
            parse_continuity,
            card=self.data.get("card", ""),
            memories=self.listed("longterm"),
            session=self.listed("session"),
            ledger=self.listed("ledger"),
            context=render(before[-6:]),
            index=f"#{last.index}",
            reply=last.render(),
        )

    def listed(self, tier: str) -> str:
        parsed = self.parsed.get(tier)
        items = parsed.items if parsed else []
        lines = [f"- {getattr(item, 'text', None) or _describe(item)}" for item in items]
        return "\n".join(lines) or "(nothing)"

    def tier(self, tier: str, prompt: str, parse, **values: Any) -> str:
        """Ask, parse, judge; answers the prose of a prose tier (for the tiers after it)."""
        ModelTest.objects.filter(pk=self.test.pk).update(progress=f"{self.data['name']}: {tier}")
        entry: dict[str, Any] = {"tier": tier, "prompt": prompt_get("extraction", prompt).ref}
        try:
            completion = complete_prompt(
                self.connection,
                prompt_get("extraction", prompt),
                purpose=f"model_test:{tier}",
                max_tokens=1500,
                **values,
            )
        except LlmError as exc:
            entry |= {"error": exc.message, "hints": [f"error: the call failed: {exc.message}"]}
            self.results.append(entry)
            return ""
        raw = completion.text
        result = parse(raw)
        entry |= {
            "raw": raw[:8000],
            "reasoning_chars": len(completion.reasoning),
            "latency_ms": completion.call.latency_ms,
            "tokens": completion.call.completion_tokens,
            "llm_call": completion.call.pk,
        }
        entry["hints"] = hints(tier, raw, result, self.expect.get(tier), reasoning=completion.reasoning, cap=self.cap)
        if isinstance(result, Parsed):
            self.parsed[tier] = result
            entry["parsed"] = [_describe(item) for item in result.items][:40]
            entry["unparsed"] = result.unparsed[:20]
        elif isinstance(result, ContinuityVerdict):
            entry["parsed"] = ["OK"] if result.ok else [f"contradiction: {finding}" for finding in result.findings]
            if result.repair:
                entry["parsed"].append(f"repair: {result.repair}")
        else:
            entry["parsed"] = [result] if result else []
        self.results.append(entry)
        return result if isinstance(result, str) else ""


def _describe(item: Any) -> str:
    if isinstance(item, MemoryLine):
        entities = f" ({', '.join(e['name'] for e in item.entities)})" if item.entities else ""
        return f"[{item.kind}:{item.importance}:{item.time_scope or '-'}] {item.text}{entities}"
    if isinstance(item, ArcLine):
        tag = "arc:persistent" if item.persistent else "arc" if item.action == "open" else f"resolved:{item.number}"
        return f"[{tag}] {item.text}"
    if isinstance(item, StateLine):
        return f"[state:{item.entity}:{item.type}] " + " | ".join(f"{k}={v}" for k, v in item.fields.items())
    if isinstance(item, ProfileSection):
        return f"<{item.section}> {item.text[:300]}"
    return getattr(item, "text", str(item))


def _mentions(items_text: str, keyword: str) -> bool:
    return keyword.lower() in items_text.lower()


def hints(tier: str, raw: str, result: Any, expect: Any, *, reasoning: str, cap: int) -> list[str]:
    """Short judgements a person can act on: 'good:', 'warning:' or 'error:' first."""
    found: list[str] = []
    if not raw.strip():
        return ["error: the answer was empty"]
    if "<think" in raw.lower() or "</think>" in raw.lower():
        found.append("warning: a think block leaked into the answer")
    if reasoning:
        found.append(f"info: {len(reasoning)} characters of thinking were stripped before parsing")
    if isinstance(result, Parsed):
        total = len(result.items) + len(result.unparsed)
        if result.empty and expect:
            found.append("warning: the model answered NONE where the scenario has material for this tier")
        elif not result.items and result.unparsed:
            found.append("error: no line followed the format (see the raw answer)")
        elif result.unparsed:
            found.append(f"warning: {len(result.unparsed)} of {total} lines did not follow the format")
        elif result.items:
            found.append(f"good: {len(result.items)} items, every line in the format")
        per_kind: dict[str, int] = {}
        for item in result.items:
            kind = getattr(item, "kind", "")
            if kind:
                per_kind[kind] = per_kind.get(kind, 0) + 1
        over = {kind: n for kind, n in per_kind.items() if n > cap}
        if over:
            found.append(f"info: more items than the profile keeps per pass ({cap}) for {', '.join(over)}")
        text = "\n".join(_describe(item) for item in result.items)
    elif isinstance(result, ContinuityVerdict):
        text = " ".join(result.findings)
        planted = bool(expect and expect.get("contradiction"))
        if planted and result.ok:
            found.append("warning: the reply contradicts the story, and the model answered OK")
        elif planted:
            found.append("good: the planted contradiction was caught")
        elif result.ok:
            found.append("good: consistent, as the reply is")
        else:
            found.append("warning: a contradiction reported where the scenario has none (false alarm)")
    elif result is None:
        return [*found, "error: the answer was neither OK nor [contradiction] lines"]
    else:
        text = str(result)
        words = len(text.split())
        if tier == "scene_recap" and not 15 <= words <= 120:
            found.append(f"warning: a scene recap should be 2–3 sentences; this is {words} words")
    keywords = expect.get("mentions", []) if isinstance(expect, dict) else expect or []
    missed = [k for k in keywords if not _mentions(text, k)]
    if keywords and not missed:
        found.append(f"good: mentions {', '.join(keywords)}")
    elif missed:
        found.append(f"warning: expected mention of {', '.join(missed)}")
    return found
