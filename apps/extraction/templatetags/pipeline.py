"""A job's result in a few words, for the jobs table."""

from django import template

register = template.Library()

STATE_LABELS = {
    "running": "working",
    "queued": "waiting",
    "paused": "paused",
    "gathering": "waiting for more messages",
    "idle": "up to date",
    "off": "off",
    "no_model": "no model",
    "awaiting_consent": "waiting for you",
    "limit_reached": "paused: daily limit reached",
}


@register.filter
def duration(seconds) -> str:
    """4300 → "about 1 h 12 min"; None → "unknown until the model has answered background work"."""
    if seconds is None:
        return "unknown until this model has done some background work"
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


@register.filter
def pipeline_state(state: str) -> str:
    return STATE_LABELS.get(state, state)


@register.filter
def words(name: str) -> str:
    """character_state → Character state."""
    return str(name).replace("_", " ").capitalize()


@register.filter
def job_summary(job) -> str:
    result = job.result or {}
    if result.get("nothing_to_do"):
        return "nothing to do"
    parts = []
    if result.get("range"):
        first, last = result["range"]
        parts.append(f"#{first}–#{last}")
    for key in ("outcomes", "opened", "entities"):
        if result.get(key):
            parts.append(", ".join(f"{n} {outcome}" for outcome, n in sorted(result[key].items())))
    if result.get("resolved"):
        parts.append(f"{result['resolved']} resolved")
    if result.get("relationships"):
        parts.append(f"{result['relationships']} relationship reading(s)")
    if "breaks" in result and not result["breaks"]:
        parts.append("no scene break")
    if result.get("scene") and result.get("cue"):
        parts.append(f"scene break ({result['cue']})")
    elif result.get("scene") and result.get("version"):
        parts.append(f"recap version {result['version']}")
    if result.get("summary_end") is not None and job.tier == "compaction":
        parts.append(f"summary through #{result['summary_end'] - 1}")
    if "ok" in result:
        parts.append("consistent" if result["ok"] else f"{result.get('findings', 0)} contradiction(s)")
    if result.get("sections"):
        parts.append(", ".join(s.replace("_", " ") for s in result["sections"]))
    if result.get("canon"):
        parts.append(f"canon for {result.get('characters', 1)} character(s)")
    if result.get("rolled_back") is not None:
        parts.append(f"{result['rolled_back']} taken back, {result.get('restored', 0)} restored")
    if result.get("unparsed"):
        parts.append(f"{len(result['unparsed'])} line(s) not understood")
    return " · ".join(parts)


@register.filter
def state_fields(memory) -> list[tuple[str, object]]:
    """A state memory's fields as (name, value) pairs: not `data.fields.items` in a template, which reads a field
    named "items" before the method (a client may write any name there, as the ledgers of SillyTavern's extensions
    do)."""
    return list(memory.data_field("fields", dict, {}).items())
