"""The chat page's composer (loaded after the page, as its other panels are) and a reply's prompt, shown after the
fact. Sending and streaming go through the API (apps/generation/apis.py) from static/js/chat-compose.js."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.chats import selectors as chat_selectors
from apps.generation import selectors
from apps.llm.models import Connection
from apps.llm.selectors import connection_for_replies, connection_list


@login_required
@require_GET
def composer(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    connections = list(connection_list(user=request.user))
    context = {
        "chat": chat,
        "connections": connections,
        "chosen": _chosen(request.user, connections, selectors.connection_last_used(user=request.user, chat=chat)),
        "characters": chat_selectors.chat_characters_in_order(chat=chat),
    }
    return render(request, "generation/partials/composer.html", context)


def _chosen(user, connections: list[Connection], last: int | None) -> Connection | None:
    """The model the composer offers first: the one the chat's last reply was asked of (a choice under Options
    stays across reloads and devices), else the one replies use when none is named."""
    used = next((c for c in connections if c.pk == last), None)
    return used or (connection_for_replies(user_id=user.pk) if connections else None)


@login_required
@require_GET
def message_prompt(request, chat_id: int, index: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    try:
        generation = selectors.generation_for_message(user=request.user, chat=chat, index=index)
    except Http404:
        # A reply generated elsewhere: in a chat imported or restored from a backup, its menu still offers Prompt.
        return render(request, "error.html", {"heading": "No prompt is kept for this message", "explanation": (
            f"Message #{index} of this chat was not generated here (in a chat imported, or restored from a backup, "
            "a reply was generated where the chat came from): a reply's prompt is kept only where it was written."
        )}, status=404)  # fmt: skip
    return render(request, "generation/prompt.html", {"chat": chat, "index": index, "generation": generation})
