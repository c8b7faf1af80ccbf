"""Token budgets (docs/GLOSSARY.md, slot): the 10 per-tier budgets in simple mode (one shared total, split as Smart
Memory's defaults are) or advanced mode (each its own); auto-tune from observed demand (× 1.15 headroom, snapped
to 50 tokens); adaptive budgets from a turn classifier (dialogue, action, transition, intimate) with per-tier
multipliers."""

from __future__ import annotations

import re

from apps.injection.services.settings import DEFAULT_BUDGETS, MAX_BUDGET, TIERS, InjectionSettings

HEADROOM = 1.15
SNAP = 50
DEMAND_WEIGHT = 0.3  # of the newest observation in the running demand of a tier
# The short-term summary is exempt from auto-tune: it corrects itself (compaction keeps it in step with the chat).
TUNED_TIERS = tuple(tier for tier in TIERS if tier != "short")

TURN_TYPES = ("dialogue", "action", "transition", "intimate")
MULTIPLIERS: dict[str, dict[str, float]] = {
    "dialogue": {"relationships": 1.3, "epistemic": 1.3, "long": 1.1, "state_ledger": 0.8, "scenes": 0.8},
    "action": {
        "state_ledger": 1.5,
        "session": 1.2,
        "relationships": 0.7,
        "profiles": 0.8,
        "canon": 0.8,
        "epistemic": 0.8,
    },
    "transition": {"scenes": 1.4, "short": 1.2, "arcs": 1.3, "state_ledger": 1.1, "epistemic": 0.7},
    "intimate": {"relationships": 1.5, "profiles": 1.2, "long": 1.1, "state_ledger": 0.6, "arcs": 0.6, "scenes": 0.8},
}
_CUES = {
    "action": re.compile(
        r"\b(attack\w*|fight\w*|strike[sd]?|stab\w*|slash\w*|shoot\w*|shot|punch\w*|kick\w*|dodge[sd]?|block\w*|"
        r"run[s]?|ran|chase[sd]?|grab[s]?|grabbed|draw[s]? (?:a|the|my|his|her) \w+|sword|blade|arrow|climb\w*|"
        r"jump\w*|leap\w*|sprint\w*|flee[sd]?|fled|duck[s]?|swing[s]?|swung|charge[sd]?|tackle[sd]?|escape[sd]?)\b",
        re.I,
    ),
    "transition": re.compile(
        r"\b(later|next (?:morning|day|evening|night|week)|the following|meanwhile|arriv\w+|travel\w*|journey\w*|"
        r"set out|head(?:s|ed)? (?:to|for)|leave[s]?|left for|return(?:s|ed)? to|hours pass|days pass|time skip|"
        r"after a while|by nightfall|at dawn)\b",
        re.I,
    ),
    "intimate": re.compile(
        r"\b(kiss\w*|embrace\w*|hug\w*|caress\w*|cuddl\w*|hold(?:s|ing)? (?:her|his|their|my) hand|blush\w*|"
        r"tender\w*|lov(?:e|es|ed|ing)|darling|heartbeat|lips|whisper\w* softly|lean\w* in|nuzzl\w*)\b",
        re.I,
    ),
}
_SPEECH = re.compile(r"[\"“”«»]|\?|\b(say|says|said|ask\w*|tell\w*|told|repl\w*|answer\w*)\b", re.I)


def classify_turn(text: str) -> tuple[str, dict[str, int]]:
    """The kind of turn the pending message makes: the cue family with most hits; dialogue when none, or when
    speech outweighs it."""
    scores = {kind: len(pattern.findall(text or "")) for kind, pattern in _CUES.items()}
    scores["dialogue"] = len(_SPEECH.findall(text or ""))
    best = max(("action", "transition", "intimate"), key=lambda kind: scores[kind])
    if scores[best] == 0 or scores["dialogue"] > 2 * scores[best]:
        return "dialogue", scores
    return best, scores


def snap(tokens: float) -> int:
    """To the nearest 50 tokens (halves up), at least 50."""
    return max(SNAP, int(tokens / SNAP + 0.5) * SNAP)


def demand_update(previous: dict[str, float], observed: dict[str, int]) -> dict[str, float]:
    """The running demand of each tier: what it would take to inject everything it has (its full tokens)."""
    result = dict(previous)
    for tier, full in observed.items():
        old = previous.get(tier)
        result[tier] = float(full) if old is None else (1 - DEMAND_WEIGHT) * old + DEMAND_WEIGHT * full
    return result


def budgets_for(settings: InjectionSettings, *, turn: str, demand: dict[str, float]) -> dict[str, int]:
    if settings.budget_mode == "simple":
        weights = dict(DEFAULT_BUDGETS)
        if settings.auto_tune and demand:
            weights |= {tier: max(demand.get(tier, 0.0) * HEADROOM, SNAP) for tier in TUNED_TIERS if tier in demand}
        total = sum(weights.values()) or 1
        budgets = {tier: settings.total_budget * weights[tier] / total for tier in TIERS}
    else:
        budgets = {tier: float(settings.budgets[tier]) for tier in TIERS}
        if settings.auto_tune:
            budgets |= {tier: demand[tier] * HEADROOM for tier in TUNED_TIERS if tier in demand}
    if settings.adaptive:
        budgets = {tier: value * MULTIPLIERS[turn].get(tier, 1.0) for tier, value in budgets.items()}
    tuned = settings.auto_tune or settings.adaptive or settings.budget_mode == "simple"
    return {
        tier: min(MAX_BUDGET, snap(value) if tuned and value > 0 else int(value)) for tier, value in budgets.items()
    }
