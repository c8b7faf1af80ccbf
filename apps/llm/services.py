"""Writing a user's LLM connections. Keys are encrypted on the way in and never leave: the API and the pages show
only `api_key_hint` (the last four characters)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import transaction
from django.utils import timezone

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import unstorable_reason
from apps.common.netguard import provider_url_check
from apps.common.secrets import secret_encrypt
from apps.common.services import model_update
from apps.llm.client import LlmError, complete_prompt
from apps.llm.models import Budget, Connection, SamplerPreset
from apps.llm.profiles import connection_context_size
from apps.llm.prompts import prompt_get
from apps.llm.sampler import CONTEXT_WINDOW_MAX, REPLY_TOKENS_MAX, sampler_clean

TEST_TIMEOUT = 30.0
FIELDS = (
    "name",
    "api",
    "base_url",
    "model",
    "profile",
    "context_window",
    "timeout",
    "is_default",
    "reply_tokens",
    "sampler",
    "price_prompt",
    "price_reply",
)


def _set_key(connection: Connection, api_key: str) -> None:
    connection.api_key_encrypted = secret_encrypt(api_key)
    connection.api_key_hint = api_key[-4:] if len(api_key) >= 12 else ""


def _validate(*, user: AbstractUser, connection: Connection) -> None:
    connection.name = connection.name.strip()
    if not connection.name:
        raise ApplicationError("A connection needs a name.", {"field": "name"})
    clash = Connection.objects.filter(user=user, name__iexact=connection.name).exclude(pk=connection.pk)
    if clash.exists():
        raise ApplicationError("You already have a connection of that name.", {"field": "name"})
    if not connection.model.strip():
        raise ApplicationError("Name the model.", {"field": "model"})
    provider_url_check(connection.base_url)
    if connection.timeout is not None and not 1 <= connection.timeout <= 600:
        raise ApplicationError("The timeout is between 1 and 600 seconds.", {"field": "timeout"})
    if connection.context_window is not None and connection.context_window < 512:
        raise ApplicationError(
            "A context window under 512 tokens leaves no room for a prompt.", {"field": "context_window"}
        )
    if connection.context_window is not None and connection.context_window > CONTEXT_WINDOW_MAX:
        raise ApplicationError(
            f"A context window is at most {CONTEXT_WINDOW_MAX:,} tokens.", {"field": "context_window"}
        )
    if not 1 <= connection.reply_tokens <= REPLY_TOKENS_MAX:
        raise ApplicationError(f"A reply is 1 to {REPLY_TOKENS_MAX:,} tokens long.", {"field": "reply_tokens"})
    if connection.reply_tokens >= connection_context_size(connection):
        raise ApplicationError(
            "The reply length leaves no room for the chat in the context size.", {"field": "reply_tokens"}
        )
    connection.sampler = sampler_clean(connection.sampler or {})
    for field in ("price_prompt", "price_reply"):
        price = getattr(connection, field)
        if price is not None and not 0 <= price <= 100_000:
            raise ApplicationError("A price per million tokens is between 0 and 100,000.", {"field": field})


def _make_only_default(connection: Connection) -> None:
    Connection.objects.filter(user_id=connection.user_id, is_default=True).exclude(pk=connection.pk).update(
        is_default=False
    )


@transaction.atomic
def connection_create(*, user: AbstractUser, api_key: str = "", **fields: Any) -> Connection:
    """Background memory work uses a connection only when the person says so (`is_default`): a first connection is
    not made the default, for background work spends the person's money or hours."""
    connection = Connection(user=user, **{k: v for k, v in fields.items() if k in FIELDS})
    _validate(user=user, connection=connection)
    if connection.is_default:
        _make_only_default(connection)
    _set_key(connection, api_key)
    connection.save()
    return connection


@transaction.atomic
def connection_update(*, connection: Connection, data: dict[str, Any], api_key: str | None = None) -> Connection:
    """`api_key=None` keeps the stored key, "" clears it. `data` may hold any of FIELDS; `sampler` replaces the
    stored samplers whole (checked by `sampler_clean`)."""
    connection = Connection.objects.select_for_update().get(pk=connection.pk)
    for key in FIELDS:
        if key in data:
            setattr(connection, key, data[key])
    _validate(user=connection.user, connection=connection)
    if connection.is_default:
        _make_only_default(connection)
    if api_key is not None:
        _set_key(connection, api_key)
    connection.save()
    return connection


@transaction.atomic
def connection_delete(*, connection: Connection) -> None:
    """No other connection takes over background work: the person chooses one again."""
    connection.delete()


DAILY_TOKENS_MIN, DAILY_TOKENS_MAX = 1000, 10**12


@transaction.atomic
def budget_set(*, user: AbstractUser, daily_tokens: int | None) -> Budget:
    """The person's daily token limit for background work (None: no limit)."""
    if daily_tokens is not None and not DAILY_TOKENS_MIN <= daily_tokens <= DAILY_TOKENS_MAX:
        raise ApplicationError(
            f"A daily limit is at least {DAILY_TOKENS_MIN:,} tokens (leave it empty for none).",
            {"field": "daily_token_limit"},
        )
    budget, _ = Budget.objects.update_or_create(user=user, defaults={"daily_tokens": daily_tokens})
    return budget


def connection_test(*, connection: Connection) -> Connection:
    """Ask the model for "OK" and remember the outcome (shown beside the connection). One try of at most
    TEST_TIMEOUT seconds (or the connection's own, if shorter), outside any transaction."""
    try:
        completion = complete_prompt(
            connection,
            prompt_get("llm", "connection_test"),
            purpose="connection_test",
            max_tokens=16,
            timeout=TEST_TIMEOUT,
            retries=0,  # a person is waiting: one try says whether it answers
        )
        ok = True
        message = f"answered in {completion.call.latency_ms} ms: {completion.text[:80]!r}"
        if completion.reasoning:
            message += " (thinking stripped)"
    except LlmError as exc:
        ok, message = False, exc.message
    Connection.objects.filter(pk=connection.pk).update(
        last_tested_at=timezone.now(), last_test_ok=ok, last_test_message=message[:1000]
    )
    connection.refresh_from_db()
    return connection


@transaction.atomic
def sampler_preset_save(*, user: AbstractUser, name: str, values: dict) -> SamplerPreset:
    """Keep `values` (checked by `sampler_clean`) under `name`: a preset of that name (in any case) is overwritten,
    as saving over a preset is how a person changes one."""
    name = name.strip()
    if not name:
        raise ApplicationError("A preset needs a name.", {"field": "name"})
    if len(name) > 100:
        raise ApplicationError("A preset's name is at most 100 characters.", {"field": "name"})
    if unstorable_reason(name):
        raise ApplicationError(f"A preset's name {unstorable_reason(name)}.", {"field": "name"})
    values = sampler_clean(values)
    preset = SamplerPreset.objects.select_for_update().filter(user=user, name__iexact=name).first()
    if preset is None:
        return SamplerPreset.objects.create(user=user, name=name, values=values)
    preset, _ = model_update(instance=preset, fields=["name", "values"], data={"name": name, "values": values})
    return preset


@transaction.atomic
def sampler_preset_delete(*, preset: SamplerPreset) -> None:
    preset.delete()


@transaction.atomic
def sampler_preset_apply(*, connection: Connection, preset: SamplerPreset) -> Connection:
    """Put the preset's samplers on the connection, replacing its own (the reply length stays)."""
    if preset.user_id != connection.user_id:
        raise ApplicationError("No such preset.", {"field": "preset"}, status=404)
    return connection_update(connection=connection, data={"sampler": preset.values})
