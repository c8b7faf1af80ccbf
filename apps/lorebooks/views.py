"""The lorebooks pages: your books (import a World Info file, make one global, export, delete), a book's entries
(searched, a page at a time) and its earlier versions (downloaded, restored), and the entry form."""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from apps.accounts.services import SettingsConflict, settings_document_get
from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.common.ids import id_from
from apps.common.panels import panel_form
from apps.lorebooks import selectors
from apps.lorebooks.forms import ChatLoreForm, EntryForm, LoreSettingsForm
from apps.lorebooks.models import Lorebook
from apps.lorebooks.services.books import (
    IMPORT_REPLACED,
    entry_delete,
    entry_save,
    export_disposition,
    lorebook_delete,
    lorebook_export,
    lorebook_import,
    lorebook_revision_restore,
    lorebook_update,
)
from apps.lorebooks.services.card_book import card_book_import
from apps.lorebooks.services.fields import LOGICS, POSITION_LABELS, world_file_read
from apps.lorebooks.services.from_memories import memories_world
from apps.lorebooks.services.linked import chat_lore, chat_lore_set
from apps.lorebooks.services.search import lorebook_entries_search
from apps.lorebooks.services.settings import NAMESPACE, lore_settings_read, lore_settings_save

ENTRIES_PER_PAGE = 50
BOOKS_PER_PAGE = 25


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def lorebook_list(request):
    if request.method == "POST":
        upload = request.FILES.get("file")
        try:
            if upload is None:
                raise ApplicationError("Choose a World Info file (.json) to import.", {"field": "file"})
            data = world_file_read(upload)
            name = request.POST.get("name", "").strip() or upload.name
            book = lorebook_import(
                user=request.user, name=name, data=data, replace=bool(request.POST.get("replace")),
                kept_as=IMPORT_REPLACED,
            )  # fmt: skip
        except ApplicationError as error:
            taken = error.status == 409  # the name: the checkbox that replaces the book is beside the file
            hint = " Tick “Replace my book of the same name”, or name this one otherwise." if taken else ""
            messages.error(request, f"Nothing was imported. {error.message}{hint}")
        else:
            messages.success(request, f"Imported “{book.name}”.")
            return redirect("lorebooks:detail", lorebook_id=book.pk)
    if request.htmx and request.method == "GET":
        return render(request, "lorebooks/lorebook_list.html#book-results", _books_page(request))
    return render(request, "lorebooks/lorebook_list.html", _books_page(request) | _settings_context(request.user))


def _books_page(request) -> dict:
    """A page of the person's books, those whose name holds the search (`q`) when there is one."""
    search = request.GET.get("q", "").strip()
    books = selectors.lorebook_list(user=request.user, search=search)
    return {"page": Paginator(books, BOOKS_PER_PAGE).get_page(request.GET.get("page")), "search": search}


def _settings_context(user, form: LoreSettingsForm | None = None) -> dict:
    document = settings_document_get(user=user)
    current, problems = lore_settings_read((document.data or {}).get(NAMESPACE))
    if form is None:
        form = LoreSettingsForm(initial={**dataclasses.asdict(current), "integrity": document.integrity})
    return {"settings_form": form, "settings_problems": problems}


@login_required
@require_POST
def lore_settings_view(request):
    """The lorebooks page's World Info settings."""
    form = LoreSettingsForm(request.POST)
    if form.is_valid():
        values = {name: value for name, value in form.cleaned_data.items() if name != "integrity"}
        try:
            lore_settings_save(user=request.user, values=values, integrity=form.cleaned_data["integrity"])
        except SettingsConflict:
            messages.error(request, "The settings changed elsewhere meanwhile: nothing was saved. Here they are now.")
        except ApplicationError as error:
            messages.error(request, f"Nothing was saved. {error.message}")
        else:
            messages.success(request, "World Info settings saved.")
        return redirect("lorebooks:list")
    context = _books_page(request) | _settings_context(request.user, form) | {"settings_open": True}
    return render(request, "lorebooks/lorebook_list.html", context, status=400)


@login_required
@require_GET
def lorebook_detail(request, lorebook_id: int):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    query = request.GET.get("q", "").strip()
    entries = selectors.lorebook_entries(book=book, query=query)
    page = Paginator(entries, ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"book": book, "page": page, "query": query, "positions": POSITION_LABELS, "logics": LOGICS,
               "scopes": Lorebook.Scope.choices, "revisions": selectors.lorebook_revisions(book=book)}  # fmt: skip
    return render(request, "lorebooks/lorebook_detail.html", context)


@login_required
@require_POST
def lorebook_change(request, lorebook_id: int):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    try:
        lorebook_update(book=book, scope=request.POST.get("scope") or None, name=request.POST.get("name") or None)
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Saved.")
    return redirect("lorebooks:detail", lorebook_id=book.pk)


@login_required
@require_POST
def lorebook_delete_view(request, lorebook_id: int):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    lorebook_delete(book=book)
    messages.success(request, f"Deleted “{book.name}”.")
    return redirect("lorebooks:list")


@login_required
@require_GET
def lorebook_export_view(request, lorebook_id: int):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    return _download(lorebook_export(book=book), book.name)


@login_required
@require_GET
def revision_export_view(request, lorebook_id: int, revision_id: int):
    revision = selectors.lorebook_revision_get(user=request.user, lorebook_id=lorebook_id, revision_id=revision_id)
    return _download(revision.data, revision.lorebook.name)


@login_required
@require_POST
def revision_restore_view(request, lorebook_id: int, revision_id: int):
    revision = selectors.lorebook_revision_get(user=request.user, lorebook_id=lorebook_id, revision_id=revision_id)
    try:
        lorebook_revision_restore(revision=revision)
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Restored. The version it replaced is kept below.")
    return redirect("lorebooks:detail", lorebook_id=lorebook_id)


def _download(world: dict, name: str) -> JsonResponse:
    """A World Info file to save as `<name>.json`, indented as SillyTavern writes one."""
    response = JsonResponse(world, json_dumps_params={"ensure_ascii": False, "indent": 4})
    response["Content-Disposition"] = export_disposition(name)
    return response


def _scope(request) -> dict[str, int]:
    """`?character=<id>` or `?chat=<id>` (or neither) as the ids services take; anything else is a 404."""
    ids = {}
    for field in ("character", "chat"):
        value = request.GET.get(field, "")
        if value:
            found = id_from(value)
            if found is None:
                raise Http404(f"No such {field}.")
            ids[f"{field}_id"] = found
    if len(ids) > 1:
        raise Http404("Search the lorebooks of a character or of a chat.")
    return ids


@login_required
@require_GET
def lorebook_search_view(request):
    """The memories page's lorebook entries for its search (`?q=`, with its `character` or `chat`), loaded beside
    its results."""
    query = request.GET.get("q", "").strip()[:2000]
    found = lorebook_entries_search(user=request.user, query=query, **_scope(request)) if query else None
    return render(request, "lorebooks/partials/entry_hits.html", {"found": found, "query": query})


@login_required
@require_GET
def memories_world_view(request):
    """The memories page's "Export as World Info": `?character=<id>` or `?chat=<id>`."""
    ids = _scope(request)
    if not ids:
        raise Http404("Export the memories of a character or of a chat.")
    name, world = memories_world(user=request.user, **ids)
    return _download(world, name)


@login_required
@require_http_methods(["GET", "POST"])
def entry_edit(request, lorebook_id: int, uid: int | None = None):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    entry = None if uid is None else selectors.lorebook_entry(book=book, uid=uid)
    if uid is not None and entry is None:
        raise Http404("No such entry.")
    form = EntryForm(request.POST) if request.method == "POST" else EntryForm.for_entry(entry.data if entry else None)
    if request.method == "POST" and form.is_valid():
        try:
            saved = entry_save(book=book, uid=uid, changes=form.changes())
        except ApplicationError as error:
            form.add_error(None, error.message)
        else:
            messages.success(request, f"Saved entry {saved.uid}.")
            return redirect("lorebooks:detail", lorebook_id=book.pk)
    context = {"book": book, "entry": entry, "form": form}
    return render(request, "lorebooks/entry_edit.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def entry_delete_view(request, lorebook_id: int, uid: int):
    book = selectors.lorebook_get(user=request.user, lorebook_id=lorebook_id)
    try:
        entry_delete(book=book, uid=uid)
    except ApplicationError as error:
        raise Http404(error.message) from None
    messages.success(request, f"Deleted entry {uid}.")
    return redirect("lorebooks:detail", lorebook_id=book.pk)


@login_required
@require_http_methods(["GET", "POST"])
def chat_lore_view(request, chat_id: int):
    """The book the chat links (SillyTavern's Chat Lore): GET the small form (a fragment the chat page loads with
    htmx), POST a choice (a name of the person's books, or empty for none). An htmx POST answers the form again;
    another, a redirect to the chat."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id, characters=False)
    names = selectors.lorebook_names(user=request.user)
    current = chat_lore(chat)
    return panel_form(
        request,
        form=ChatLoreForm(posted(request), names=names, current=current, initial={"book": current}),
        save=lambda data: chat_lore_set(chat=chat, name=data["book"]),
        fresh=lambda saved: ChatLoreForm(names=names, current=chat_lore(saved), initial={"book": chat_lore(saved)}),
        template="lorebooks/partials/chat_lore.html",
        context={"chat": chat},
        done="Changed the chat's lorebook.",
        failed="The chat's lorebook was not changed",
        back=reverse("chats:detail", args=[chat.pk]),
    )


@login_required
@require_POST
def card_book_import_view(request, character_id: int):
    """The character card's embedded book made one of the person's books, which the card then links."""
    character = chat_selectors.character_get(user=request.user, character_id=character_id)
    try:
        book, count = card_book_import(user=request.user, character=character)
    except ApplicationError as exc:
        messages.error(request, f"Nothing was imported: {exc.message}")
        return redirect("chats:character", character.pk)
    messages.success(
        request,
        f"Imported the card's lorebook as “{book.name}” ({count} entr{'y' if count == 1 else 'ies'}): "
        f"{character.name}'s card links it now, and its chats read it here.",
    )
    return redirect("lorebooks:detail", book.pk)
