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
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    page = selectors.message_page_before(chat=chat, before=None, limit=MESSAGES_PER_PAGE)
    revisions = revision_list(chat=chat)[:20]
    replace_form = ChatImportForm(initial={"replace": chat.pk, "title": chat.title})
    context = {"chat": chat, "page": page, "revisions": revisions, "replace_form": replace_form}
    return render(request, "chats/chat_detail.html", context)


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
    return render(request, "chats/chat_detail.html#message-page", {"chat": chat, "page": page})


@login_required
@require_GET
def message_fragment(request, chat_id: int, index: int):
    """One message, rendered as in the chat view (the editor swaps it in after a write)."""
    chat = selectors.chat_get(user=request.user, chat_id=chat_id)
    message = selectors.message_get(chat=chat, index=index)
    return render(request, "chats/partials/message.html", {"chat": chat, "message": message})


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
