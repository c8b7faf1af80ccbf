"""The recall graph in a real headless Chromium (Debian's package, through Playwright), at a desktop's and a phone's
width: the labels as the browser measures them overlap neither each other nor a node, and all lie inside the drawing;
the page is no wider than the screen and the console holds no error. Screenshots in var/test-artifacts/
(recall-graph-<nodes>-<width>.png)."""

from __future__ import annotations

import pytest

from apps.chats.models import Message
from tests.browsers import ARTIFACTS, session_cookie, watched_page
from tests.chats.factories import add_messages

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1100, 390)
SAID = "the lantern went out at midnight when old Corvin climbed the tower with a single match".split()
NAMES = ["Mira", "Old Corvin of the Lantern Tower", "Biscuit", "Wolfgang Wilhelm Weissmüller", "X", "The Seal"]

# Every label's and node's box in the drawing's own units, and the drawing's size.
MEASURE = """svg => {
  const box = e => { const b = e.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
  return {
    width: svg.viewBox.baseVal.width,
    height: svg.viewBox.baseVal.height,
    labels: [...svg.querySelectorAll('g.node text')].map(t => [t.textContent, ...box(t)]),
    nodes: [...svg.querySelectorAll('g.node circle')].map(box),
  };
}"""


def record(memories: int, entities: int) -> dict:
    nodes = [
        {"id": f"m{i}", "type": "memory", "label": " ".join(SAID[(i + j) % len(SAID)] for j in range(14))}
        for i in range(memories)
    ]
    nodes += [{"id": f"e{i}", "type": "entity", "label": NAMES[i % len(NAMES)]} for i in range(entities)]
    edges = [{"source": f"m{i % memories}", "target": f"e{i}", "kind": "mentions"} for i in range(entities)]
    return {"injectionText": "Recalled.", "memories": [], "subgraph": {"nodes": nodes, "edges": edges}}


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("memories, entities", [(3, 2), (20, 20)])
def test_the_labels_the_browser_draws_neither_overlap_nor_leave_the_drawing(
    browser, live_server, client, user, mira_chat, memories, entities
):
    add_messages(mira_chat, 2)
    Message.objects.filter(chat=mira_chat, index=1).update(extra={"bme_recall": record(memories, entities)})
    cookie = session_cookie(client, user)
    for width in WIDTHS:
        page = watched_page(browser, width, live_server, cookie)
        page.goto(f"{live_server.url}/chats/{mira_chat.pk}/")
        card = page.locator("#recall-slot-1 details.recall-card")
        card.locator("> summary").click()
        card.get_by_role("button", name="Show the graph").click()
        svg = page.locator("#recall-graph-1 svg.subgraph")
        svg.wait_for()
        drawn = svg.evaluate(MEASURE)
        assert len(drawn["labels"]) == memories + entities
        for i, (text, *box) in enumerate(drawn["labels"]):
            assert box[0] >= 0 and box[1] >= 0 and box[2] <= drawn["width"] and box[3] <= drawn["height"], text
            for other, *other_box in drawn["labels"][i + 1 :]:
                assert not overlap(box, other_box), (text, other)
            assert sum(overlap(box, node) for node in drawn["nodes"]) == 0, text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("#recall-graph-1 figure").screenshot(
            path=str(ARTIFACTS / f"recall-graph-{memories + entities}-{width}.png"), caret="initial"
        )
        assert svg.bounding_box()["width"] <= width
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert page.errors == []
        page.context.close()
