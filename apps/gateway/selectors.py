"""Reads of the gateway, scoped to the requesting user: which of their connections a request's `model` names."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db.models import QuerySet

from apps.common.exceptions import ApplicationError
from apps.common.jsonsafe import text_storable, text_stored
from apps.llm.models import Connection
from apps.llm.selectors import connection_for_replies, connection_list

DEFAULT_NAMES = ("", "default", "lorekeeper")


def model_list(*, user: AbstractUser) -> QuerySet[Connection]:
    """The person's connections, as `/v1/models` lists them: the default first, then by age."""
    return connection_list(user=user).order_by("-is_default", "created_at", "id")


def connection_for_model(*, user: AbstractUser, model: str) -> Connection:
    """The connection a request's `model` names: by its name (any case), else by its model (the default among
    several), else, for no model (or `default`), the person's default. Another user's is never found: 404."""
    model = model.strip()
    if model.lower() in DEFAULT_NAMES:
        found = connection_for_replies(user_id=user.pk)
        if found is None:
            raise ApplicationError(
                "Add a model connection in Lorekeeper first (Models).", {"field": "model"}, status=404,
                code="model_not_found",
            )  # fmt: skip
        return found
    connections = model_list(user=user)
    found = None
    if text_storable(model):  # no name holds a NUL or a lone surrogate, and the database compares no text that does
        found = connections.filter(name__iexact=model).first() or connections.filter(model=model).first()
    if found is None:
        shown = text_stored(model)[:200]  # said back as it can be written
        raise ApplicationError(
            f"The model `{shown}` does not exist: it is neither the name nor the model of one of your connections.",
            {"field": "model"},
            status=404,
            code="model_not_found",
        )
    return found
