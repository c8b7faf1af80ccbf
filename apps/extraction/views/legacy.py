"""The chat page's offer to import what SillyTavern memory extensions left in the chat (loaded after the page)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from apps.chats import selectors as chat_selectors
from apps.extraction.services.legacy.run import chat_legacy_import, legacy_found

LABELS = {"st_bme": "ST-BME", "smart_memory": "Smart Memory", "auto_recap": "auto-recap"}


@login_required
@require_http_methods(["GET", "POST"])
def legacy_import(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    if request.method == "POST":
        counts = chat_legacy_import(user=request.user, chat=chat)
        made = sum(value.get("imported", 0) for value in counts.values())
        messages.success(
            request, f"{made} memor{'y' if made == 1 else 'ies'} imported from the chat's extension data."
        )
        return redirect("chats:detail", chat.pk)
    found = [(LABELS.get(source, source), count) for source, count in legacy_found(chat=chat).items()]
    return render(request, "extraction/partials/legacy_offer.html", {"chat": chat, "found": found})
