"""Pages for chats (full page, or the fragment htmx asks for)."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from apps.chats import selectors
from apps.chats.apis.chats import export_response
from apps.chats.forms import ChatImportForm
from apps.chats.selectors import revision_list
from apps.chats.services.chats import chat_delete, chat_import, chat_import_sample
from apps.chats.services.writes import chat_reimport, chat_revision_restore
from apps.common.exceptions import ApplicationError

CHATS_PER_PAGE = 25
MESSAGES_PER_PAGE = 30


@require_GET
def home(request):
    """Someone signed out: what Lorekeeper is and how to start. Signed in: their chats, or the first steps."""
    if not request.user.is_authenticated:
        return render(request, "chats/landing.html")
    if not selectors.chat_exists(user=request.user):
        return redirect("chats:welcome")
    return redirect("chats:list")


@login_required
@require_GET
def welcome(request):
    return render(request, "chats/welcome.html", {"form": ChatImportForm()})


@login_required
@require_GET
@vary_on_headers("HX-Request")
def chat_list(request):
    search = request.GET.get("q", "").strip()
    paginator = Paginator(selectors.chat_list(user=request.user, search=search), CHATS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    context = {"page": page, "search": search, "form": ChatImportForm()}
    template = "chats/chat_list.html#chat-results" if request.htmx else "chats/chat_list.html"
    return render(request, template, context)


@login_required
@require_GET
def chat_detail(request, chat_id: int):
    """The chat on its newest messages, or, with `?at=N`, on the messages around #N with #N highlighted (where a
    memory's source or a search hit links): older ones load above as the person scrolls up, newer ones below."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    at, place_notice = _place(chat, request.GET.get("at"))
    if at is None:
        page = selectors.message_page_before(chat=chat, before=None, limit=MESSAGES_PER_PAGE)
    else:
        page = selectors.message_page_around(chat=chat, index=at, limit=MESSAGES_PER_PAGE)
    revisions = revision_list(chat=chat)[:20]
    replace_form = ChatImportForm(initial={"replace": chat.pk, "title": chat.title})
    context = {
        **_message_run(chat, page),
        "at": at,
        "place_notice": place_notice,
        "revisions": revisions,
        "replace_form": replace_form,
    }
    return render(request, "chats/chat_detail.html", context)


def _place(chat, value: str | None) -> tuple[int | None, str]:
    """The message `?at=` names, or None and, when something was asked for, why the newest are shown instead."""
    if value is None or not value.strip():
        return None, ""
    asked = value.strip()[:20]
    try:
        at = int(value)
    except ValueError:
        return None, f"“{asked}” is not a message number. Showing the newest messages."
    if 0 <= at < chat.message_count:
        return at, ""
    if not chat.message_count:
        return None, f"This chat has no message #{asked}: it has no messages yet."
    last = chat.message_count - 1
    return None, f"This chat has no message #{asked} (its messages are #0 to #{last}). Showing the newest messages."


def _message_run(chat, page: list, *, older: bool = True, newer: bool = True) -> dict:
    """A run of messages with the sentinels that load the next run above (`older`) or below (`newer`) when the
    person scrolls to them."""
    return {
        "chat": chat,
        "page": page,
        "older": older and bool(page) and page[0].index > 0,
        "newer": newer and bool(page) and page[-1].index < chat.message_count - 1,
    }


@login_required
@require_GET
def message_older(request, chat_id: int):
    """The page of messages before `?before=`; htmx swaps it in place of the "older" sentinel at the top."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    try:
        before = max(0, int(request.GET.get("before", "")))
    except ValueError:
        before = chat.message_count
    page = selectors.message_page_before(chat=chat, before=before, limit=MESSAGES_PER_PAGE)
    return render(request, "chats/chat_detail.html#message-page", _message_run(chat, page, newer=False))


@login_required
@require_GET
def message_newer(request, chat_id: int):
    """The page of messages after `?after=`; htmx swaps it in place of the "newer" sentinel at the bottom of a chat
    opened at an older message."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    try:
        after = min(max(-1, int(request.GET.get("after", ""))), chat.message_count)
    except ValueError:
        after = chat.message_count
    page = selectors.message_page(chat=chat, from_index=after + 1, limit=MESSAGES_PER_PAGE)
    return render(request, "chats/chat_detail.html#message-page", _message_run(chat, page, older=False))


@login_required
@require_GET
def message_fragment(request, chat_id: int, index: int):
    """One message, rendered as in the chat view (the editor swaps it in after a write); `?full=1` unfolds a long
    one."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    message = selectors.message_get(chat=chat, index=index)
    context = {"chat": chat, "message": message, "full": request.GET.get("full") == "1"}
    return render(request, "chats/partials/message.html", context)


@login_required
@require_GET
def message_swipes(request, chat_id: int, index: int):
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    message = selectors.message_get(chat=chat, index=index)
    swipes = message.swipes if isinstance(message.swipes, list) else []
    return render(request, "chats/partials/swipes.html", {"chat": chat, "message": message, "swipes": swipes})


@login_required
@require_POST
def chat_import_view(request):
    form = ChatImportForm(request.POST, request.FILES)
    error = None
    if form.is_valid():
        upload = form.cleaned_data["file"]
        title = form.cleaned_data["title"].strip()
        replaced = form.cleaned_data.get("replace")
        try:
            if replaced:
                target = selectors.chat_get(user=request.user, chat_id=replaced)
                chat = chat_reimport(chat=target, jsonl=upload, title=title)
                done = (
                    f"Replaced “{chat.title}” with the file: {chat.message_count} messages. "
                    "The previous version is kept under Earlier versions."
                )
            else:
                chat = chat_import(user=request.user, stream=upload, filename=upload.name, title=title)
                done = f"Imported “{chat.title}”: {chat.message_count} messages."
        except ApplicationError as exc:
            error = exc.message
        else:
            url = reverse("chats:detail", args=[chat.pk])
            messages.success(request, done)
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context = {"form": form, "error": error}
    if request.htmx:
        return render(request, "chats/partials/import_form.html", context, status=400)
    return render(request, "chats/chat_import.html", context, status=400)


@login_required
@require_POST
def chat_sample(request):
    chat = chat_import_sample(user=request.user)
    messages.success(request, "Loaded the sample story.")
    return redirect("chats:detail", chat.pk)


@login_required
@require_GET
def chat_export_view(request, chat_id: int):
    return export_response(selectors.chat_get(user=request.user, chat_id=chat_id))


@login_required
@require_POST
def chat_revision_restore_view(request, chat_id: int, revision_id: int):
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    try:
        integrity = uuid.UUID(request.POST.get("integrity", ""))
        chat_revision_restore(chat=chat, revision_id=revision_id, integrity=integrity)
    except ValueError:
        messages.error(request, "The form was incomplete; reload the page and try again.")
    except ApplicationError as exc:
        messages.error(request, f"Not restored: {exc.message}")
    else:
        messages.success(request, "Restored the earlier version; the one it replaced is kept among the versions.")
    return redirect("chats:detail", chat.pk)


@login_required
@require_POST
def chat_delete_view(request, chat_id: int):
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    title = chat.title
    chat_delete(chat=chat)
    messages.success(request, f"Deleted “{title}”.")
    return HttpResponseClientRedirect(reverse("chats:list")) if request.htmx else redirect("chats:list")
