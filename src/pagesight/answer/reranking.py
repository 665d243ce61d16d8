"""A vision-language reader as a reranker (``vlm``, ``vlm-openai`` in ``search.rerank.RERANKERS``):
each tile image judged by the probability of "yes" against "no" as the first token of the reader's
answer to ``JUDGE_PROMPT``. It lives with the readers it is built from, so search imports no reader."""

from __future__ import annotations

import math
from typing import Any

from pagesight.answer.base import make_reader
from pagesight.answer.endpoint import Endpoint
from pagesight.errors import PagesightError
from pagesight.search.rerank import Candidate, TimedReranker

JUDGE_PROMPT = (
    "Does this image contain the answer to the question below? Answer with yes or no only.\nQuestion: {query}"
)


class VlmReranker(TimedReranker):
    """Pointwise relevance from a vision-language reader: P(yes) / (P(yes) + P(no)) for the first
    token of its answer to ``JUDGE_PROMPT`` about each tile image."""

    name = "vlm"
    batch_size = 1

    def __init__(
        self,
        reader: Any = "transformers",
        model: str | None = None,
        device: str = "auto",
        trust_remote_code: bool = False,
        **options: Any,
    ):
        """``reader``: "transformers" (on ``device``, running the model's own code if
        ``trust_remote_code``) or "openai", built with ``model`` and ``options``, or a reader
        object that has ``first_token_logprobs``."""
        super().__init__()
        if isinstance(reader, str):
            if reader not in ("transformers", "openai"):
                raise PagesightError(
                    f"the vlm reranker reads through 'transformers' or 'openai', not '{reader}'"
                )
            if reader == "transformers":
                options.update(device=device, trust_remote_code=trust_remote_code)
            reader = make_reader(reader, model=model, **options)
        self.name = "vlm-openai" if getattr(reader, "name", "") == "openai" else "vlm"
        self.reader = reader

    def _score(self, query: str, candidates: list[Candidate]) -> list[float]:
        prompt = JUDGE_PROMPT.format(query=query)
        return [yes_probability(self.reader.first_token_logprobs(prompt, [c.image])) for c in candidates]


def yes_probability(logprobs: dict[str, float]) -> float:
    """P(yes) / (P(yes) + P(no)) from first-token log-probabilities (any case, spaces stripped);
    0 when neither is among them."""
    yes = no = 0.0
    for token, logprob in logprobs.items():
        word = token.strip().lower()
        if word == "yes":
            yes += math.exp(logprob)
        elif word == "no":
            no += math.exp(logprob)
    return yes / (yes + no) if yes + no > 0 else 0.0


def openai_vlm(model: str | None = None, endpoint: Endpoint | None = None, **options: Any) -> VlmReranker:
    """The ``vlm`` reranker through an OpenAI-compatible endpoint (``vlm-openai``): ``endpoint``
    (``answer.endpoint``; None: the openai reader's from the environment), its ``model`` (None: the
    endpoint's). It runs no model here, so it takes no device."""
    return VlmReranker(reader="openai", model=model, endpoint=endpoint, **options)
