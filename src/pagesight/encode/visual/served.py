"""Visual encoders behind an inference server: the model runs in a vLLM server (or several behind a
router), pagesight sends it pages and queries and gets their vectors back (``encode.vllm_client``).

Late-interaction families go through vLLM's pooling API with task ``token_embed`` (one vector a
token: ColQwen3, ColQwen3.5), single-vector ones through its embeddings API (Qwen3-VL-Embedding).
Each input is the prompt the in-process encoder of the same family builds, character for character
(the colpali-engine processors' for ColQwen, ``qwen3vl_embedding``'s chat turns), so the same pages
give the same vectors in-process and through a server, and an index made one way is searched the
other: the spec recorded (name, model, width) is the same.

A text query goes as ``input`` (tokenized as the processor does: with the tokenizer's special
tokens, none for Qwen). A page goes as one user message whose parts are the prompt's text before
the image, the image (a PNG data URL) and the text after it, with ``VERBATIM``, a chat template that
writes the parts as they are and each image as the family's image marker; the server's Qwen-VL
processor expands the marker into the image's tokens. The server must accept a request's template:
``vllm serve MODEL --runner pooling --trust-request-chat-template`` (without it vLLM refuses the
page in one line that says so). A page over ``max_pixels`` is shrunk (its aspect kept) before it
is sent; the server's processor then resizes it within its own pixel budget, as in-process. Given
that budget (``VisualEndpoint.max_pixels``), a page is resized here to the size the processor
would give it (Qwen-VL's: sides in multiples of the family's 32-pixel token, area within the
budget; ``processors.qwen_resize``) with its resampling (bicubic), so the server reads the
pixels an in-process processor would, and neither side writes, sends or decodes pixels the model
never sees.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from pagesight.encode.visual.base import ENCODERS, Progress, normalize
from pagesight.encode.visual.processors import qwen_resize
from pagesight.encode.visual.qwen3vl_embedding import PAGE_INSTRUCTION, QUERY_INSTRUCTION
from pagesight.encode.visual.qwen_vl import IMAGE, chat
from pagesight.endpoints import VisualEndpoint
from pagesight.errors import PagesightError
from pagesight.spec import model_reference

# A chat template that writes each text part as it is and each image as Qwen-VL's image marker:
# the prompt the client builds is the prompt the model reads.
VERBATIM = (
    "{%- for message in messages -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{ part['text'] }}{%- else -%}" + IMAGE + "{%- endif -%}"
    "{%- endfor -%}{%- endfor -%}"
)
MAX_PIXELS = 2_000_000  # a page larger is shrunk before it is sent (tiles are about 0.9 Mpx)
BATCH = 8  # inputs an encoder call sends together (pages: that many requests in flight)
QUERY_BATCH = 32  # text queries a request holds at most (a server gathers up to 32: batching.MAX_BATCH)

# colpali-engine's ColQwen3Processor and ColQwen3_5Processor (0.3.18): ``visual_prompt_prefix`` and
# ten ``query_augmentation_token`` after a query (``process_queries``); tests compare them.
COLQWEN3_PAGE = f"<|im_start|>user\n{IMAGE}Describe the image.<|im_end|><|endoftext|>"
COLQWEN3_QUERY = "{text}" + "<|endoftext|>" * 10


@dataclass(frozen=True)
class Recipe:
    """How a family is served: the API (``pooling``: one vector a token; ``embeddings``: one an
    input), its published checkpoint, and its prompts (those holding ``IMAGE`` carry a picture)."""

    api: str
    default_model: str
    page: str
    query: str  # with {text}
    image_query: str
    joint: str | None = None  # a question with its picture, with {text}; None: the picture alone
    factor: int = 32  # pixels a side of an image token (Qwen3-VL: 16-pixel patches merged 2 x 2)


RECIPES = {
    "colqwen3": Recipe(
        "pooling", "TomoroAI/tomoro-colqwen3-embed-4b", COLQWEN3_PAGE, COLQWEN3_QUERY, COLQWEN3_PAGE
    ),
    "colqwen3.5": Recipe(
        "pooling", "athrael-soju/colqwen3.5-4.5B-v3", COLQWEN3_PAGE, COLQWEN3_QUERY, COLQWEN3_PAGE
    ),
    "qwen3-vl-embedding": Recipe(
        "embeddings",
        "Qwen/Qwen3-VL-Embedding-2B",
        chat(IMAGE, "{page_instruction}"),
        chat("{text}", "{query_instruction}"),
        chat(IMAGE, "{query_instruction}"),
        joint=chat(IMAGE + "{text}", "{query_instruction}"),
    ),
}


def served_encoder(
    name: str, model: str | None, endpoint: VisualEndpoint, adapter: str | None = None, **options: Any
) -> ServedEncoder:
    """The encoder ``name`` (a name of ``ENCODERS``) running at ``endpoint``, ``model`` naming the
    model it serves (by default the family's published checkpoint); refused for a family no server
    runs here, or with an ``adapter`` (merged into a model in-process: serve the merged model)."""
    ENCODERS.load(name)  # an unknown name: the registry's error, listing the known ones
    if adapter is not None:
        raise PagesightError(
            f"visual encoder '{name}': an adapter is merged into its model in-process; behind an endpoint, "
            "serve the merged model"
        )
    if name not in RECIPES:
        raise PagesightError(
            f"visual encoder '{name}' cannot run behind an endpoint here; served: {', '.join(sorted(RECIPES))} "
            "(or run it in-process: no --visual-endpoint)"
        )
    recipe = RECIPES[name]
    factory = ServedJointEncoder if recipe.joint is not None else ServedEncoder
    return factory(name, recipe, model or recipe.default_model, endpoint, **options)


class ServedEncoder:
    """A ``VisualEncoder`` whose model runs at a vLLM endpoint (the module docstring). ``dim`` is
    the width the endpoint gives, measured on a query when built; every answer is checked against
    it. ``prepare_images`` writes the pages' requests (PNG, base64: the CPU's work, which ingestion
    runs a batch ahead), ``encode_prepared`` sends them."""

    image_size: ClassVar[tuple[int, int] | None] = None

    def __init__(
        self,
        name: str,
        recipe: Recipe,
        model: str,
        endpoint: VisualEndpoint,
        batch_size: int = BATCH,
        max_pixels: int = MAX_PIXELS,
        page_instruction: str = PAGE_INSTRUCTION,
        query_instruction: str = QUERY_INSTRUCTION,
    ):
        from pagesight.encode.vllm_client import VllmClient

        if batch_size < 1 or max_pixels < 1:
            raise PagesightError(
                f"batch_size and max_pixels must be at least 1, got {batch_size} and {max_pixels}"
            )
        self.name, self.recipe, self.model_id = name, recipe, model_reference(model)
        self.multi_vector = recipe.api == "pooling"
        self.batch_size, self.max_pixels = batch_size, max_pixels
        self.processor_pixels = endpoint.max_pixels
        self.device = endpoint.base_url  # where it runs, as ingestion's report names devices
        self.instructions = {"page_instruction": page_instruction, "query_instruction": query_instruction}
        self.client = VllmClient(endpoint, self.model_id)
        self.dim = 0
        try:
            self.client.check_served()
            (probe,) = self._send([self._prompt(recipe.query, "dimension")])
        except BaseException:
            self.client.close()
            raise
        self.dim = int(probe.shape[-1])

    def _prompt(self, template: str, text: str = "") -> str:
        """``template`` with the instructions, then ``text``, put in (a text's braces stay as written)."""
        for name, value in self.instructions.items():
            template = template.replace("{" + name + "}", value)
        return template.replace("{text}", text)

    def _conversation(self, prompt: str, image: Image.Image) -> list[dict]:
        """One user message: the prompt's text around ``IMAGE``, the image between."""
        before, marker, after = prompt.partition(IMAGE)
        if not marker:
            raise PagesightError(f"visual encoder '{self.name}': its prompt holds no image")
        parts = [{"type": "text", "text": before}] if before else []
        parts.append({"type": "image_url", "image_url": {"url": _png_url(self._bounded(image))}})
        if after:
            parts.append({"type": "text", "text": after})
        return [{"role": "user", "content": parts}]

    def _bounded(self, image: Image.Image) -> Image.Image:
        """``image`` in RGB, at the size the server's processor gives it when its budget is known,
        else shrunk to ``max_pixels`` when larger (its aspect kept)."""
        image = image if image.mode == "RGB" else image.convert("RGB")
        if self.processor_pixels is not None:
            factor = self.recipe.factor
            height, width = qwen_resize(
                image.height, image.width, factor, factor * factor, self.processor_pixels
            )
            same = (width, height) == image.size
            return image if same else image.resize((width, height), Image.Resampling.BICUBIC)
        pixels = image.width * image.height
        if pixels <= self.max_pixels:
            return image
        factor = math.sqrt(self.max_pixels / pixels)
        size = (max(1, int(image.width * factor)), max(1, int(image.height * factor)))
        return image.resize(size, Image.Resampling.BICUBIC)

    def _send(self, inputs: list) -> list[np.ndarray]:
        """The vectors of ``inputs`` (prompts and conversations), normalised, checked for width."""
        call = self.client.pool if self.multi_vector else self.client.embed
        conversations = any(not isinstance(item, str) for item in inputs)
        fields = {"chat_template": VERBATIM} if conversations else {}
        vectors = [normalize(found) for found in call(inputs, self.dim or None, **fields)]
        for found in vectors:
            if self.dim and found.shape[-1] != self.dim:
                raise PagesightError(
                    f"the {self.client.where} gave vectors of {found.shape[-1]} dimensions, where it gave "
                    f"{self.dim} before: it is serving another model"
                )
        return vectors

    def _batched(self, inputs: list, progress: Progress | None, size: int | None = None) -> list[np.ndarray]:
        vectors: list[np.ndarray] = []
        size = size or self.batch_size
        for start in range(0, len(inputs), size):
            batch = inputs[start : start + size]
            vectors.extend(self._send(batch))
            if progress is not None:
                progress(len(batch))
        return vectors

    def prepare_images(self, images: Sequence[Image.Image]) -> list:
        """The requests of a batch of pages: their conversations, images as PNG data URLs."""
        return [self._conversation(self._prompt(self.recipe.page), image) for image in images]

    def encode_prepared(self, prepared: list) -> list[np.ndarray]:
        return self._send(prepared)

    def encode_images(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        vectors: list[np.ndarray] = []
        for start in range(0, len(images), self.batch_size):
            batch = images[start : start + self.batch_size]
            vectors.extend(self.encode_prepared(self.prepare_images(batch)))
            if progress is not None:
                progress(len(batch))
        return vectors

    def encode_queries(self, texts: Sequence[str], progress: Progress | None = None) -> list[np.ndarray]:
        prompts = [self._prompt(self.recipe.query, text) for text in texts]
        return self._batched(prompts, progress, max(self.batch_size, QUERY_BATCH))

    def encode_image_queries(
        self, images: Sequence[Image.Image], progress: Progress | None = None
    ) -> list[np.ndarray]:
        prompt = self._prompt(self.recipe.image_query)
        return self._batched([self._conversation(prompt, image) for image in images], progress)

    def options(self) -> dict:
        return dict(self.instructions) if "{page_instruction}" in self.recipe.page else {}

    def spec(self) -> dict:
        return {
            "name": self.name,
            "model": self.model_id,
            "adapter": None,
            "revision": None,
            "dim": self.dim,
            "multi_vector": self.multi_vector,
            "max_pixels": self.processor_pixels or self.max_pixels,
            "image_size": None,
            "options": self.options(),
        }

    def close(self) -> None:
        self.client.close()


class ServedJointEncoder(ServedEncoder):
    """A served encoder whose model reads a picture and a question as one input (Qwen3-VL-Embedding)."""

    def encode_image_text_queries(
        self, images: Sequence[Image.Image], texts: Sequence[str], progress: Progress | None = None
    ) -> list[np.ndarray]:
        if len(images) != len(texts):
            raise PagesightError(f"{len(images)} query images for {len(texts)} texts: give one text an image")
        inputs = [
            self._conversation(self._prompt(self.recipe.joint, text), image)
            for image, text in zip(images, texts)
        ]
        return self._batched(inputs, progress)


def _png_url(image: Image.Image) -> str:
    """``image`` as a ``data:image/png;base64`` URL: lossless, so the server's processor reads the
    pixels an in-process one would (compressed fast: a page's PNG is written a request)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
