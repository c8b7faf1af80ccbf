"""Profile answers: the `<character_state>`, `<world_state>` and `<relationship_matrix>` sections."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.extraction.services.parsing.lines import Parsed, answer_lines
from apps.extraction.services.parsing.memories import relation_split

PROFILE_SECTIONS = ("character_state", "world_state", "relationship_matrix")
_CONFIDENCE = re.compile(r"\[\s*confidence\s*:\s*(?P<c>[01](?:\.\d+)?)\s*\]", re.IGNORECASE)


@dataclass
class ProfileSection:
    section: str
    text: str
    relationships: list[dict] = field(default_factory=list)


def parse_profiles(text: str) -> Parsed:
    parsed = Parsed()
    for section in PROFILE_SECTIONS:
        match = re.search(rf"<{section}>(?P<body>.*?)(?:</{section}>|(?=<[a-z_]+>)|\Z)", text, re.S | re.I)
        body = "\n".join(answer_lines(match["body"])) if match else ""
        if not body:
            parsed.unparsed.append(f"no <{section}> section")
            continue
        item = ProfileSection(section, body[:8000])
        if section == "relationship_matrix":
            for line in body.splitlines():
                found = _CONFIDENCE.search(line)
                pair = relation_split(_CONFIDENCE.sub("", line))
                if pair:
                    item.relationships.append(
                        {
                            "source": pair[0][:100],
                            "target": pair[1][:100],
                            "text": pair[2][:500],
                            "confidence": min(1.0, float(found["c"])) if found else None,
                        }
                    )
        parsed.items.append(item)
    return parsed
