"""Token counting without a model's tokenizer.

The exact count is the server's (`usage` in the answer) and is recorded when given. Before a call, prompts are
sized by this estimate, which errs on the high side for English prose under BPE tokenizers (about 4 characters
or 0.75 words per token), so a prompt sized by it fits.
"""

from __future__ import annotations

import math
import re

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
PER_MESSAGE_OVERHEAD = 4


def count_tokens(text: str) -> int:
    if not text:
        return 0
    pieces = len(_WORD.findall(text))
    return max(math.ceil(len(text) / 4), math.ceil(pieces * 1.1))


def count_message_tokens(messages: list[dict]) -> int:
    return sum(count_tokens(str(m.get("content", ""))) + PER_MESSAGE_OVERHEAD for m in messages) + 2
