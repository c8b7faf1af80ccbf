"""Texts a person (or their model) can send that a read took the square of their length or more over (a pattern
that backtracked, a string scanned again for each character): each read of them must take linear time.

Each text below is one that took minutes or longer with the pattern it replaced (a run of blank lines or spaces that
every split of was tried). A read of it runs in a forked child, which is killed past DEADLINE seconds: a read that
went back to backtracking fails here instead of wedging a web or Celery worker. The deadline is a guard, not a speed
figure: each read takes milliseconds."""

from __future__ import annotations

import multiprocessing
import queue

import pytest

from apps.chats.models import Character
from apps.chats.services.characters import extra_books_clean
from apps.extraction.services.parsing.memories import parse_relationship
from apps.extraction.services.parsing.profiles import parse_profiles
from apps.extraction.services.scene_breaks import SceneState, cue
from apps.extraction.services.story_pictures.reads import arrow_read
from apps.extraction.services.transcript import Line as TranscriptLine
from apps.gateway.services.match import character_named
from apps.gateway.services.request import Line
from apps.generation.services.prompt import _examples
from apps.llm.client import UnreadableAnswer
from apps.llm.thinking import strip_thinking
from apps.lorebooks.forms import _keys
from apps.memories.services.lifecycle.consolidation import parse_merges
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
    try:  # read before joining: a child whose answer is larger than the pipe holds ends only once it is read
        return answers.get(timeout=DEADLINE)
    except queue.Empty:
        pytest.fail(f"{read.__name__} was still reading after {DEADLINE} s")
    finally:
        child.kill()
        child.join()


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


def test_lorebook_keys_of_spaces_and_slashes_are_read_in_time():
    assert _read_in_time(_keys, "x," + " " * 300_000 + "/" * 300_000) == ["x", "/" * 300_000]
    assert _keys("a, /b,c/i, d\\,e") == ["a", "/b,c/i", "d\\", "e"]


def test_additional_lorebooks_of_many_names_are_read_in_time():
    names = [f"Book {n}" for n in range(300_000)]
    assert _read_in_time(extra_books_clean, names + [" Book 1 ", ""]) == names


def test_a_models_relationship_line_of_arrows_or_spaces_is_read_in_time():
    assert _read_in_time(parse_relationship, "a" + " ->" * 100_000 + "x") is None
    assert _read_in_time(parse_relationship, "Mira -> Rowan: warm" + SPACES + "(x") is None
    line = parse_relationship(" Mira => Rowan : warm (high), wary ( low ), odd")
    assert (line.source, line.target, line.descriptors) == ("Mira", "Rowan", [("warm", "high"), ("wary", "low")])
    assert parse_relationship("Mira: -> Rowan: warm (high)") is None
    matrix = "<relationship_matrix>\n" + "a" + " ->" * 50_000 + "\nMira -> Rowan: trusts her [confidence: 0.8]\n"
    (section,) = [item for item in _read_in_time(parse_profiles, matrix).items if item.relationships]
    assert section.relationships == [{"source": "Mira", "target": "Rowan", "text": "trusts her", "confidence": 0.8}]


def test_a_consolidation_answer_of_spaces_is_read_in_time():
    def unreadable(text):
        try:
            parse_merges(text, [])
        except UnreadableAnswer:
            return True
        return False

    assert _read_in_time(unreadable, "x" + " " * 300_000 + "y")
    assert parse_merges('```json\n{"merges": []}\n```', []) == []


@pytest.mark.parametrize("text", ["<think>" * 30_000, "<think " * 100_000, "<think<thinking>" * 20_000])
def test_a_models_answer_of_unclosed_think_tags_is_read_in_time(text):
    answer, reasoning = _read_in_time(strip_thinking, text + "Hello.")
    assert (answer or reasoning).endswith("Hello.")  # a block never closed is all reasoning
    assert strip_thinking("<think>hm</think>Hi <thinking>a</thinking>there") == ("Hi there", "hm\n\na")
