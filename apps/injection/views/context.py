"""The injection settings page (slots, depths, unified mode, macros, budgets, auto-tune, adaptive budgets, the last
trim statistics as a chart) and a chat's context preview (what would be injected for a message, written nowhere)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.services import settings_document_get
from apps.chats import selectors as chat_selectors
from apps.common.exceptions import ApplicationError
from apps.injection.selectors import injection_state_latest
from apps.injection.services.context import context_build
from apps.injection.services.settings import (
    DEFAULT_BUDGETS,
    MAX_BUDGET,
    SLOTS,
    TIERS,
    injection_settings_get,
    injection_settings_save,
)

FLAGS = ("unified", "force_macros", "auto_tune", "adaptive", "recall_messages")
NUMBERS = ("total_budget", "triggered_limit", "recent_messages")
CHART_WIDTH = 320
ROW_HEIGHT = 22


def _number(post, name: str, errors: dict[str, str]):
    raw = post.get(name, "").strip()
    try:
        return int(raw)
    except ValueError:
        errors[name] = "a whole number"
        return None


def _values(post) -> tuple[dict, dict[str, str]]:
    """The form as the settings namespace's shape (ranges are the service's to check)."""
    errors: dict[str, str] = {}
    values: dict = {name: post.get(name) == "on" for name in FLAGS}
    values["budget_mode"] = post.get("budget_mode", "advanced")
    for name in NUMBERS:
        values[name] = _number(post, name, errors)
    values["budgets"] = {tier: _number(post, f"budget_{tier}", errors) for tier in TIERS}
    values["slots"] = {
        slot.name: {
            "enabled": post.get(f"enabled_{slot.name}") == "on",
            "depth": _number(post, f"depth_{slot.name}", errors),
        }
        for slot in SLOTS
    }
    return values, errors


def chart(stats: dict) -> list[dict]:
    """Bars of the last build's trim statistics: each tier's full demand, what was injected, and its budget."""
    if not stats:
        return []
    scale = max(max(max(s.get("full", 0), s.get("budget", 0)) for s in stats.values()), 1)
    rows = []
    for tier in TIERS:
        item = stats.get(tier)
        if not item:
            continue
        rows.append(
            {
                "tier": tier.replace("_", " "),
                "y": ROW_HEIGHT * len(rows),
                **item,
                "full_w": round(CHART_WIDTH * item.get("full", 0) / scale, 1),
                "injected_w": round(CHART_WIDTH * item.get("injected", 0) / scale, 1),
                "budget_x": round(CHART_WIDTH * item.get("budget", 0) / scale, 1),
                "trimmed": item.get("full", 0) > item.get("injected", 0),
            }
        )
    return rows


def _chart_context(stats: dict) -> dict:
    rows = chart(stats)
    return {"chart": rows, "chart_width": CHART_WIDTH, "chart_height": ROW_HEIGHT * len(rows)}


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request):
    document = settings_document_get(user=request.user)
    current = injection_settings_get(user=request.user, document=document)
    values, error, field = current.as_document(), "", ""
    integrity = document.integrity
    if request.method == "POST":
        values, errors = _values(request.POST)
        try:
            seen = uuid.UUID(request.POST.get("integrity", ""))
            if errors:
                field, message = next(iter(errors.items()))
                raise ApplicationError(f"{field.replace('_', ' ')}: {message}.", {"field": field})
            injection_settings_save(user=request.user, values=values, integrity=seen)
        except ValueError:
            error = "The form was incomplete: reload the page."
        except ApplicationError as exc:
            field = str(exc.extra.get("field", ""))
            error = (
                "These settings were changed elsewhere since you opened this page: reload it to see them."
                if exc.status == 409
                else exc.message
            )
            integrity = settings_document_get(user=request.user).integrity if exc.status == 409 else integrity
        else:
            messages.success(request, "Injection settings saved.")
            return redirect("injection:settings")
    latest = injection_state_latest(user=request.user)
    context = {
        "values": values,
        "slots": SLOTS,
        "tiers": [(tier, DEFAULT_BUDGETS[tier]) for tier in TIERS],
        "max_budget": MAX_BUDGET,
        "integrity": integrity,
        "error": error,
        "error_field": field,
        "problems": current.problems,
        "latest": latest,
        **_chart_context(latest.stats if latest else {}),
    }
    return render(
        request, "injection/settings.html", context, status=409 if "elsewhere" in error else 400 if error else 200
    )


@login_required
@require_GET
def context_page(request, chat_id: int):
    """What the next generation would be given for a message (a preview: nothing is written)."""
    chat = chat_selectors.chat_get(user=request.user, chat_id=chat_id)
    characters = chat_selectors.chat_characters(chat=chat)
    message = request.GET.get("message", "").strip()
    built, error = None, ""
    if "message" in request.GET:
        try:
            built = context_build(
                user=request.user,
                chat=chat,
                message=message or None,
                character=request.GET.get("character") or None,
                preview=True,
            )
        except ApplicationError as exc:
            error = exc.message
    context = {"chat": chat, "characters": characters, "message": message, "built": built, "error": error}
    if built is not None:
        context |= _chart_context(built.stats)
    return render(request, "injection/context.html", context, status=400 if error else 200)
