"""The think-block stripper: every model answer passes here before any parser sees it.

Reasoning models put their thoughts in the text (`<think>…</think>`, also `<thinking>`, `<reasoning>`,
`<|channel|>analysis…`) or in a field beside it (`reasoning_content` from DeepSeek and vLLM, `reasoning` from
OpenRouter and Ollama's /v1, `thinking` from Ollama's /api/chat). Some chat templates print the opening tag in the
prompt, so the answer holds only the closing one; a truncated answer may hold an opening tag that never closes.
"""

from __future__ import annotations

import re

_TAGS = "think|thinking|reasoning|reflection"
_BLOCK = re.compile(rf"<(?P<tag>{_TAGS})\b[^>]*>(?P<body>.*?)</(?P=tag)\s*>", re.IGNORECASE | re.DOTALL)
_ORPHAN_CLOSE = re.compile(rf"^(?P<body>.*?)</(?:{_TAGS})\s*>", re.IGNORECASE | re.DOTALL)
_UNCLOSED_OPEN = re.compile(rf"<(?:{_TAGS})\b[^>]*>(?P<body>.*)$", re.IGNORECASE | re.DOTALL)
# gpt-oss's harmony format leaking into text: analysis channel first, final answer after.
_HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>(?P<body>.*?)(?:<\|end\|>|$)", re.DOTALL
)
_HARMONY_FINAL = re.compile(r"<\|start\|>assistant<\|channel\|>final<\|message\|>|<\|channel\|>final<\|message\|>")


def strip_thinking(text: str | None) -> tuple[str, str]:
    """(answer, reasoning) from a raw answer text."""
    if not text:
        return "", ""
    thoughts: list[str] = []

    def keep(match: re.Match) -> str:
        thoughts.append(match.group("body").strip())
        return ""

    text = _HARMONY.sub(keep, text)
    text = _HARMONY_FINAL.sub("", text).replace("<|return|>", "").replace("<|end|>", "")
    text = _BLOCK.sub(keep, text)
    text = _ORPHAN_CLOSE.sub(keep, text, count=1)
    text = _UNCLOSED_OPEN.sub(keep, text, count=1)
    return text.strip(), "\n\n".join(t for t in thoughts if t)


REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")


def split_message(message: dict) -> tuple[str, str]:
    """(answer, reasoning) from an answer message dict of either API, merging the reasoning fields with any
    think blocks found in the content."""
    answer, inline = strip_thinking(message.get("content") if isinstance(message.get("content"), str) else "")
    fields = [str(message[name]).strip() for name in REASONING_FIELDS if isinstance(message.get(name), str)]
    reasoning = "\n\n".join(part for part in [*fields, inline] if part)
    return answer, reasoning
