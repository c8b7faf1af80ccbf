"""Recall cards under user messages (ST-BME's persistent recall, docs/GLOSSARY.md): read the recall, see the subgraph
it came from (drawn, each node clickable for its details), edit its text, delete it, re-run it. htmx partials; each
write answers the card and tells the page the chat's new integrity (the `lk-integrity` event), as the chat editor's own
writes do."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from apps.chats import selectors as chat_selectors
from apps.chats.templatetags.chat_links import message_url
from apps.common.exceptions import ApplicationError
from apps.common.ids import id_from
from apps.injection.services.graph_layout import graph_layout
from apps.injection.services.recall import recall_edit, recall_rerun, recall_store, recall_stored
from apps.memories import selectors as memory_selectors

CARD = "injection/partials/recall_card.html"


def _message(request, chat_id: int, index: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    return chat, chat_selectors.message_get(chat=chat, index=index)


def _integrity(request) -> uuid.UUID | None:
    raw = request.POST.get("integrity", "").strip()
    try:
        return uuid.UUID(raw) if raw else None
    except ValueError:
        return None


def _card(request, chat, index: int, *, error: str = "", status: int = 200, opened: bool = True):
    message = chat_selectors.message_get(chat=chat, index=index)
    context = {"chat": chat, "message": message, "error": error, "open": opened}
    response = render(request, CARD, context, status=status)
    return trigger_client_event(response, "lk-integrity", {"integrity": str(chat.integrity)})


def _write(request, chat, index: int, action):
    """Run a write on the recall; a conflict (the chat changed in another tab meanwhile) is said on the card."""
    try:
        chat = action(_integrity(request))
    except ApplicationError as exc:
        if not request.htmx:
            return redirect("chats:detail", chat.pk)
        chat = chat_selectors.chat_get(user=request.user, chat_id=chat.pk)
        error = exc.message if exc.status != 409 else "The chat changed elsewhere meanwhile: reload to see it."
        return _card(request, chat, index, error=error, status=exc.status)
    if not request.htmx:
        return redirect(message_url(chat.pk, index))
    return _card(request, chat, index)


@login_required
@require_GET
def recall_card(request, chat_id: int, index: int):
    chat, _ = _message(request, chat_id, index)
    return _card(request, chat, index, opened=request.GET.get("open") == "1")


@login_required
@require_POST
def recall_edit_view(request, chat_id: int, index: int):
    chat, _ = _message(request, chat_id, index)
    text = request.POST.get("injection_text", "").replace("\x00", "")
    return _write(
        request, chat, index, lambda integrity: recall_edit(chat=chat, index=index, text=text, integrity=integrity)[1]
    )


@login_required
@require_POST
def recall_delete_view(request, chat_id: int, index: int):
    chat, _ = _message(request, chat_id, index)
    return _write(
        request, chat, index, lambda integrity: recall_store(chat=chat, index=index, record=None, integrity=integrity)
    )


@login_required
@require_POST
def recall_rerun_view(request, chat_id: int, index: int):
    chat, _ = _message(request, chat_id, index)
    return _write(
        request,
        chat,
        index,
        lambda integrity: recall_rerun(user=request.user, chat=chat, index=index, integrity=integrity)[1],
    )


@login_required
@require_GET
def recall_graph(request, chat_id: int, index: int):
    chat, message = _message(request, chat_id, index)
    record = recall_stored(message)
    if record is None:
        raise Http404("That message has no recall.")
    context = {"chat": chat, "message": message, "graph": graph_layout(record.get("subgraph") or {})}
    return render(request, "injection/partials/recall_graph.html", context)


@login_required
@require_GET
def recall_node(request, chat_id: int, index: int, node: str):
    """One node of the subgraph: a memory (with the score the recall gave it) or an entity."""
    chat, message = _message(request, chat_id, index)
    record = recall_stored(message) or {}
    kind, number = node[:1], id_from(node[1:])  # "m12": memory 12, "e3": entity 3
    if kind not in ("m", "e") or number is None:
        raise Http404("No such node.")
    context = {"chat": chat, "message": message}
    if kind == "m":
        memory = memory_selectors.memory_get(user=request.user, memory_id=number)
        score = next((m.get("score") for m in record.get("memories", []) if m.get("id") == memory.pk), None)
        context |= {"memory": memory, "score": score}
    else:
        context["entity"] = memory_selectors.entity_get(user=request.user, entity_id=number)
    return render(request, "injection/partials/recall_node.html", context)
