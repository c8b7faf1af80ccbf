"""The memory browser's growth chart: active memories per day, loaded into the page by htmx once it is shown (the
page itself stays as quick as its list). Scoped as the page is: all of a person's memories, a character's, a chat's."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.common.charts import day_chart
from apps.memories.selectors import memory_growth

TEMPLATE = "memories/partials/growth_chart.html"
# ?span=: the days drawn (None: since the first memory), and how the choice is named on the page.
SPANS = {"30": (30, "30 days"), "90": (90, "90 days"), "all": (None, "since the first")}


@login_required
@require_GET
def memory_growth_chart(request, character_id: int | None = None, chat_id: int | None = None):
    span = request.GET.get("span", "30")
    context = {"spans": [(key, label) for key, (_, label) in SPANS.items()], "span": span, "path": request.path}
    if span not in SPANS:
        context["error"] = "Span: choose 30 days, 90 days or since the first memory."
        return render(request, TEMPLATE, context, status=400)
    growth = memory_growth(user=request.user, character_id=character_id, chat_id=chat_id, days=SPANS[span][0])
    context["growth"] = growth
    if growth.ever:
        context["chart"] = day_chart(growth.days, {"active": growth.active})
    return render(request, TEMPLATE, context)
