"""The local model's two runtimes: ONNX Runtime (float32, the default) gives PyTorch float32's vectors, so vectors
stored before and after compare under one model key; the export is made once from the packaged weights."""

import sys

import numpy as np

from apps.memories import embedding_local
from apps.memories.embedding_local import _batches, _OnnxModel, local_encode, local_model, local_runtime, onnx_file
from apps.memories.embeddings import EmbeddingConfig, _embed_local, reads_words

MODEL = "all-MiniLM-L6-v2"
# Chat turns as people write them, of every length the batching sorts: short, long, past the model's 256 tokens
# (cut, in both runtimes alike), empty, in other scripts, with emoji and numbers.
TURNS = [
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's great! How did it feel to share your story with them?",
    "Mira: The lantern went out.",
    "You: ok",
    "",
    "   Corvin: Who relit it?   ",
    "Jon: Lost my job as a banker on 19 January 2023 😔, so I'm opening a dance studio instead!",
    "Gina: ¿Dónde está la biblioteca? Je ne sais pas. 図書館はどこですか",
    "Nate: " + " ".join(f"turn {i} of the tournament went to the blue team after a long fight" for i in range(40)),
    "Mira: Ferry fare is two silver coins, or three after dark, and the ferryman keeps a ledger of every crossing.",
]


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(axis=1).min())


def test_float32_runs_in_onnx_runtime_and_gives_pytorch_float32_vectors_to_three_nines(settings):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float32"
    assert local_runtime(MODEL) == "onnx"
    vectors = np.array(_embed_local(EmbeddingConfig(provider="local", model=MODEL), TURNS))
    assert isinstance(embedding_local._models[(MODEL, "onnx")], _OnnxModel)  # the path taken
    today = local_encode(MODEL, TURNS, "torch-float32")
    assert vectors.shape == today.shape == (len(TURNS), 384)
    assert _min_cosine(vectors, today) >= 0.999
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # normalised, as sentence-transformers
    # Batched as they come or one at a time, a text's vector is the same.
    one = np.array([local_encode(MODEL, [text], "onnx")[0] for text in TURNS])
    assert _min_cosine(one, vectors) > 0.99999


def test_bfloat16_keeps_pytorch(settings):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "bfloat16"
    assert local_runtime(MODEL) == "torch-bfloat16"


def test_float32_falls_back_to_pytorch_without_onnxruntime(settings, monkeypatch):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float32"
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    assert local_runtime(MODEL) == "torch-float32"


def test_both_runtimes_read_the_same_words_whole(settings):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float32"
    config = EmbeddingConfig(provider="local", model=MODEL)
    assert reads_words(config, "Who relit the lantern?") and not reads_words(config, "zzzzqqq xqxqxq")
    onnx, torch = local_model(MODEL, "onnx"), local_model(MODEL, "torch-float32")
    for word in ("lantern", "ferryman", "zzzzqqq", "caroline", "図書館"):
        assert onnx.word_pieces(word) == torch.word_pieces(word), word


def test_the_export_is_kept_and_loaded_again_without_exporting(settings, monkeypatch):
    settings.LOREKEEPER_EMBEDDINGS_PRECISION = "float32"
    local_model(MODEL, "onnx")  # exported now, if no earlier run did
    target = onnx_file(MODEL)
    assert target.exists() and not list(target.parent.glob(f"{target.stem}*.tmp"))

    def no_export(name, path):
        raise AssertionError("exported again")

    monkeypatch.setattr(embedding_local, "onnx_export", no_export)
    assert _OnnxModel(MODEL).encode(["Mira: The lantern went out."]).shape == (1, 384)


def test_batches_pad_little_and_cover_every_text_once():
    lengths = [40, 12, 12, 100, 13, 39, 41, 12, 7] * 10
    batches = _batches(lengths)
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    for batch in batches:
        tokens = sum(lengths[index] for index in batch)
        assert lengths[batch[0]] * len(batch) <= embedding_local.PADDING * tokens + embedding_local.RUN_TOKENS
    assert max(map(len, batches)) <= embedding_local.BATCH
    assert sum(lengths[batch[0]] * len(batch) for batch in batches) <= 1.1 * sum(lengths)
    assert _batches([]) == []


def test_a_searchs_short_sentences_are_embedded_in_one_call():
    # A question of three sentences of 14, 9 and 6 tokens: one call of ONNX Runtime, not three (each call costs
    # about as much as 16 tokens more).
    assert _batches([9, 14, 6]) == [[1, 0, 2]]
    # Long texts of unequal lengths still go apart: padding 120 tokens to 250 would cost more than a call.
    assert _batches([250, 120]) == [[0], [1]]
