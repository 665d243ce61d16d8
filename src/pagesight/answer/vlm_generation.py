"""One generation of the ``transformers`` reader: greedy decoding with the KV cache, timed in its
stages, its text handed on in pieces as it is written, and scored when asked.

Per token, ``model.generate`` runs the model on the one new token against the cache, the logits
processors of the model's generation config (greedy decoding leaves only a repetition penalty,
where the config has one: Qwen2.5-VL's 1.05) and the end-of-sequence check, which waits for the
device. Nothing of this module runs per token unless the text is streamed: the clock notes the
first token's arrival once, and the log-probabilities of the answer (``logprobs``) are computed
from the kept logits after the last token, not per step. With ``static`` the cache is allocated
once at its full length (``STATIC_CACHE_BLOCK`` tokens at a time, so prompts of about the same
length share it) and transformers compiles the decoding step on a CUDA device (``torch.compile``
with CUDA graphs: one graph launch a token instead of a Python call a layer); the first
generation of each cache length pays for the compilation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pagesight.answer.prompts import VisibleText

STATIC_CACHE_BLOCK = 2048  # a static cache's length is rounded up to a multiple of this


@dataclass
class Generation:
    """One greedy generation: the reply and what it cost."""

    text: str  # the new tokens decoded, special tokens left out
    tokens: list[int]  # the new token ids
    logprobs: list[float] | None  # the log-probability of each of ``tokens`` under the model, if asked
    prompt_tokens: int
    image_tokens: int  # image placeholder tokens in the prompt
    cut: bool  # stopped by max_tokens rather than by an end-of-sequence token
    seen_sizes: list[tuple[int, int]] | None  # (width, height) of each image as the model saw it
    # seconds: "prefill" (to the first new token), "decode" (the others)
    timings: dict[str, float] = field(default_factory=dict)


class Clock:
    """A streamer for ``model.generate`` (its ``put`` and ``end``): notes when the first new token
    arrives and when the last did, and, given ``on_text``, decodes the new tokens as they come and
    hands on the text they add, less citation tags and thinking (``VisibleText``)."""

    def __init__(self, tokenizer: Any = None, on_text: Callable[[str], None] | None = None) -> None:
        self.tokenizer, self.on_text = tokenizer, on_text
        self.started = time.perf_counter()
        self.first: float | None = None
        self.ended: float | None = None
        self._prompt = True  # generate puts the prompt's ids first
        self._line: list[int] = []  # the tokens of the line being written (decoded together)
        self._sent = 0  # characters of that line handed on
        self._visible = VisibleText()

    def put(self, value: Any) -> None:
        if self._prompt:
            self._prompt = False
            return
        if self.first is None:
            self.first = time.perf_counter()
        if self.on_text is None:
            return
        self._line.extend(value.reshape(-1).tolist())
        text = self.tokenizer.decode(self._line, skip_special_tokens=True)
        if text.endswith("\ufffd"):  # a character whose bytes are not all written yet
            return
        new, self._sent = text[self._sent :], len(text)
        if text.endswith("\n"):
            self._line, self._sent = [], 0
        self._hand_on(self._visible.feed(new))

    def end(self) -> None:
        self.ended = time.perf_counter()
        if self.on_text is not None:
            text = self.tokenizer.decode(self._line, skip_special_tokens=True) if self._line else ""
            self._hand_on(self._visible.feed(text[self._sent :]) + self._visible.end())

    def _hand_on(self, text: str) -> None:
        if text:
            self.on_text(text)

    def timings(self) -> dict[str, float]:
        """Seconds to the first new token ("prefill") and from it to the last ("decode")."""
        ended = self.ended if self.ended is not None else time.perf_counter()
        first = self.first if self.first is not None else ended
        return {"prefill": first - self.started, "decode": ended - first}


def generate(
    model: Any,
    processor: Any,
    inputs: Any,
    *,
    max_tokens: int,
    logprobs: bool = False,
    on_text: Callable[[str], None] | None = None,
    static: bool = False,
) -> Generation:
    """Greedy generation of up to ``max_tokens`` over the processor's ``inputs``; see the module."""
    import torch

    tokenizer = getattr(processor, "tokenizer", processor)
    prompt_ids = inputs["input_ids"][0]
    options: dict[str, Any] = {}
    if logprobs:
        options.update(output_logits=True, return_dict_in_generate=True)
    if static:
        length = prompt_ids.shape[0] + max_tokens
        blocks = -(-length // STATIC_CACHE_BLOCK)
        options.update(cache_implementation="static", max_cache_len=blocks * STATIC_CACHE_BLOCK)
    clock = Clock(tokenizer, on_text)
    with torch.inference_mode():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=max_tokens, streamer=clock, **options)
        sequences = out.sequences if logprobs else out
        steps = None
        if logprobs:
            steps = model.compute_transition_scores(
                sequences, tuple(step.float() for step in out.logits), normalize_logits=True
            )[0].tolist()
    tokens = sequences[0, prompt_ids.shape[0] :].tolist()
    eos = model.generation_config.eos_token_id
    eos = {eos} if isinstance(eos, int) else set(eos or ())
    image_token = getattr(processor, "image_token_id", None)
    grid = inputs.get("image_grid_thw")
    seen = None
    if grid is not None:
        patch = processor.image_processor.patch_size
        seen = [(int(w) * patch, int(h) * patch) for _, h, w in grid.tolist()]
    return Generation(
        text=tokenizer.decode(tokens, skip_special_tokens=True),
        tokens=tokens,
        logprobs=[float(value) for value in steps] if steps is not None else None,
        prompt_tokens=int(prompt_ids.shape[0]),
        image_tokens=int((prompt_ids == image_token).sum()) if image_token is not None else 0,
        cut=len(tokens) >= max_tokens and (not tokens or tokens[-1] not in eos),
        seen_sizes=seen,
        timings=clock.timings(),
    )
