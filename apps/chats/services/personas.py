"""Personas: who the person plays. A chat starts with the account's default persona, whose name becomes the chat's
`user_name` (apps/chats/services/start.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser
from django.db import connection, transaction

from apps.chats.models import Persona
from apps.common.exceptions import ApplicationError
from apps.common.services import model_update

PERSONA_FIELDS = ("name", "description", "is_default", "lorebook")
MAX_NAME = 100


def _clean_name(name: Any) -> str:
    name = name.strip() if isinstance(name, str) else ""
    if not name:
        raise ApplicationError("A persona needs a name.", {"field": "name"})
    if len(name) > MAX_NAME:
        raise ApplicationError(f"A persona's name is at most {MAX_NAME} characters.", {"field": "name"})
    return name


def _default_lock(user_id: int) -> None:
    """Serialise the changes of one account's default persona (a transaction-level advisory lock), so two at once
    never both find no other default and then collide on the one-default constraint."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"persona-default:{user_id}"])


def _unset_other_defaults(*, user_id: int, keep: int | None) -> None:
    _default_lock(user_id)
    Persona.objects.filter(user_id=user_id, is_default=True).exclude(pk=keep).update(is_default=False)


@transaction.atomic
def persona_create(
    *, user: AbstractUser, name: str, description: str = "", is_default: bool = False, lorebook: str = ""
) -> Persona:
    """A new persona; made the default, it takes the place of the one that was. `lorebook` names the book its chats
    scan besides their own (SillyTavern's persona lore)."""
    name = _clean_name(name)
    if is_default:
        _unset_other_defaults(user_id=user.pk, keep=None)
    return Persona.objects.create(
        user=user, name=name, description=description or "", is_default=is_default, lorebook=(lorebook or "").strip()
    )


@transaction.atomic
def persona_update(*, persona: Persona, data: dict[str, Any]) -> Persona:
    """Change name, description or whether it is the default (made the default, it takes the place of the one
    that was; `is_default` False leaves the account with no default)."""
    data = {key: value for key, value in data.items() if key in PERSONA_FIELDS}
    # As stored now: the object in hand may be older than another default's taking its place.
    persona = Persona.objects.select_for_update().get(pk=persona.pk)
    if "name" in data:
        data["name"] = _clean_name(data["name"])
    if "lorebook" in data:
        data["lorebook"] = (data["lorebook"] or "").strip()
    if data.get("is_default"):
        _unset_other_defaults(user_id=persona.user_id, keep=persona.pk)
    persona, _ = model_update(instance=persona, fields=list(PERSONA_FIELDS), data=data)
    return persona


@transaction.atomic
def persona_delete(*, persona: Persona) -> None:
    """Its chats keep their `user_name` and lose the link (SET_NULL)."""
    persona.delete()


def persona_default(*, user: AbstractUser) -> Persona | None:
    return Persona.objects.filter(user=user, is_default=True).first()


def owned_persona(*, user: AbstractUser, persona_id: int) -> Persona:
    """The user's persona of that id; another's, or none, is a 400 naming `persona` (as with `character_ids`)."""
    persona = Persona.objects.filter(user=user, pk=persona_id).first()
    if persona is None:
        raise ApplicationError("Unknown persona id.", {"field": "persona", "id": persona_id})
    return persona
