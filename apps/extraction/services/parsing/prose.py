"""Yes/no answers, continuity verdicts (`OK`, or `[contradiction] ...` and `[repair] ...` lines) and prose answers
(summary, recap, canon)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.extraction.services.parsing.lines import FENCE, TAGGED, answer_lines, clip


def parse_yes_no(text: str) -> bool | None:
    words = re.findall(r"[a-z]+", text.lower())
    for word in words[:3]:
        if word in ("yes", "y", "true"):
            return True
        if word in ("no", "n", "false"):
            return False
    return None


@dataclass
class ContinuityVerdict:
    ok: bool
    findings: list[str]
    repair: str


def parse_continuity(text: str) -> ContinuityVerdict | None:
    lines = answer_lines(text)
    if not lines:
        return None
    if re.match(r"^(ok|consistent|no (contradictions?|issues?))\W*$", lines[0], re.I) and len(lines) == 1:
        return ContinuityVerdict(True, [], "")
    findings, repair = [], []
    for line in lines:
        match = TAGGED.match(line)
        tag = match["tag"].strip().lower() if match else ""
        if tag in ("contradiction", "issue", "conflict") and match["text"].strip():
            findings.append(clip(match["text"]))
        elif tag in ("repair", "fix", "note") and match["text"].strip():
            repair.append(clip(match["text"]))
    if not findings:
        return ContinuityVerdict(True, [], "") if re.match(r"^ok\b", lines[0], re.I) else None
    return ContinuityVerdict(False, findings, " ".join(repair)[:1500])


_PREFIX = re.compile(r"^(?:summary|recap|scene recap|canon|continuation)\s*:\s*", re.I)


def parse_prose(text: str, *, limit: int = 20000) -> str:
    """A prose answer (summary, recap, canon): fences and a leading label removed, paragraphs kept."""
    kept = [line for line in text.strip().splitlines() if not FENCE.match(line)]
    body = _PREFIX.sub("", "\n".join(kept).strip()).strip()
    return body[:limit]
