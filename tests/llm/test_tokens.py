"""`tokenizer_for`: OpenAI's models counted exactly by tiktoken with the BPE files an installed package ships (no
download: there may be no internet), any other model by the estimate. The encodings built here are tiktoken's own,
token for token; the estimate (`count_tokens`, `count_message_tokens`) is unchanged."""

import hashlib

import pytest
import tiktoken
from tiktoken_ext import openai_public

from apps.llm.models import Connection
from apps.llm.tokens import (
    ENCODING_HASHES,
    ESTIMATE,
    _encoding,
    count_message_tokens,
    count_tokens,
    encoding_file,
    tokenizer_for,
)

CHAT = [
    {"role": "system", "content": "You are Mira, a lighthouse keeper."},
    {"role": "user", "content": "What do you see tonight?", "name": "Ada"},
]


def _for(model: str):
    return tokenizer_for(Connection(model=model))


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4o", "tiktoken o200k_base"),
        ("gpt-4o-mini-2024-07-18", "tiktoken o200k_base"),
        ("gpt-4.1-nano", "tiktoken o200k_base"),
        ("o1", "tiktoken o200k_base"),
        ("o3-mini", "tiktoken o200k_base"),
        ("o4-mini", "tiktoken o200k_base"),
        ("openai/gpt-4o", "tiktoken o200k_base"),
        ("GPT-4o", "tiktoken o200k_base"),
        ("gpt-4", "tiktoken cl100k_base"),
        ("gpt-4-turbo", "tiktoken cl100k_base"),
        ("gpt-3.5-turbo", "tiktoken cl100k_base"),
        ("llama3.1:8b", "estimate"),
        ("mistral-nemo", "estimate"),
        ("davinci", "estimate"),  # an encoding not shipped
    ],
)
def test_openai_models_are_counted_exactly_and_others_estimated(model, name):
    tokenizer = _for(model)
    assert (tokenizer.name, tokenizer.exact) == (name, name != "estimate")


def test_exact_counts_are_openais_token_ids():
    assert _encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]
    assert _encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert _for("gpt-4o").count("hello world") == 2
    assert _for("gpt-4o").count("") == 0


def test_text_that_looks_like_a_special_token_is_counted_as_text():
    assert _for("gpt-4o").count("<|endoftext|>") > 1


@pytest.mark.parametrize("name", sorted(ENCODING_HASHES))
def test_the_shipped_files_are_openais_and_build_tiktokens_own_encoding(name, tmp_path, monkeypatch):
    data = encoding_file(name)
    assert hashlib.sha256(data).hexdigest() == ENCODING_HASHES[name]
    # tiktoken's own constructor, fed the same file through its cache instead of the network.
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    reference = getattr(openai_public, name)()
    ours = _encoding(name)
    assert ours._pat_str == reference["pat_str"]
    assert ours._special_tokens == reference["special_tokens"]
    assert ours._mergeable_ranks == reference["mergeable_ranks"]
    text = "Mira's lantern — 3 141 592 hums; «ça va?» 灯台 🌊\n\n  done."
    assert ours.encode_ordinary(text) == tiktoken.Encoding(**reference).encode_ordinary(text)


def test_exact_message_counts_frame_each_message_as_openai_counts():
    tokenizer = _for("gpt-4o")
    expected = 3  # the reply's priming
    for message in CHAT:
        expected += 3 + tokenizer.count(message["role"]) + tokenizer.count(message["content"])
    expected += 1 + tokenizer.count("Ada")  # the name
    assert tokenizer.count_messages(CHAT) == expected


def test_message_parts_are_counted_by_their_text():
    tokenizer = _for("gpt-4o")
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "world"}]}]
    assert tokenizer.count_messages(parts) == tokenizer.count_messages([{"role": "user", "content": "hello world"}])


def test_the_estimate_is_the_one_counted_before():
    tokenizer = _for("llama3")
    assert tokenizer is ESTIMATE
    text = "Mira lifts the lantern."
    assert tokenizer.count(text) == count_tokens(text)
    assert tokenizer.count_messages(CHAT) == count_message_tokens(CHAT)


def test_the_estimate_errs_high_for_english_prose():
    prose = "The lighthouse keeper climbed the stairs slowly, counting each step as she had every night. " * 20
    assert count_tokens(prose) >= _for("gpt-4o").count(prose)


def test_a_history_counted_again_is_looked_up_per_tokenizer_and_gives_the_same_counts():
    history = [{"role": "user", "content": f"Message {n}: the lantern swung over the quay all night. " * 3}
               for n in range(50)]  # fmt: skip
    exact, estimate = _for("gpt-4o"), _for("llama3")
    first = (exact.count_messages(history), estimate.count_messages(history))
    assert first[0] != first[1]  # the two counts are kept apart, not one read for the other
    assert (exact.count_messages(history), estimate.count_messages(history)) == first
    by_text = sum(3 + exact.count("user") + exact.count(m["content"]) for m in history) + 3
    assert first[0] == by_text
