"""The story page's pictures (apps/extraction/services/story_pictures/): the timeline of scenes and threads, zoomed
and paged through a window in the address, and the relationship graph. Their layouts keep every label inside the
drawing and clear of the others; what they read is the requesting user's; and in a real headless Chromium, at a
desktop's and a phone's width, the page of a 3,000-message chat fits the screen, zooms and pages without reloading,
and opens a scene from its band (screenshots in
var/test-artifacts/story-pictures-<width>*.png)."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.http import Http404

from apps.chats.models import Chat, Message
from apps.chats.services.chats import chat_create
from apps.common.exceptions import ApplicationError
from apps.extraction.models import Scene
from apps.extraction.services.story_pictures.geometry import Box, fit_text, text_width
from apps.extraction.services.story_pictures.graph import Relation, graph_layout
from apps.extraction.services.story_pictures.reads import arc_spans, relationship_readings, scene_spans
from apps.extraction.services.story_pictures.timeline import (
    MAX_LANES,
    NARROW,
    WIDE,
    Span,
    label_boxes,
    timeline_layout,
    timeline_nav,
    window_parse,
)
from apps.memories.models import Kind
from apps.memories.services.memories import memory_create, memory_supersede
from tests.browsers import ARTIFACTS, screenshot, session_cookie, watched_page
from tests.chats.factories import CharacterFactory

HX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "story-timeline"}
MESSAGES, SCENE_LENGTH = 3000, 20


def _clear(boxes: list[Box], width: float, height: float) -> None:
    """Every box inside the drawing, none overlapping another."""
    for box in boxes:
        assert box.inside(width, height), box
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)


def _scenes(count: int = MESSAGES // SCENE_LENGTH) -> list[Span]:
    return [
        Span(i * SCENE_LENGTH, (i + 1) * SCENE_LENGTH, f"The harbour at night, part {i + 1}", f"scene {i + 1}", ref=i)
        for i in range(count)
    ]


# ------------------------------------------------------------------------------------------------- geometry


def test_a_label_that_does_not_fit_is_cut_short_and_one_with_too_little_room_left_out():
    assert fit_text("rivals", 11, 200) == "rivals"
    short = fit_text("The forged seal of the harbour guild", 11, 80)
    assert short.endswith("…") and text_width(short, 11) <= 80
    assert fit_text("The forged seal", 11, 12) == ""


# ------------------------------------------------------------------------------------------------- timeline


def test_the_window_is_the_whole_chat_unless_asked_and_slides_back_inside_the_chat():
    assert window_parse(count=3000, start=None, end=None) == (0, 3000)
    assert window_parse(count=3000, start="500", end="1000") == (500, 1000)
    assert window_parse(count=3000, start="2900", end="3400") == (2500, 3000)  # kept 500 wide, inside the chat
    assert window_parse(count=3000, start="40", end="41") == (40, 50)  # at least ten messages
    assert window_parse(count=3000, start="5000", end=None) == (2990, 3000)
    assert window_parse(count=0, start=None, end=None) == (0, 0)


@pytest.mark.parametrize(
    ("start", "end", "field"), [("x", None, "from"), ("-5", "10", "from"), ("1", "2.5", "to"), ("100", "50", "to")]
)
def test_a_window_that_is_not_one_is_refused_naming_the_field(start, end, field):
    with pytest.raises(ApplicationError) as error:
        window_parse(count=3000, start=start, end=end)
    assert error.value.extra == {"field": field} and f"“{field}”" in error.value.message


def test_the_zoom_choices_keep_the_middle_and_the_pages_step_a_window_at_a_time():
    nav = timeline_nav(count=3000, start=1000, end=1500)
    assert [(z["label"], z["start"], z["end"], z["current"]) for z in nav["zooms"]] == [
        ("Whole chat", 0, 3000, False),
        ("500 messages", 1000, 1500, True),
        ("100 messages", 1200, 1300, False),
    ]
    assert nav["earlier"] == (500, 1000) and nav["later"] == (1500, 2000)
    first = timeline_nav(count=3000, start=0, end=100)
    assert first["earlier"] is None and first["later"] == (100, 200)
    assert timeline_nav(count=3000, start=2950, end=3000)["later"] is None
    assert [z["label"] for z in timeline_nav(count=80, start=0, end=80)["zooms"]] == ["Whole chat"]


@pytest.mark.parametrize("width", [WIDE, NARROW])
@pytest.mark.parametrize(("start", "end"), [(0, 3000), (1000, 1500), (1230, 1330), (0, 10)])
def test_the_timelines_labels_stay_inside_and_clear_of_each_other(width, start, end):
    arcs = [
        Span(100 * i, 100 * i + 900, f"Thread number {i}: who forged the harbour seal", "t", kind="open", ref=i)
        for i in range(20)
    ]
    layout = timeline_layout(start=start, end=end, scenes=_scenes(), arcs=arcs, width=width)
    _clear(label_boxes(layout), layout["width"], layout["height"])
    bars = [Box(b["x"], b["y"], b["w"], b["h"]) for b in layout["bars"]]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(bars, 2))  # threads in lanes, none over another
    assert all(tick["x"] <= width for tick in layout["ticks"]) and any(tick["label"] for tick in layout["ticks"])


def test_the_scenes_are_consecutive_bands_named_where_the_name_fits():
    whole = timeline_layout(start=0, end=3000, scenes=_scenes(), arcs=[], width=WIDE)
    bands = whole["bands"]
    assert len(bands) == 150 and all(abs(a["x"] + a["w"] - b["x"]) < 0.2 for a, b in itertools.pairwise(bands))
    assert not any(band["label"] for band in bands)  # 4.7 units each: no name fits, each keeps its tooltip
    close = timeline_layout(start=1000, end=1100, scenes=_scenes(), arcs=[], width=WIDE)
    assert [band["ref"] for band in close["bands"]] == [50, 51, 52, 53, 54]
    assert close["bands"][0]["label"].startswith("The harbour at night")
    assert timeline_layout(start=1000, end=1100, scenes=_scenes(), arcs=[], width=NARROW)["bands"][0]["label"]


def test_threads_beyond_the_lanes_are_counted_not_drawn_over_each_other():
    arcs = [Span(0, 3000, f"Thread {i}", "t", kind="open", ref=i) for i in range(MAX_LANES + 3)]
    layout = timeline_layout(start=0, end=3000, scenes=[], arcs=arcs, width=NARROW)
    assert len(layout["bars"]) == MAX_LANES and layout["left_out"] == 3


# ---------------------------------------------------------------------------------------------------- graph


def _relations(names: list[str]) -> list[Relation]:
    words = ("rivals", "wary", "devoted", "suspicious of", "owes a debt to")
    return [
        Relation(a, b, (words[i % 5], "curious"), 0.5 + (i % 5) / 10, f"{a} → {b}", i)
        for i, (a, b) in enumerate(itertools.permutations(names, 2))
    ]


@pytest.mark.parametrize("count", [2, 3, 4, 6, 8, 12])
def test_the_graphs_labels_stay_inside_clear_of_the_characters_and_each_other(count):
    names = ["Mira", "Rowan", "Corvin the Harbourmaster of Hollin", "Ash", "Tess", "Bram", "Odile", "Quill"]
    names += ["Sable", "Wren", "Fenwick", "Ysolde"]
    layout = graph_layout(relations=_relations(names[:count]))
    assert len(layout["nodes"]) == count and len(layout["edges"]) == count * (count - 1)
    boxes = [node[key] for node in layout["nodes"] for key in ("disc", "box")]
    boxes += [edge["box"] for edge in layout["edges"] if edge["box"]]
    _clear(boxes, layout["width"], layout["height"])
    for edge in layout["edges"]:
        assert all(0 <= edge[k] <= layout["width"] for k in ("x1", "x2"))
        assert all(0 <= edge[k] <= layout["height"] for k in ("y1", "y2"))
    if count <= 3:  # room for every label
        assert layout["unlabelled"] == 0
    assert sum(1 for edge in layout["edges"] if edge["label"]) >= min(count * (count - 1), 6)


def test_a_pair_feeling_for_each_other_has_two_arrows_each_labelled_with_words_and_confidence():
    layout = graph_layout(
        relations=[
            Relation("Mira", "Rowan", ("wary", "curious"), 0.72, "Mira → Rowan: wary, curious", 1),
            Relation("Rowan", "Mira", ("protective",), 0.8, "Rowan → Mira: protective", 2),
        ]
    )
    first, second = layout["edges"]
    assert first["label"] == "wary, curious · 0.7" and second["label"] == "protective · 0.8"
    assert (first["y1"], first["y2"]) != (second["y1"], second["y2"])  # drawn side by side, not over each other
    long = graph_layout(
        relations=[Relation("Mira", "Corvin", ("the one she suspects of forging the seal",), 0.9, "whole", 3)]
    )
    label = long["edges"][0]["label"]
    assert label.endswith("· 0.9") and len(label) < 30 and long["edges"][0]["title"] == "whole"
    assert graph_layout(relations=[Relation("Mira", "Mira", ("proud",), 0.5, "", 4)])["nodes"] == []


# -------------------------------------------------------------------------------------------- what they read


def long_story(user) -> Chat:
    """A 3,000-message chat of Mira and Corvin with Rowan: 150 scenes of 20 messages, threads open and settled (one
    read in another chat), and relationship readings both ways."""
    mira = CharacterFactory(user=user, name="Mira")
    corvin = CharacterFactory(user=user, name="Corvin")
    chat = chat_create(
        user=user, title="The harbour, at length", character_ids=[mira.pk, corvin.pk], user_name="Rowan"
    )
    Message.objects.bulk_create(
        Message(chat=chat, index=i, name="Rowan" if i % 2 else "Mira", is_user=bool(i % 2), mes=f"Line {i}.")
        for i in range(MESSAGES)
    )
    Chat.objects.filter(pk=chat.pk).update(message_count=MESSAGES)
    chat.refresh_from_db()
    Scene.objects.bulk_create(
        Scene(
            user=user,
            chat=chat,
            start_index=i * SCENE_LENGTH,
            end_index=(i + 1) * SCENE_LENGTH,
            name="" if i % 3 else f"The harbour, night {i + 1}",
            recap_versions=[{"version": 1, "content": f"Recap of scene {i}.", "created_at": "", "llm_call": None}],
        )
        for i in range(MESSAGES // SCENE_LENGTH - 1)  # the last 20 messages: the scene going on
    )

    def arc(content, sources, **fields):
        return memory_create(
            user=user, kind=Kind.ARC, content=content, chat=chat, source_message_indices=sources, **fields
        )

    thread = arc("Find out who forged the harbour seal.", range(120, 220), data={"status": "open"})
    settled = arc(
        "Corvin confessed to forging the seal.",
        range(1400, 1500),
        data={"status": "resolved", "thread": thread.content},
        valid_from=1400,
    )
    memory_supersede(old=thread, new=settled)
    arc("Recover the brass key from the warehouse.", range(900, 1000), data={"status": "open"})
    arc("Learn what drowned Hollin.", range(2300, 2400), data={"status": "open"})
    arc("Pay Tess back.", [2000], data={"status": "open"}, valid_to=2600)
    other = chat_create(user=user, title="Elsewhere", character_ids=[mira.pk])
    memory_create(
        user=user,
        kind=Kind.ARC,
        content="A thread of another chat.",
        character=mira,
        source_chat=other,
        source_message_indices=[5],
        data={"status": "open"},
    )

    def reading(source, target, descriptors, confidence, **owner):
        pair = [source.lower(), target.lower()]
        text = f"{source} → {target}: " + ", ".join(f"{d} ({m})" for d, m in descriptors)
        return memory_create(
            user=user,
            kind=Kind.RELATIONSHIP,
            content=text,
            confidence=confidence,
            source_chat=chat,
            entities=[{"name": source, "type": "character"}, {"name": target, "type": "character"}],
            data={"pair": pair, "descriptors": [list(d) for d in descriptors], "history": True},
            **owner,
        )

    reading("Mira", "Rowan", [("curious", "medium"), ("wary", "high")], 0.7, character=mira)
    reading("Rowan", "Mira", [("protective", "high")], 0.8, chat=chat)
    reading("Corvin", "Mira", [("rivals", "high")], 0.85, character=corvin)
    reading("Mira", "Corvin", [("distrustful", "high"), ("afraid", "low")], 0.6, character=mira)
    reading("Corvin", "Rowan", [("contemptuous", "medium")], 0.55, character=corvin)
    reading("Mira", "Ash", [("fond", "medium")], 0.9, character=mira)
    return chat


@pytest.mark.django_db
def test_the_scenes_are_read_in_order_with_the_scene_going_on_last(user):
    chat = long_story(user)
    spans = scene_spans(user=user, chat=chat)
    assert len(spans) == 150 and spans[0].label == "The harbour, night 1" and spans[1].label == "Scene 2"
    assert spans[1].title == "Scene 2 · messages #20–#39"
    assert (spans[-1].kind, spans[-1].start, spans[-1].end, spans[-1].ref) == ("gap", 2980, 3000, None)


@pytest.mark.django_db
def test_a_settled_thread_spans_from_where_it_was_raised_and_an_open_one_to_the_chats_end(user):
    chat = long_story(user)
    spans = {span.label: span for span in arc_spans(user=user, chat=chat)}
    settled = spans["Find out who forged the harbour seal."]
    assert (settled.kind, settled.start, settled.end) == ("settled", 120, 1500)
    assert "Corvin confessed" in settled.title
    key = spans["Recover the brass key from the warehouse."]
    assert (key.kind, key.start, key.end, key.ongoing) == ("open", 900, 3000, True)
    debt = spans["Pay Tess back."]
    assert (debt.start, debt.end, debt.ongoing) == (2000, 2600, False)
    assert "A thread of another chat." not in spans  # numbered by another chat's messages


@pytest.mark.django_db
def test_the_readings_are_the_current_one_of_each_pair_with_names_as_written(user):
    chat = long_story(user)
    readings = relationship_readings(user=user, chat=chat)
    pairs = [(r["source"], r["target"], r["descriptors"]) for r in readings]
    assert ("Mira", "Rowan", ("wary", "curious")) in pairs  # the strongest first
    assert ("Corvin", "Mira", ("rivals",)) in pairs and ("Mira", "Ash", ("fond",)) in pairs
    assert len(pairs) == 6
    stranger = get_user_model().objects.create_user(username="carol", password="x")
    with pytest.raises(Http404):
        relationship_readings(user=stranger, chat=chat)


@pytest.mark.django_db
def test_an_imported_reading_and_one_told_only_in_its_text_are_drawn_too(user):
    mira = CharacterFactory(user=user, name="Mira")
    chat = chat_create(user=user, title="Imported", character_ids=[mira.pk], user_name="Rowan")
    memory_create(
        user=user,
        kind=Kind.RELATIONSHIP,
        content="Mira -> Rowan: trusting, warm (strong)",
        character=mira,
        data={"history": True, "subject": "Mira", "target": "Rowan", "descriptors": ["trusting", "warm"]},
    )
    memory_create(
        user=user,
        kind=Kind.RELATIONSHIP,
        content="Rowan → Mira: grateful; loyal",
        character=mira,
        data={"descriptors": [[], {"odd": 1}]},  # a shape nobody writes: read from the text instead
    )
    memory_create(user=user, kind=Kind.RELATIONSHIP, content="Mira likes the sea.", character=mira)  # no pair
    readings = relationship_readings(user=user, chat=chat)
    assert [(r["source"], r["target"], r["descriptors"]) for r in readings] == [
        ("Mira", "Rowan", ("trusting", "warm")),
        ("Rowan", "Mira", ("grateful", "loyal")),
    ]


# ---------------------------------------------------------------------------------------------------- the page


@pytest.mark.django_db
def test_the_story_page_draws_the_timeline_of_the_window_asked_for_and_the_graph(web, user):
    chat = long_story(user)
    page = web.get(f"/chats/{chat.pk}/story/?from=1000&to=1100").content.decode()
    assert "Messages #1000–#1099 of 3000 · 5 scenes · 2 threads" in page
    assert page.count('<svg class="story-timeline-svg story-timeline-') == 2
    scene = Scene.objects.get(chat=chat, start_index=1000)
    assert f'<a href="#scene-{scene.pk}" tabindex="-1" class="scene-link">' in page
    story = f"/chats/{chat.pk}/story/"
    assert f'<a rel="prev" href="{story}?from=900&amp;to=1000" hx-get="{story}?from=900&amp;to=1000">' in page
    assert '<strong aria-current="true">100 messages</strong>' in page
    assert '<svg class="relgraph"' in page and 'marker-end="url(#rel-arrow)"' in page
    assert "Corvin → Mira</a>: rivals · confidence 0.85" in page  # the list in words
    assert ">wary, curious · 0.7</text>" in page


@pytest.mark.django_db
def test_zooming_by_htmx_answers_the_timeline_alone(web, user):
    chat = long_story(user)
    response = web.get(f"/chats/{chat.pk}/story/?from=0&to=500", **HX)
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<section class="card story-timeline" id="story-timeline"')
    assert "<html" not in fragment and "Relationships" not in fragment
    assert "Messages #0–#499 of 3000" in fragment
    restore = web.get(f"/chats/{chat.pk}/story/?from=0&to=500", **HX, HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in restore.content.decode()  # the back button, htmx's cache missing: the whole page


@pytest.mark.django_db
def test_a_window_that_is_not_one_answers_400_naming_the_field_with_the_whole_chat(web, user):
    chat = long_story(user)
    response = web.get(f"/chats/{chat.pk}/story/?from=soon&to=500")
    assert response.status_code == 400
    page = response.content.decode()
    assert "“from” must be a message number" in page and "Messages #0–#2999 of 3000" in page
    fragment = web.get(f"/chats/{chat.pk}/story/?from=600&to=500", **HX)
    assert fragment.status_code == 400 and "“to” must be after “from”." in fragment.content.decode()


@pytest.mark.django_db
def test_another_users_story_is_not_found_and_an_empty_chat_has_no_timeline(web, user, other_user):
    theirs = chat_create(user=other_user, title="Theirs")
    assert web.get(f"/chats/{theirs.pk}/story/").status_code == 404
    assert web.get(f"/chats/{theirs.pk}/story/?from=0&to=10", **HX).status_code == 404
    mine = chat_create(user=user, title="Empty")
    page = web.get(f"/chats/{mine.pk}/story/").content.decode()
    assert "No messages yet: the timeline is drawn once the chat has some." in page
    assert "No relationship read yet" in page


# --------------------------------------------------------------------------------------------- in a browser

OVERLAPS = """(selector) => {
    const svg = [...document.querySelectorAll(selector)].find((s) => s.getBoundingClientRect().width > 0);
    if (!svg) return "no drawing shown";
    const frame = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll("text")].map((t) => t.getBoundingClientRect());
    for (const box of boxes) {
        if (box.left < frame.left - 0.5 || box.right > frame.right + 0.5) return "a label outside the drawing";
    }
    for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i], b = boxes[j];
            const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
            const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
            if (x > 0.5 && y > 0.5) return "overlap: " + svg.querySelectorAll("text")[i].textContent + " / "
                + svg.querySelectorAll("text")[j].textContent;
        }
    }
    return boxes.length;
}"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
def test_a_long_storys_pictures_fit_zoom_page_and_open_a_scene(browser, live_server, client, user):
    chat = long_story(user)
    cookie = session_cookie(client, user)
    for width in (1100, 390):
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}/chats/{chat.pk}/story/")
        timeline = page.locator("#story-timeline")
        assert "Messages #0–#2999 of 3000 · 149 scenes" in timeline.inner_text()
        variant = "wide" if width > 640 else "narrow"
        assert page.locator(f"svg.story-timeline-{variant}").is_visible()
        assert not page.locator(f"svg.story-timeline-{'narrow' if variant == 'wide' else 'wide'}").is_visible()
        assert isinstance(page.evaluate(OVERLAPS, "svg.story-timeline-svg"), int)
        labels = page.evaluate(OVERLAPS, "svg.relgraph")
        assert isinstance(labels, int) and labels >= 6, labels
        screenshot(page, f"story-pictures-{width}")
        page.locator("#relationships").screenshot(
            path=str(ARTIFACTS / f"story-pictures-{width}-relationships.png"), caret="initial"
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= width

        timeline.get_by_role("link", name="100 messages").click()
        page.wait_for_url("**from=1450&to=1550")
        assert "Messages #1450–#1549 of 3000" in page.locator("#timeline-window").inner_text()
        assert isinstance(page.evaluate(OVERLAPS, "svg.story-timeline-svg"), int)
        page.locator("#story-timeline").get_by_role("link", name="Later →").click()
        page.wait_for_url("**from=1550&to=1650")
        assert page.locator("#timeline-window").inner_text().startswith("Messages #1550–#1649")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, f"story-pictures-{width}-zoomed")

        page.go_back()  # htmx put the window in the address: the back button goes to the one before
        page.wait_for_url("**from=1450&to=1550")
        assert page.locator("#timeline-window").inner_text().startswith("Messages #1450–#1549")

        scene = Scene.objects.get(chat=chat, start_index=1460)
        page.locator(f"svg.story-timeline-{variant} a[href='#scene-{scene.pk}'] rect").click()
        page.wait_for_url(f"**#scene-{scene.pk}")
        assert page.locator(f"#scene-{scene.pk} > details").get_attribute("open") is not None
        assert page.errors == []
        page.context.close()
