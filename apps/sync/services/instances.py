"""The client instances of a user (entity-core's embodiments, docs/GLOSSARY.md): registered by name, ranked by
priority."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction

from apps.common.exceptions import ApplicationError
from apps.common.services import model_update
from apps.sync.clocks import SERVER
from apps.sync.models import Instance, InstanceKind

KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_INSTANCES = 50
MAX_PRIORITY = 1000


def instance_key_check(key: Any, *, field: str = "key") -> str:
    if not isinstance(key, str) or not KEY.match(key):
        raise ApplicationError(
            "An instance key is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit.",
            {"field": field},
        )
    if key.lower() == SERVER:
        raise ApplicationError(f"'{SERVER}' is the server's own key in clocks: choose another.", {"field": field})
    return key


def _fields_check(data: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if "name" in data:
        name = str(data["name"] or "").strip()
        if not name or len(name) > 100:
            raise ApplicationError("An instance's name is 1 to 100 characters.", {"field": "name"})
        if "\x00" in name:
            raise ApplicationError("An instance's name cannot hold a NUL character.", {"field": "name"})
        values["name"] = name
    if "kind" in data:
        if data["kind"] not in InstanceKind.values:
            raise ApplicationError(
                f"An instance's kind is one of {', '.join(InstanceKind.values)}.", {"field": "kind"}
            )
        values["kind"] = data["kind"]
    if "priority" in data:
        priority = data["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > MAX_PRIORITY:
            raise ApplicationError(
                f"An instance's priority is a whole number from -{MAX_PRIORITY} to {MAX_PRIORITY}.",
                {"field": "priority"},
            )
        values["priority"] = priority
    return values


@transaction.atomic
def instance_register(*, user: AbstractUser, key: str, **data: Any) -> tuple[Instance, bool]:
    """The instance under `key`, registered now if it was not (then `created` is True); given fields are set."""
    instance_key_check(key)
    values = _fields_check(data)
    instance = Instance.objects.select_for_update().filter(user=user, key=key).first()
    if instance is not None:
        model_update(instance=instance, fields=list(values), data=values)
        return instance, False
    if Instance.objects.filter(user=user).count() >= MAX_INSTANCES:
        raise ApplicationError(
            f"At most {MAX_INSTANCES} instances per account: remove one you no longer use.", {"field": "key"}
        )
    values.setdefault("name", key)
    try:
        with transaction.atomic():
            return Instance.objects.create(user=user, key=key, **values), True
    except IntegrityError:  # registered by a concurrent request meanwhile
        return Instance.objects.get(user=user, key=key), False


@transaction.atomic
def instance_update(*, instance: Instance, data: dict[str, Any]) -> Instance:
    values = _fields_check(data)
    instance, _ = model_update(instance=instance, fields=list(values), data=values)
    return instance


@transaction.atomic
def instance_remove(*, instance: Instance) -> None:
    """Forget an instance: tombstones no longer wait for it to pull. What it pushed stays."""
    instance.delete()
