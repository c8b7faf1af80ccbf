"""The think-block stripper: every model answer passes through it before a parser sees it. Thoughts in the text
(tags, harmony channels) and in a field beside it (reasoning_content, reasoning, thinking) end up in the reasoning;
the answer keeps only what the model meant to say."""

import pytest

from apps.llm.thinking import REASONING_KEPT, ThinkFilter, split_message, strip_thinking

# ------------------------------------------------------------------------------------------------ text blocks


def test_plain_text_is_left_untouched():
    text = "Mira keeps the lantern lit.\n\nShe never lets it go out: 3 < 4 and 5 > 2."
    assert strip_thinking(text) == (text, "")


def test_empty_or_missing_text_gives_nothing():
    assert strip_thinking("") == ("", "")
    assert strip_thinking(None) == ("", "")


def test_a_think_block_goes_to_the_reasoning():
    assert strip_thinking("<think>The user wants a verdict.</think>\nUPDATE") == (
        "UPDATE",
        "The user wants a verdict.",
    )


def test_several_think_blocks_are_all_removed_and_kept_in_order():
    text = "<think>first thought</think>Hello <think>second thought</think>world"
    answer, reasoning = strip_thinking(text)
    assert answer == "Hello world"
    assert reasoning == "first thought\n\nsecond thought"


def test_tags_match_in_any_case_and_with_attributes():
    text = '<THINK>loud thought</Think>A<think budget="200" class=x>quiet thought</THINK >B'
    assert strip_thinking(text) == ("AB", "loud thought\n\nquiet thought")


def test_a_multiline_block_is_removed_whole():
    text = "<think>\nline one\n\nline two\n</think>\n\nThe answer."
    assert strip_thinking(text) == ("The answer.", "line one\n\nline two")


@pytest.mark.parametrize("tag", ["thinking", "reasoning", "reflection"])
def test_other_reasoning_tags_are_stripped(tag):
    assert strip_thinking(f"<{tag}>weighing it</{tag}>INDEPENDENT") == ("INDEPENDENT", "weighing it")


def test_an_orphan_closing_tag_means_the_template_printed_the_opening_one():
    assert strip_thinking("The user asks for OK, so\nI say OK.</think>\n\nOK") == (
        "OK",
        "The user asks for OK, so\nI say OK.",
    )


def test_an_unclosed_opening_tag_means_a_truncated_thought():
    assert strip_thinking("UPDATE <think>but wait, maybe the old one") == ("UPDATE", "but wait, maybe the old one")


def test_an_answer_that_is_only_an_unfinished_thought_is_empty():
    assert strip_thinking("<think>still thinking when the tokens ran o") == (
        "",
        "still thinking when the tokens ran o",
    )


def test_an_empty_think_block_leaves_no_reasoning():
    assert strip_thinking("<think>\n\n</think>\n\nOK") == ("OK", "")


def test_words_that_only_start_like_a_tag_are_not_thoughts():
    text = "<thinker>is not a tag</thinker> and <thinkpad> neither"
    assert strip_thinking(text) == (text, "")


def test_harmony_analysis_channel_is_reasoning_and_final_channel_is_the_answer():
    text = (
        "<|channel|>analysis<|message|>User wants OK. Simple.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>OK<|return|>"
    )
    assert strip_thinking(text) == ("OK", "User wants OK. Simple.")


def test_harmony_final_channel_alone_is_unwrapped():
    assert strip_thinking("<|channel|>final<|message|>The answer.<|end|>") == ("The answer.", "")


# ------------------------------------------------------------------------------------------- message fields


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_fields_are_kept_apart_from_the_answer(field):
    message = {"role": "assistant", "content": "UPDATE", field: "  The new fact replaces the old one.  "}
    assert split_message(message) == ("UPDATE", "The new fact replaces the old one.")


def test_reasoning_field_and_think_block_are_merged_field_first():
    message = {"content": "<think>inline thought</think>OK", "reasoning_content": "field thought"}
    assert split_message(message) == ("OK", "field thought\n\ninline thought")


def test_a_message_without_text_content_gives_an_empty_answer():
    assert split_message({"role": "assistant", "content": None, "reasoning": "only thoughts"}) == ("", "only thoughts")
    assert split_message({"role": "assistant", "tool_calls": []}) == ("", "")


def test_non_text_reasoning_fields_are_ignored():
    assert split_message({"content": "OK", "reasoning": None, "thinking": {"tokens": 3}}) == ("OK", "")


def test_harmony_answer_that_opens_with_its_start_token_is_unwrapped_whole():
    text = (
        "<|start|>assistant<|channel|>analysis<|message|>User wants OK.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>OK<|return|>"
    )
    assert strip_thinking(text) == ("OK", "User wants OK.")


def test_a_truncated_harmony_analysis_channel_is_a_truncated_thought():
    assert strip_thinking("<|channel|>analysis<|message|>the user wants a verdict, so") == (
        "",
        "the user wants a verdict, so",
    )


# ------------------------------------------------------------------------------------------------ streamed


def _filtered(pieces: list[str]) -> tuple[list[str], str]:
    """What a stream of `pieces` shows, delta by delta, and the reasoning held back."""
    think = ThinkFilter()
    shown = [think.feed(piece) for piece in pieces] + [think.finish()]
    return [delta for delta in shown if delta], think.reasoning


def test_a_streamed_think_block_split_anywhere_is_held_back():
    text = "  <think>Ada knocked twice.</think>\n\nCome in, Ada."
    for size in (1, 2, 3, 5, 8, 13):
        shown, reasoning = _filtered([text[i : i + size] for i in range(0, len(text), size)])
        assert ("".join(shown), reasoning) == ("Come in, Ada.", "Ada knocked twice.")


def test_a_streamed_answer_without_a_block_passes_as_it_comes():
    shown, reasoning = _filtered(["\n Hello", ", Ada", ". <think>not at the start</think>"])
    assert (shown, reasoning) == (["Hello", ", Ada", ". <think>not at the start</think>"], "")


@pytest.mark.parametrize("start", ["<b>Bold</b> move", "<thinker> is a word", "< think", "<3 you"])
def test_text_that_only_begins_like_a_tag_is_shown_whole(start):
    shown, reasoning = _filtered(list(start))
    assert ("".join(shown), reasoning) == (start, "")


def test_other_tag_names_and_attributes_are_held_back_too():
    shown, reasoning = _filtered(["<thinking mode='deep'>", "plan", "</THINKING>", " Reply."])
    assert (shown, reasoning) == (["Reply."], "plan")


def test_an_unclosed_streamed_block_is_all_reasoning():
    assert _filtered(["<think>Ada knocks", " twice, which means"]) == ([], "Ada knocks twice, which means")


def test_a_lone_opening_of_a_tag_at_the_end_is_shown():
    assert _filtered(["<thi"]) == (["<thi"], "")


def test_a_long_streamed_block_is_read_once_and_kept_within_its_bound():
    """A model thinking on in tiny deltas: each delta is searched for the closing tag with the few characters before
    it, not with all that came before (grown and copied each time: the square of the block's length on the event
    loop), and the reasoning kept stops at REASONING_KEPT characters. The closing tag split across deltas is found."""
    pieces = ["<think>", *["a"] * (REASONING_KEPT + 50_000), "</th", "ink", ">", "Hello."]
    shown, reasoning = _filtered(pieces)
    assert (shown, reasoning) == (["Hello."], "a" * REASONING_KEPT)
    shown, reasoning = _filtered(["<think>", "b" * 10, "c" * (REASONING_KEPT + 5)])  # never closed: all reasoning
    assert (shown, len(reasoning), reasoning[:11]) == ([], REASONING_KEPT, "b" * 10 + "c")
