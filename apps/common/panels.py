"""A chat panel's small form: loaded into the page with htmx, posted when a choice changes (a chat's persona, its
lorebook, a group's reply order). One place for how it answers, so the three read and fail alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render

# The most of a field's errors a notice tells: an error may quote the value refused, and a notice is kept in the
# session until it is shown.
PROBLEM_CHARS = 300


def form_problem(form: forms.Form) -> str:
    """The form's errors, a field's at a time, for a notice."""
    said = []
    for field, errors in form.errors.items():
        text = " ".join(errors)
        said.append(f"{field}: {text if len(text) <= PROBLEM_CHARS else text[:PROBLEM_CHARS] + '…'}")
    return "; ".join(said)


def panel_form(
    request,
    *,
    form: forms.Form,
    save: Callable[[dict[str, Any]], Any],
    fresh: Callable[[Any], forms.Form],
    template: str,
    context: dict[str, Any],
    done: str,
    failed: str,
    back: str,
) -> HttpResponse:
    """GET: the form's fragment. POST: `save(cleaned_data)` when valid; an htmx POST answers the fragment again
    (`fresh(what save returned)` once saved, else the form with its errors, 400), another redirects to `back`
    saying `done`, or `failed` and why."""
    saved = False
    if request.method == "POST":
        if form.is_valid():
            form = fresh(save(form.cleaned_data))
            saved = True
        if not request.htmx:
            if saved:
                messages.success(request, done)
            else:
                messages.error(request, f"{failed}: {form_problem(form)}.")
            return redirect(back)
    status = 400 if request.method == "POST" and not saved else 200
    return render(request, template, {**context, "form": form, "saved": saved}, status=status)
