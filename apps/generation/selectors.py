"""Reads of generations, scoped to the user."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractUser
from django.http import Http404

from apps.chats.models import Chat, Message
from apps.generation.models import Generation


def _generation_uid(message: Message) -> str | None:
    """The generation a message's shown swipe came from (`extra.lorekeeper.generation`, in its swipe_info first)."""
    infos = message.swipe_info if isinstance(message.swipe_info, list) else []
    swipe = message.swipe_id or 0
    places = [infos[swipe].get("extra") if 0 <= swipe < len(infos) and isinstance(infos[swipe], dict) else None]
    places.append(message.extra)
    for extra in places:
        ours = (extra or {}).get("lorekeeper") if isinstance(extra, dict) else None
        if isinstance(ours, dict) and isinstance(ours.get("generation"), str):
            try:
                return str(uuid.UUID(ours["generation"]))
            except ValueError:  # written by something else: not ours
                return None
    return None


def generation_for_message(*, user: AbstractUser, chat: Chat, index: int) -> Generation:
    """The generation behind message `index` of the chat as it is shown now; 404 when it was not generated here."""
    message = Message.objects.filter(chat=chat, index=index).first()
    uid = _generation_uid(message) if message is not None else None
    generation = Generation.objects.filter(user=user, chat=chat, uid=uid).first() if uid else None
    if generation is None:
        raise Http404("This message was not generated here, so there is no prompt to show.")
    return generation


def connection_last_used(*, user: AbstractUser, chat: Chat) -> int | None:
    """The connection of the chat's latest reply asked of one that still exists (None: no such reply)."""
    return (
        Generation.objects.filter(user=user, chat=chat, connection__isnull=False)
        .order_by("-pk")
        .values_list("connection_id", flat=True)
        .first()
    )


def generation_get(*, user: AbstractUser, uid) -> Generation:
    generation = Generation.objects.select_related("chat").filter(user=user, uid=uid).first()
    if generation is None:
        raise Http404("No such generation.")
    return generation


def generations_streaming_count(*, user: AbstractUser, now) -> int:
    """The person's generations streaming now: under a lease that has not run out (a dead process's do not
    count)."""
    return Generation.objects.filter(user=user, state=Generation.State.STREAMING, lease_until__gte=now).count()


def prompt_messages(*, generation: Generation) -> list[dict]:
    """The prompt as role and content messages: a run of the chat's messages kept by reference
    (`{"role": "chat", "from", "to"}`, a front end's history through the gateway) read from the chat as it stands,
    its system messages aside."""
    runs = [item for item in generation.prompt if item.get("role") == "chat"]
    if not runs:
        return generation.prompt
    rows = (
        Message.objects.filter(chat_id=generation.chat_id, is_system=False)
        .filter(index__gte=min(run["from"] for run in runs), index__lte=max(run["to"] for run in runs))
        .order_by("index")
        .values_list("index", "is_user", "mes")
    )
    said = [(index, {"role": "user" if is_user else "assistant", "content": mes}) for index, is_user, mes in rows]
    messages: list[dict] = []
    for item in generation.prompt:
        if item.get("role") != "chat":
            messages.append(item)
            continue
        messages += [message for index, message in said if item["from"] <= index <= item["to"]]
    return messages
