"""What the pipeline knows of a chat's story (summary, scenes with their recap versions, state ledger, arcs, who
knows what, profiles, canon, continuity), and the away recap panel of the chat page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.extraction import selectors
from apps.extraction.forms import SceneForm, SceneVersionForm
from apps.extraction.models import Recap
from apps.extraction.services.pipeline import chat_opened, recap_dismiss
from apps.extraction.services.scenes import scene_recap_again, scene_update
from apps.extraction.services.story_pictures import relationship_graph, story_timeline, window_parse

RECAP = "extraction/partials/recap_panel.html"
SCENE = "extraction/story.html#scene"
TIMELINE = "extraction/partials/story_timeline.html"


@login_required
@require_http_methods(["GET", "POST"])
def recap_panel(request, chat_id: int):
    """POST (the chat page, when it loads): the person is back, so a recap is written if they were away long
    enough. GET: the recap as it is (the panel polls while it is being written)."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    if request.method == "POST":
        recap, _ = chat_opened(user=request.user, chat=chat)
    else:
        recap = selectors.recap_current(user=request.user, chat=chat)
    return render(request, RECAP, {"chat": chat, "recap": recap, "pending": Recap.State.PENDING})


@login_required
@require_POST
def recap_dismiss_view(request, chat_id: int, recap_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    recap_dismiss(recap=selectors.recap_get(user=request.user, chat=chat, recap_id=recap_id))
    if request.htmx:
        return render(request, RECAP, {"chat": chat, "recap": None})
    return redirect("chats:detail", chat.pk)


def _timeline(request, chat) -> dict:
    """The timeline of the window in the address (?from=&to=); of the whole chat, with the error, when the window
    asked for is not one."""
    error = ""
    try:
        start, end = window_parse(count=chat.message_count, start=request.GET.get("from"), end=request.GET.get("to"))
    except ApplicationError as exc:
        error, start, end = exc.message, 0, chat.message_count
    return {"timeline": story_timeline(user=request.user, chat=chat, start=start, end=end), "timeline_error": error}


@login_required
@require_GET
@vary_on_headers("HX-Request")
def story_page(request, chat_id: int):
    """The story so far; to htmx zooming or paging the timeline (its target), the timeline alone."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    timeline = _timeline(request, chat)
    status = 400 if timeline["timeline_error"] else 200
    if request.htmx and request.htmx.target == "story-timeline" and not request.htmx.history_restore_request:
        return render(request, TIMELINE, {"chat": chat, **timeline}, status=status)
    context = {
        "chat": chat,
        "scenes": selectors.scene_list(user=request.user, chat=chat),
        "checks": selectors.continuity_list(user=request.user, chat=chat)[:10],
        "state": selectors.story_state(user=request.user, chat=chat),
        "relationships": relationship_graph(user=request.user, chat=chat),
        **timeline,
    }
    return render(request, "extraction/story.html", context, status=status)


@login_required
@require_POST
def scene_update_view(request, chat_id: int, scene_id: int):
    """Rename the scene, or choose which recap version is current."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    scene = selectors.scene_get(user=request.user, chat=chat, scene_id=scene_id)
    error = ""
    if "current_version" in request.POST:
        form = SceneVersionForm(request.POST)
        data = form.cleaned_data if form.is_valid() else None
    else:
        form = SceneForm(request.POST)
        data = form.cleaned_data if form.is_valid() else None
    if data is None:
        error = "; ".join(str(e) for errors in form.errors.values() for e in errors)
    else:
        try:
            scene = scene_update(scene=scene, **data)
        except ApplicationError as exc:
            error = exc.message
    if request.htmx:
        context = {"chat": chat, "scene": scene, "error": error, "opened": True}  # stays open after the action
        return render(request, SCENE, context, status=400 if error else 200)
    (messages.error if error else messages.success)(request, error or "Scene saved.")
    return redirect("extraction:story", chat.pk)


@login_required
@require_POST
def scene_recap_view(request, chat_id: int, scene_id: int):
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    scene = selectors.scene_get(user=request.user, chat=chat, scene_id=scene_id)
    error = notice = ""
    try:
        scene_recap_again(scene=scene)
        notice = "A new recap is being written; the page shows it once done (earlier versions stay)."
    except ApplicationError as exc:
        error = exc.message
    if request.htmx:
        context = {"chat": chat, "scene": scene, "error": error, "notice": notice, "opened": True}
        return render(request, SCENE, context, status=400 if error else 200)
    (messages.error if error else messages.success)(request, error or notice)
    return redirect("extraction:story", chat.pk)
