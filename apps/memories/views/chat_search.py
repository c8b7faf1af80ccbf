"""Search inside one chat, by words and by meaning, from the chat page: its messages as the recall index holds
them, each answer a link to the chat opened at that message."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.memories.models import Kind
from apps.memories.search import memory_search
from apps.memories.services.indexing import chat_index_progress

RESULTS = 20


class ChatSearchForm(forms.Form):
    q = forms.CharField(max_length=500, strip=True, label="Search this chat")


@login_required
@require_GET
def chat_search(request, chat_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    form = ChatSearchForm(request.GET)
    context = {"chat": chat, "form": form, "hits": None, "progress": chat_index_progress(chat=chat)}
    if form.is_valid():
        try:
            outcome = memory_search(
                user=request.user, query=form.cleaned_data["q"], chat_id=chat.pk, kinds=[Kind.MESSAGE], limit=RESULTS
            )
        except ApplicationError as exc:
            form.add_error("q", exc.message)
        else:
            # The chat's scope holds its own messages and its characters' persistent memories: the kind keeps the
            # messages, which only the chat holds.
            context["hits"] = outcome.results
    template = "memories/chat_search.html#chat-search-results" if request.htmx else "memories/chat_search.html"
    return render(request, template, context, status=400 if form.errors else 200)
