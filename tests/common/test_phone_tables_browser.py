"""The pages built around a table (chats, model connections and calls, injection settings, a chat's context
preview, memories, devices and backups) in a real headless Chromium at a phone's and a desktop's width, with data
long enough to stretch them: no page scrolls sideways, and on the phone each table row reads as a card whose cells
name their column. Screenshots in var/test-artifacts/ (tables-<page>-<width>.png)."""

from __future__ import annotations

import pytest

from apps.archives.models import Backup
from apps.chats.services.chats import chat_create
from apps.injection.services.context import context_build
from apps.llm.models import Call
from apps.llm.services import connection_create
from apps.memories.services.memories import memory_create
from apps.memories.services.schema import chat_schema_ensure
from apps.sync.services.instances import instance_register
from tests.browsers import screenshot, session_cookie, watched_page
from tests.injection.helpers import ASK, DOG, say

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PHONE, DESKTOP = 390, 1100
LONG_TITLE = "The long night at the harbour lighthouse, when the keeper's old dog waited for the last ferry home"
# SillyTavern names an imported chat after its file: one long word, nowhere to break it.
FILE_TITLE = "Mira_-_2024-05-11@18h42m03s_harbour_lighthouse_continued_from_the_previous_branch"
LONG_URL = "http://gpu-box-in-the-cupboard.local:11434/openai/compatible/api/v1/with/a/proxy/prefix/in/front"


@pytest.fixture
def seeded(user, character, scripted):
    """A chat of a few messages under a long title (and one under a file name), a model connection with a long base
    URL and its calls, memories, the context built once (for the trim statistics), two devices and two backups."""
    story = chat_create(user=user, title=LONG_TITLE, character_ids=[character.pk], user_name="Rowan")
    chat_schema_ensure(chat=story)
    chat_create(user=user, title=FILE_TITLE, character_ids=[character.pk], user_name="Rowan")
    say(story, ("Mira", "Welcome back. The lamp has been lit since dusk."), ("Rowan", "Any news of the ferry?"))
    say(story, ("Mira", "Not a word since the storm."), ("Rowan", ASK))
    memory_create(user=user, kind="fact", content=DOG, character=character, importance=3, origin="extraction")
    memory_create(
        user=user,
        kind="event",
        content="Rowan came back to the harbour after three years away and found the lighthouse dark. " * 3,
        chat=story,
        origin="extraction",
    )
    connection = connection_create(
        user=user, name="Home GPU", base_url=LONG_URL, model="qwen2.5-32b-instruct-q4_k_m", api_key="sk-local-0000abcd"
    )
    Call.objects.create(
        user=user,
        connection=connection,
        purpose="extraction",
        template="extraction.facts_and_events@3",
        model=connection.model,
        status="ok",
        prompt_tokens=5321,
        completion_tokens=812,
        latency_ms=18342,
        response='{"facts": [{"content": "' + DOG + '", "importance": 3, "entities": ["Biscuit"]}]} ' * 3,
    )
    Call.objects.create(
        user=user,
        connection=connection,
        purpose="consolidation",
        template="lifecycle.consolidate@2",
        model=connection.model,
        status="error",
        attempts=3,
        latency_ms=60000,
        error=f"Cannot reach {LONG_URL}/chat/completions: connection refused after 3 attempts (timed out after 60 s)",
    )
    context_build(user=user, chat=story, message=ASK)
    instance_register(user=user, key="sillytavern-desktop-livingroom-2024", name="SillyTavern on the desktop")
    instance_register(user=user, key="phone", name="Phone", kind="phone", priority=10)
    Backup.objects.create(
        user=user, kind="backup", trigger="manual", state="done", size=48213, counts={"chats": 2, "memories": 2}
    )
    Backup.objects.create(
        user=user,
        kind="import",
        trigger="upload",
        state="failed",
        error="The archive has no manifest.json: is it a Lorekeeper archive?",
    )
    return story


def _pages(story) -> dict[str, str]:
    return {
        "chats": "/chats/",
        "models": "/llm/",
        "calls": "/llm/calls/",
        "injection": "/memories/injection/",
        "context": f"/chats/{story.pk}/context/?message=Tell+me+about+the+dog",
        "memories": "/memories/",
        "devices": "/devices/",
    }


def _over(page, width: int) -> int:
    return page.evaluate("document.documentElement.scrollWidth") - width


# Each body cell whose column has a heading carries that heading as its data-label (the phone's cards show it).
UNLABELLED = """() => [...document.querySelectorAll('main table')].flatMap(table => {
    const heads = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
    return [...table.querySelectorAll('tbody tr')].flatMap(row =>
        [...row.cells].filter((cell, i) => heads[i] && cell.dataset.label !== heads[i])
            .map(cell => cell.textContent.trim().slice(0, 30)));
})"""
HEADS_SHOWN = "() => [...document.querySelectorAll('main table thead')].map(head => head.offsetParent !== null)"


def test_table_pages_fit_a_phone_as_cards_and_keep_their_desktop_table(browser, live_server, client, user, seeded):
    cookie = session_cookie(client, user)
    too_wide, problems = {}, []
    for width in (PHONE, DESKTOP):
        page = watched_page(browser, width, live_server, cookie)
        for name, path in _pages(seeded).items():
            page.goto(f"{live_server.url}{path}")
            if name == "devices":
                page.locator("#backups table").wait_for()  # the backups card arrives after the page
            screenshot(page, f"tables-{name}-{width}")
            if (over := _over(page, width)) > 0:
                too_wide[f"{name} at {width}"] = over
            if name == "chats":  # the import form, folded above the table, fits once opened too
                page.get_by_text("Import a chat").click()
                if (over := _over(page, width)) > 0:
                    too_wide[f"chats' import form at {width}"] = over
            if unlabelled := page.evaluate(UNLABELLED):
                problems.append(f"{name}: cells without their column's label: {unlabelled}")
            # The desktop shows its tables' header rows; on the phone, where rows are cards, they are hidden.
            heads = page.evaluate(HEADS_SHOWN)
            if heads and set(heads) != {width == DESKTOP}:
                problems.append(f"{name} at {width}: table header rows shown: {heads}")
        problems += [f"console at {width}: {error}" for error in page.errors]
        page.context.close()
    assert not too_wide and not problems, f"wider than the screen by (px): {too_wide}; {problems}"
