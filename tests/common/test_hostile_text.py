"""Texts a person (or their model) can send that made a pattern backtrack: each read of them must take linear time.

Each text below is one that took minutes or longer with the pattern it replaced (a run of blank lines or spaces that
every split of was tried). A read of it runs in a forked child, which is killed past DEADLINE seconds: a read that
went back to backtracking fails here instead of wedging a web or Celery worker. The deadline is a guard, not a speed
figure: each read takes milliseconds."""

from __future__ import annotations

import multiprocessing

import pytest

from apps.chats.models import Character
from apps.extraction.services.scene_breaks import SceneState, cue
from apps.extraction.services.story_pictures.reads import arrow_read
from apps.extraction.services.transcript import Line as TranscriptLine
from apps.gateway.services.match import character_named
from apps.gateway.services.request import Line
from apps.generation.services.prompt import _examples
from apps.sync.services.daily import bullets

DEADLINE = 30
BLANK = "\n" * 100_000
SPACES = " " * 100_000


def _read_in_time(read, *args, **kwargs):
    """What `read(*args, **kwargs)` answers, read in a forked child within DEADLINE seconds."""
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=lambda: answers.put(read(*args, **kwargs)), daemon=True)
    child.start()
    child.join(DEADLINE)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"{read.__name__} was still reading after {DEADLINE} s")
    return answers.get(timeout=5)


def test_a_daily_memory_of_a_bullet_mark_and_spaces_is_read_in_time():
    assert _read_in_time(bullets, "-" + SPACES + "\nx") == ["-", "x"]
    assert bullets("- one [chat:a]\n  * two\n•\tthree\n-four\n\n- \n") == [
        "one [chat:a]",
        "two",
        "three",
        "-four",
        "-",
    ]


def test_a_gateway_system_prompt_of_blank_lines_is_read_in_time():
    assert _read_in_time(character_named, [Line("system", BLANK + "Scenario.")]) == ""
    assert character_named([Line("system", "A story.\n\n  [Character: Mira]\nMore.")]) == "Mira"
    assert character_named([Line("system", "Name:\nMira")]) == "Mira"


def test_example_messages_of_blank_lines_are_read_in_time():
    blank = "\n" * 400_000  # a split of it was a fifth as slow as the other reads: taken four times as long
    assert _read_in_time(_examples, Character(name="Mira", mes_example=blank + "x")).endswith("\n\nx")
    text = _examples(Character(name="Mira", mes_example="<START>\nA.\n\n  <start>  \r\nB.\n<START> not alone"))
    assert text.split("\n\n")[1:] == ["A.", "B.\n<START> not alone"]


@pytest.mark.parametrize(
    ("text", "found"),
    [(BLANK, ""), ("*" + BLANK, ""), ("#" + SPACES, ""), ("[" + BLANK, ""), (("-" + "\n" * 100) * 1000, "marker")],
)
def test_a_message_of_blank_lines_is_read_for_a_scene_break_in_time(text, found):
    assert _read_in_time(cue, TranscriptLine(0, "Mira", False, False, text), SceneState(0), group=False) == found


@pytest.mark.parametrize(
    ("text", "marker"),
    [("***", True), ("  - - -", True), ("Later.\n\n## The road", True), ("[ Scene break ]", True),
     ("Chapter 3.", True), ("a --- b", False), ("Parting words.", False), ("chapters", False)],
)  # fmt: skip
def test_scene_break_markers_are_read_as_before(text, marker):
    assert (cue(TranscriptLine(0, "Mira", False, False, text), SceneState(0), group=False) == "marker") is marker


def test_a_relationship_text_of_spaces_is_read_in_time():
    assert _read_in_time(arrow_read, "Mira -> " + SPACES + "Rowan") is None
    assert _read_in_time(arrow_read, "Mira" + SPACES + "Rowan") is None
    assert arrow_read("  Mira -> Rowan : wary; fond") == ("Mira", "Rowan", "wary; fond")
    assert arrow_read("Mira → Rowan: trust") == ("Mira", "Rowan", "trust")
    assert arrow_read("Mira: → Rowan: trust") is None
    assert arrow_read("Mira > Rowan: trust") is None
