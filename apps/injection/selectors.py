"""Reads of the injection state, scoped to the requesting user."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser

from apps.chats.models import Chat
from apps.injection.models import InjectionState


def injection_state_get(*, user: AbstractUser, chat: Chat) -> InjectionState | None:
    """The last context built for the chat (what the content cache macros read), or None before the first."""
    return InjectionState.objects.filter(user=user, chat=chat).first()


def injection_state_latest(*, user: AbstractUser) -> InjectionState | None:
    """The user's most recently built context, of any chat (its trim statistics are the settings page's chart)."""
    states = InjectionState.objects.filter(user=user, built_at__isnull=False).select_related("chat")
    return states.order_by("-built_at").first()
