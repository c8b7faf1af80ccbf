"""The memory browser: memories of a character, a chat or all of them, their search and history (with the lifecycle's
decisions). The entity pages are apps/memories/views/entities.py."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.memories import selectors
from apps.memories.forms import STATUS_ALL, MemoryEditForm, MemoryFilterForm
from apps.memories.models import Kind, Memory, Status
from apps.memories.search import memory_search
from apps.memories.services.memories import (
    VersionConflict,
    memory_restore,
    memory_retire,
    memory_update,
)

MEMORIES_PER_PAGE = 25
DECISIONS_SHOWN = 50
SEARCH_LIMIT = 20
NON_MESSAGE_KINDS = [kind for kind in Kind.values if kind != Kind.MESSAGE]
METHOD_NOTES = {
    "hybrid": "vector similarity and full-text ranking, fused",
    "vector": "vector similarity only (no memory shares a word with the query)",
    # No query vector: the query's words are none the embedding model knows (a name, which meaning would match to
    # anything: ranking.py's meaning_needs_a_known_word), or embeddings are off or unreachable.
    "text": "full-text ranking only (matched by its words: the embedding model knows none of them, as with a "
    "name, or embeddings are off or unavailable)",
}


def error_field(exc: ApplicationError, form, default: str) -> str:
    field = exc.extra.get("field")
    return field if field in form.fields else default


# ---------------------------------------------------------------------------------------------------- browser


def _scope_entities(*, user, character, chat):
    if character is not None:
        return selectors.entity_list(user=user, character_id=character.pk)
    return selectors.entity_list(user=user, chat_id=chat.pk if chat else None)


def _search(*, user, character, chat, data) -> tuple:
    """The search API's memory_search, with the page's filters (kind, status, entity) given to it."""
    kind, entity, status = data["kind"], data["entity"], data["status"]
    kinds = [kind] if kind else (None if data["messages"] else NON_MESSAGE_KINDS)
    outcome = memory_search(
        user=user,
        query=data["q"],
        character_id=character.pk if character else None,
        chat_id=chat.pk if chat else None,
        kinds=kinds,
        limit=SEARCH_LIMIT,
        include_retired=status != Status.ACTIVE,
        status=None if status == STATUS_ALL else status,
        entity_id=entity.pk if entity else None,
    )
    selectors.memories_display_load(memories=[hit.memory for hit in outcome.results])
    return outcome, outcome.results


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_browser(request, character_id: int | None = None, chat_id: int | None = None):
    """Memories of a character (its own and its chats'), of a chat (its own and its characters' persistent ones)
    or all of the user's: filtered and paged, or searched when `q` is given."""
    user = request.user
    character = chat_selectors.character_get(user=user, character_id=character_id) if character_id else None
    chat = chat_selectors.chat_get(user=user, chat_id=chat_id) if chat_id else None
    entities = _scope_entities(user=user, character=character, chat=chat)
    form = MemoryFilterForm(request.GET, entities=entities)
    context = {
        "character": character,
        "chat": chat,
        "form": form,
        "page": None,
        "outcome": None,
        "hits": None,
        "method_note": "",
    }
    if form.is_valid():
        data = form.cleaned_data
        if data["q"]:
            try:
                context["outcome"], context["hits"] = _search(user=user, character=character, chat=chat, data=data)
            except ApplicationError as exc:
                form.add_error("q", exc.message)
            else:
                context["method_note"] = METHOD_NOTES.get(context["outcome"].method, "")
        else:
            # An empty search box browses (clearing the box goes back to the list, as on the other list pages).
            qs = selectors.memory_list(
                user=user,
                character_id=character.pk if character else None,
                chat_id=chat.pk if chat else None,
                kinds=[data["kind"]] if data["kind"] else None,
                status=None if data["status"] == STATUS_ALL else data["status"],
                entity_id=data["entity"].pk if data["entity"] else None,
                include_messages=data["messages"],
            )
            paginator = Paginator(selectors.with_display(qs), MEMORIES_PER_PAGE)
            context["page"] = paginator.get_page(request.GET.get("page"))
    status = 400 if form.errors else 200
    template = "memories/memory_list.html#memory-results" if request.htmx else "memories/memory_list.html"
    return render(request, template, context, status=status)


# ---------------------------------------------------------------------------------------------------- one memory


def _memory(request, memory_id: int) -> Memory:
    return selectors.memory_detail_get(user=request.user, memory_id=memory_id)


def _edit_form(memory: Memory) -> MemoryEditForm:
    return MemoryEditForm(
        initial={field: getattr(memory, field) for field in MemoryEditForm.base_fields},
    )


def _detail_context(memory: Memory, **extra) -> dict:
    decisions = selectors.decision_list(user=memory.user, memory_id=memory.pk)[:DECISIONS_SHOWN]
    return {"memory": memory, "history": selectors.memory_history(memory=memory), "decisions": decisions, **extra}


def _answer_card(
    request, memory: Memory, *, status: int = 200, error: str = "", editing_form=None, conflict: bool = False
):
    """The card after a change or a refused one: htmx gets the card (and the history, out of band); a full page
    otherwise."""
    context = _detail_context(memory, card_error=error, form=editing_form, conflict=conflict)
    if not request.htmx:
        return render(request, "memories/memory_detail.html", context, status=status)
    if editing_form is not None:
        return render(request, "memories/memory_detail.html#memory-edit", context, status=status)
    return render(request, "memories/partials/memory_card_answer.html", context, status=status)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def memory_detail(request, memory_id: int):
    memory = _memory(request, memory_id)
    if request.htmx:
        return render(request, "memories/memory_detail.html#memory-card", {"memory": memory})
    return render(request, "memories/memory_detail.html", _detail_context(memory))


@login_required
@require_http_methods(["GET", "POST"])
def memory_edit(request, memory_id: int):
    """The edit form in place of the card (htmx), or the detail page with the form open."""
    memory = _memory(request, memory_id)
    if memory.is_message:
        return _answer_card(
            request, memory, status=400, error="A message memory follows its message: edit the message in the chat."
        )
    if request.method == "GET":
        return _answer_card(request, memory, editing_form=_edit_form(memory))
    form = MemoryEditForm(request.POST)
    if form.is_valid():
        try:
            memory = memory_update(
                memory=memory, data=form.cleaned_data, edited_by="web", expected_version=form.cleaned_data["version"]
            )
        except VersionConflict:
            # As the chat editor does: nothing saved, the person's text kept in the form, the current memory shown
            # beside it; the form now carries the current version, so saving again is a deliberate overwrite.
            current = _memory(request, memory.pk)
            data = request.POST.copy()
            data["version"] = str(current.version)
            return _answer_card(request, current, status=409, editing_form=MemoryEditForm(data), conflict=True)
        except ApplicationError as exc:
            form.add_error(error_field(exc, form, "content"), exc.message)
        else:
            if not request.htmx:
                messages.success(request, f"Saved memory #{memory.pk} (version {memory.version}).")
                return redirect("memories:detail", memory.pk)
            return _answer_card(request, _memory(request, memory.pk))
    return _answer_card(request, memory, status=400, editing_form=form)


def _status_change(request, memory_id: int, change, done: str):
    memory = _memory(request, memory_id)
    try:
        memory = change(memory)
    except ApplicationError as exc:
        if not request.htmx:
            messages.error(request, exc.message)
            return redirect("memories:detail", memory.pk)
        return _answer_card(request, memory, status=400, error=exc.message)
    if not request.htmx:
        messages.success(request, done)
        return redirect("memories:detail", memory.pk)
    return _answer_card(request, _memory(request, memory.pk))


@login_required
@require_POST
def memory_retire_view(request, memory_id: int):
    reason = request.POST.get("reason", "").replace("\x00", "").strip()[:50] or "retired by hand"
    return _status_change(
        request, memory_id, lambda memory: memory_retire(memory=memory, reason=reason), "Retired the memory."
    )


@login_required
@require_POST
def memory_restore_view(request, memory_id: int):
    return _status_change(request, memory_id, lambda memory: memory_restore(memory=memory), "Restored the memory.")
