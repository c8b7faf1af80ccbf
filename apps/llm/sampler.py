"""A connection's samplers: which a person may set, their ranges (checked here only: the form, the API and the
services all call `sampler_clean`), and how each API is asked for them (`sampler_options`).

A key the person left unset is absent, never a default: the model's own default then applies, which for a local
model is often what its author tuned.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import text_storable

if TYPE_CHECKING:
    from apps.llm.models import Connection

# key: (lowest, highest) of a number; an int key takes whole numbers only.
RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "top_k": (0, 1_000_000),
    "min_p": (0.0, 1.0),
    "frequency_penalty": (-2.0, 2.0),
    "presence_penalty": (-2.0, 2.0),
    "repetition_penalty": (0.0, 3.0),
    "seed": (-(2**63), 2**63 - 1),
}
INTEGERS = ("top_k", "seed")
STOP_MAX = 16
STOP_LENGTH = 100
REPLY_TOKENS_DEFAULT = 300
REPLY_TOKENS_MAX = 100_000
CONTEXT_WINDOW_MAX = 10_000_000  # the longest context a model offers (Llama 4 Scout's); past it, a typing slip
SAMPLER_KEYS = (*RANGES, "stop")

# The names OpenAI's own parameters have; the rest go in the request body beside them (vLLM, llama.cpp, LM Studio,
# OpenRouter and Ollama's /v1 read them there; OpenAI ignores what it does not know).
OPENAI_PARAMETERS = ("temperature", "top_p", "frequency_penalty", "presence_penalty", "stop", "seed")
OPENAI_EXTRA = ("top_k", "min_p", "repetition_penalty")
# Ollama's name for each key under `options` (its runner options: `repeat_penalty` is its repetition penalty).
OLLAMA_NAMES = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repeat_penalty",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "stop": "stop",
    "seed": "seed",
}


def _number(key: str, value: Any) -> int | float:
    low, high = RANGES[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApplicationError(f"{key} must be a number.", {"field": key})
    if key in INTEGERS:
        if isinstance(value, float) and not value.is_integer():
            raise ApplicationError(f"{key} must be a whole number.", {"field": key})
        value = int(value)
    elif isinstance(value, float) and not math.isfinite(value):  # a whole number of any size compares fine
        raise ApplicationError(f"{key} must be a finite number.", {"field": key})
    if not low <= value <= high:
        if key == "seed":
            raise ApplicationError("seed must fit in 64 bits.", {"field": key})
        raise ApplicationError(f"{key} is between {low:g} and {high:g}.", {"field": key})
    return value if key in INTEGERS else float(value)


def _stop(value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ApplicationError("stop is a list of strings.", {"field": "stop"})
    if not all(isinstance(item, str) for item in value):
        raise ApplicationError("stop is a list of strings.", {"field": "stop"})
    strings = [item for item in value if item]
    if len(strings) > STOP_MAX:
        raise ApplicationError(f"stop holds at most {STOP_MAX} strings.", {"field": "stop"})
    if any(len(item) > STOP_LENGTH for item in strings):
        raise ApplicationError(f"Each stop string is at most {STOP_LENGTH} characters.", {"field": "stop"})
    if not all(text_storable(item) for item in strings):  # nor could it be stored (PostgreSQL's text holds none)
        raise ApplicationError("A stop string holds no NUL character or lone surrogate.", {"field": "stop"})
    return strings


def sampler_clean(values: dict) -> dict:
    """The sampler settings in `values`, checked and in a canonical shape (floats as floats, whole numbers as ints,
    keys in SAMPLER_KEYS order). None, "" and an empty stop list mean unset and are left out. Raises
    ApplicationError naming the field (`extra["field"]` is the key) for an unknown key or a value out of range."""
    if not isinstance(values, dict):
        raise ApplicationError("The sampler settings are a JSON object.", {"field": "sampler"})
    unknown = sorted(str(key) for key in values if key not in SAMPLER_KEYS)
    if unknown:
        raise ApplicationError(
            f"Unknown sampler setting {unknown[0]!r}.", {"field": unknown[0], "allowed": list(SAMPLER_KEYS)}
        )
    cleaned: dict = {}
    for key in SAMPLER_KEYS:
        value = values.get(key)
        if value is None or value == "":
            continue
        value = _stop(value) if key == "stop" else _number(key, value)
        if value != []:
            cleaned[key] = value
    return cleaned


def sampler_request(api: str, *, max_tokens: int | None, sampler: dict) -> dict:
    """The request options for `api` ("openai" or "ollama"): for OpenAI's client the keyword arguments of
    `chat.completions.create` (`max_tokens`, its own samplers, the others under `extra_body`); for Ollama
    `{"options": {...}}` with `num_predict`. Only keys the person set, plus the reply length."""
    values = sampler_clean(sampler)
    if api == "ollama":
        options = {OLLAMA_NAMES[key]: value for key, value in values.items()}
        if max_tokens:
            options = {"num_predict": max_tokens, **options}
        return {"options": options}
    request: dict = {"max_tokens": max_tokens} if max_tokens else {}
    request |= {key: values[key] for key in OPENAI_PARAMETERS if key in values}
    extra = {key: values[key] for key in OPENAI_EXTRA if key in values}
    if extra:
        request["extra_body"] = extra
    return request


def sampler_options(connection: Connection) -> dict:
    """The connection's reply length and samplers as its API takes them (see `sampler_request`)."""
    return sampler_request(connection.api, max_tokens=connection.reply_tokens, sampler=connection.sampler or {})
