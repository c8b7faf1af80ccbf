"""A user's embedding settings page, and the recall-index progress shown on the chat page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.common.forms import posted
from apps.memories import selectors
from apps.memories.embeddings import config_for, deployment_config
from apps.memories.forms import EmbeddingSettingsForm
from apps.memories.services.indexing import chat_index_progress
from apps.memories.services.settings import embedding_settings_get, embedding_settings_set
from apps.memories.views.browser import error_field

# ---------------------------------------------------------------------------------------------------- settings


@login_required
@require_http_methods(["GET", "POST"])
def embedding_settings(request):
    current = embedding_settings_get(user=request.user)
    initial = {"provider": current.provider}
    if current.provider != "deployment":
        initial.update(model=current.model, base_url=current.base_url, dimensions=current.dimensions)
    form = EmbeddingSettingsForm(posted(request), initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        fields = {
            "provider": data["provider"],
            "model": data["model"].strip(),
            "base_url": data["base_url"],
            "dimensions": data["dimensions"],
        }
        # Only a new key or an explicit clear touches the stored one.
        if data["clear_api_key"]:
            fields["api_key"] = ""
        elif data["api_key"]:
            fields["api_key"] = data["api_key"]
        try:
            saved = embedding_settings_set(user=request.user, **fields)
        except ApplicationError as exc:
            form.add_error(error_field(exc, form, "provider"), exc.message)
        else:
            note = "" if saved.model_key == current.model_key else " Your memories are being re-embedded."
            messages.success(request, f"Embedding settings saved.{note}")
            return redirect("memories:settings")
    context = {
        "form": form,
        "current": current,
        "deployment": deployment_config(),
        "counts": selectors.memory_embedding_counts(user=request.user),
    }
    return render(request, "memories/embedding_settings.html", context, status=400 if form.errors else 200)


# ---------------------------------------------------------------------------------------------------- chat page


@login_required
@require_GET
def chat_index_progress_view(request, chat_id: int):
    """'Recall index: X of Y messages indexed': polls itself every 2 s while anything is pending."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    progress = chat_index_progress(chat=chat)
    context = {"chat": chat, "progress": progress, "text_only": not config_for(request.user).enabled}
    return render(request, "memories/partials/index_progress.html", context)
