"""The ``transformers`` reader: a local vision-language model reads the retrieved tiles and answers
with citations.

Qwen2-VL, Qwen2.5-VL, Qwen3-VL and models with the same chat-template interface, from a hub id or a
local folder, on ``cuda``, ``mps`` or ``cpu``. One question is one greedy generation over a chat: a
system message with the instructions, then a user message that labels each tile
(``Image N: <doc id> page <page> tile <tile>``) and gives its image, then the question's own image
when it comes with one (labelled ``The question's image``), then the question. Three kinds of
input, chosen with ``inputs``:

- ``"images"``: the tile images; the model cites regions ViDoRe V3's way,
  ``<bboxes image="N">[[x0, y0, x1, y1], ...]</bboxes>``, on its family's scale unless
  ``coordinates`` says otherwise (``FAMILY_COORDINATES``). With ``"pixels"`` (Qwen2.5-VL) the boxes
  are in pixels of the image as the model saw it, after its processor resized it; they are mapped
  back through that size. ``number_from`` 0 numbers the images (and passages) from 0.
- ``"text"``: the tiles' text layer or OCR instead of images (PixelRAG's screenshot-to-OCR
  ablation), with numbered lines cited as ``<lines passage="N">[k, ...]</lines>``. A text-only
  causal language model can be loaded for this.
- ``"images+text"``: both, as ViDoRe V3's hybrid contexts; citations are boxes on the images.
- ``"auto"``: each tile's text where its text layer covers it, its image otherwise
  (``answer.inputs``), numbered together; each cited its own way.

Decoding uses the KV cache (``answer/vlm_generation.py``: nothing runs per token but the model and
its generation config's logits processors), with PyTorch's SDPA attention, or FlashAttention 2 on
a CUDA device where ``flash_attn`` is installed (``attention``); ``static_cache`` allocates the
cache once and lets transformers compile the decoding step on CUDA. ``read`` reports the stages
apart in ``Reading.timings`` ("preprocess": the chat template and the image processor; "prefill":
the prompt read and the first token; "decode": the other tokens) and the decoding speed in
``usage["decode_tokens_per_s"]``; given ``on_text``, it hands on the answer's text as it is
written (citation tags and thinking left out). Each image is resized by the processor to at most
``max_pixels`` (default: ``vlm_loading.MAX_IMAGE_TOKENS``, the 1,280 tokens of Qwen2-VL's own
default, which the ``qwen2-vl`` accounting of ``answer.context`` counts with; the hub's processor
configs allow 16,384).

With ``logprobs`` the reading reports the log-probability of the generated tokens under the model
(the sum of the log-softmax of the model's logits at each chosen token, before any repetition
penalty of the model's generation config), which VisRAG's weighted selection needs (``ask`` asks for
it with that strategy); the logits are kept for it only then. ``chat`` is a plain prompt-to-text
completion, the callable the LLM judge of ``pagesight.eval.answers`` takes.

``turn`` takes part in agentic search (``answer/agent.py``) Qwen2.5's way: the search tool goes to
the chat template (``tools=``; a template that renders no tools gets Qwen2.5's tool prompt in the
system message instead), tool results go back as ``<tool_response>`` user messages followed by the
tiles they found, and calls are read from ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``
in the generated text.

torch and transformers are imported when a reader is built: install torch first, then
``pagesight[vlm]`` (transformers and accelerate). Qwen-VL processors also need torchvision, the
build that matches your torch. ``adapter`` applies a PEFT LoRA adapter (``pip install peft``). A
model whose code comes with it (an ``auto_map`` in its config) runs that code only with
``trust_remote_code=True`` (``ask --trust-remote-code``); otherwise it is refused in one line.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from pagesight.answer.abstention import refusal
from pagesight.answer.agent import TOOL_CALL, Message, ToolCall, Turn
from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.inputs import text_items
from pagesight.answer.prompts import (
    QUESTION_IMAGE,
    answer_logprob,
    check_options,
    instructions,
    label,
    parse_citations,
    passage,
    passages_prompt,
    strip_thinking,
)
from pagesight.answer.vlm_generation import Generation, generate
from pagesight.answer.vlm_loading import load, one_line
from pagesight.errors import PagesightError

# Qwen2.5's own tool prompt, for chat templates that render no tools (Qwen2-VL's, Qwen2.5-VL's).
_TOOLS_PROMPT = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n"
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": '
    "<args-json-object>}}\n</tool_call>"
)
# The boxes each model family cites, by transformers' model_type: Qwen2.5-VL in pixels of the image as
# its processor resized it, Qwen2-VL and Qwen3-VL on a 0..1000 grid (their cookbooks: Qwen3-VL went
# back to relative coordinates). Other families are asked for the 0..1000 grid, the common one.
FAMILY_COORDINATES = {
    "qwen2_vl": "norm1000",
    "qwen2_5_vl": "pixels",
    "qwen3_vl": "norm1000",
    "qwen3_vl_moe": "norm1000",
}
DEFAULT_COORDINATES = "norm1000"


@dataclass(frozen=True)
class ReadingOptions:
    """How a transformers reader reads, whatever loaded its model (``TransformersReader`` and its
    ``from_objects`` take them as keywords): ``max_tokens`` new tokens at most, ``inputs`` (the
    module docstring), the boxes' ``coordinates`` (None: the model family's), ``number_from`` (the
    first image's number), ``max_images`` (None: no limit), ``logprobs`` kept, ``static_cache``."""

    max_tokens: int = 512
    inputs: str = "images"
    coordinates: str | None = None
    number_from: int = 1
    max_images: int | None = None
    logprobs: bool = False
    static_cache: bool = False

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise PagesightError(f"max_tokens must be 1 or more, got {self.max_tokens}")
        check_options(self.inputs, self.coordinates, self.max_images, self.number_from)


class TransformersReader:
    """A reader running a local vision-language model with ``transformers``: ``model`` (a hub id or
    a folder) loaded on ``device`` in ``dtype`` with ``vlm_loading.load``'s options (``min_pixels``,
    ``max_pixels``, ``adapter``, ``trust_remote_code``, ``attention``), reading as ``options`` say
    (``ReadingOptions``)."""

    name = "transformers"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        adapter: str | None = None,
        trust_remote_code: bool = False,
        attention: str = "auto",
        **options: Any,
    ) -> None:
        reading = ReadingOptions(**options)
        if not model:
            raise PagesightError(
                "the transformers reader needs a model: pass model= (--model), a hub id such as "
                "Qwen/Qwen2.5-VL-3B-Instruct or a local folder"
            )
        for option, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
            if value is not None and value < 1:
                raise PagesightError(f"{option} must be positive, got {value}")
        loaded, processor = load(
            model,
            device=device,
            dtype=dtype,
            inputs=reading.inputs,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            adapter=adapter,
            trust_remote_code=trust_remote_code,
            attention=attention,
            static_cache=reading.static_cache,
        )
        self._attach(loaded, processor, model, reading)

    @classmethod
    def from_objects(
        cls, model: Any, processor: Any, *, source: str = "model object", **options: Any
    ) -> TransformersReader:
        """A reader over an already built model and its processor (or tokenizer, for ``inputs="text"``),
        used as they are (attention and pixel budget included), reading as ``options`` say
        (``ReadingOptions``). ``source`` names the model in messages.
        """
        reading = ReadingOptions(**options)
        reader = cls.__new__(cls)
        reader._attach(model, processor, source, reading)
        return reader

    def _attach(self, model: Any, processor: Any, source: str, options: ReadingOptions) -> None:
        if not getattr(processor, "chat_template", None):
            raise PagesightError(f"transformers reader: model '{source}' has no chat template")
        if options.inputs != "text" and not hasattr(processor, "image_processor"):
            raise PagesightError(
                f"transformers reader: model '{source}' has no image processor, so it reads no images; "
                "pass inputs='text' for a text-only model"
            )
        self.model = model.eval()
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.source = source
        for name, value in dataclasses.asdict(options).items():
            setattr(self, name, value)
        family = getattr(model.config, "model_type", None)
        self.coordinates = options.coordinates or FAMILY_COORDINATES.get(family, DEFAULT_COORDINATES)
        self._template_tools: bool | None = None  # whether the chat template renders tools

    def read(
        self,
        question: str,
        context: Sequence[ContextItem],
        image: Image.Image | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Reading:
        """Answer ``question`` from ``context`` (and the question's ``image``, shown after the tiles)
        in one generation; cited boxes are in page pixels. ``on_text`` is given the answer's text in
        pieces as it is written (citation tags and thinking left out)."""
        where = f"transformers reader (model '{self.source}')"
        if image is not None and self.inputs == "text":
            raise PagesightError(f"{where}: reads text (inputs text), so it is shown no question image")
        texts = text_items(self.inputs, context)
        images = [item.image for i, item in enumerate(context) if i not in texts]
        images += [image] if image is not None else []
        if self.max_images is not None and len(images) > self.max_images:
            raise PagesightError(
                f"{where}: takes at most {self.max_images} images, got {len(images)}; read them with the "
                "concat or weighted strategy"
            )
        generation = self.generate(self.messages(question, context, image), images, on_text=on_text)
        answer = strip_thinking(generation.text)
        seen = generation.seen_sizes[: len(images) - (image is not None)] if generation.seen_sizes else None
        text, cited, quotes, warnings = parse_citations(
            answer, context, self.inputs, self.coordinates, seen, self.number_from
        )
        if generation.cut:
            warnings.append(f"the answer was cut at max_tokens={self.max_tokens}")
        usage = _usage(generation)
        if warnings:
            usage["warnings"] = warnings
        logprob = tokens = None
        if generation.logprobs is not None:
            pieces = [self.tokenizer.decode([token], skip_special_tokens=True) for token in generation.tokens]
            logprob, tokens = answer_logprob(list(zip(pieces, generation.logprobs)), generation.text)
        reason = refusal(text)
        return Reading(
            text,
            cited,
            quotes,
            logprob,
            usage,
            tokens,
            answered=reason is None,
            reason=reason,
            timings=generation.timings,
        )

    def turn(self, transcript: Sequence[Message], tools: list[dict], final: bool) -> Turn:
        """One turn of agentic search: a generation over ``transcript`` with ``tools`` offered; the
        model's ``<tool_call>`` blocks are its calls (``final`` changes nothing: the transcript
        already tells the model to answer)."""
        messages, images = self.agent_messages(transcript, tools)
        generation = self.generate(messages, images, tools=tools if self._renders_tools(tools) else None)
        usage = {"prompt_tokens": generation.prompt_tokens, "completion_tokens": len(generation.tokens)}
        return Turn(
            generation.text, tool_calls(generation.text), usage, generation.seen_sizes, generation.cut
        )

    def agent_messages(
        self, transcript: Sequence[Message], tools: list[dict]
    ) -> tuple[list[dict], list[Image.Image]]:
        """The chat ``turn`` sends, and its images in order: Qwen2.5's tool prompt in the system
        message when the template renders no tools, tool results as ``<tool_response>`` user
        messages, images as ``{"type": "image"}`` placeholders."""
        messages: list[dict] = []
        images: list[Image.Image] = []
        for message in transcript:
            if message.role == "system" and not self._renders_tools(tools):
                text = message.text + _TOOLS_PROMPT.format(tools="\n".join(json.dumps(t) for t in tools))
                messages.append({"role": "system", "content": text})
            elif message.role in ("system", "assistant"):
                messages.append({"role": message.role, "content": message.text})
            elif message.role == "tool":
                messages.append(
                    {"role": "user", "content": f"<tool_response>\n{message.text}\n</tool_response>"}
                )
            else:
                parts = []
                for part in message.parts:
                    if isinstance(part, str):
                        parts.append({"type": "text", "text": part + "\n"})
                    else:
                        parts.append({"type": "image"})
                        images.append(part)
                messages.append({"role": "user", "content": parts})
        return messages, images

    def _renders_tools(self, tools: list[dict]) -> bool:
        """Whether the chat template puts ``tools`` in the prompt (checked once)."""
        if self._template_tools is None:
            probe = [{"role": "user", "content": "?"}]
            without = self.processor.apply_chat_template(probe, tokenize=False)
            self._template_tools = (
                self.processor.apply_chat_template(probe, tools=tools, tokenize=False) != without
            )
        return self._template_tools

    def chat(self, prompt: str, images: Sequence[Image.Image] = ()) -> str:
        """The model's reply to ``prompt`` (after ``images``, when given) with no instructions: a
        judge's callable, and the question writer of ``pagesight train``."""
        return self.generate([_prompt_message(prompt, images)], images).text.strip()

    def first_token_logprobs(self, prompt: str, images: Sequence[Image.Image] = (), top: int = 10) -> dict:
        """The log-probabilities of the ``top`` likeliest first tokens of the reply to ``prompt``
        (after ``images``), from one forward pass: a yes/no judgement's confidence (the ``vlm``
        reranker)."""
        import torch

        inputs = self._inputs([_prompt_message(prompt, images)], images)
        with torch.inference_mode():
            logits = self.model(**inputs).logits[0, -1].float()
        values, ids = torch.log_softmax(logits, dim=-1).topk(top)
        found: dict[str, float] = {}
        for value, token in zip(values.tolist(), ids.tolist()):
            text = self.tokenizer.decode([token])  # tokens that decode alike (byte pieces) add up
            found[text] = float(np.logaddexp(found[text], value)) if text in found else value
        return found

    def messages(
        self, question: str, context: Sequence[ContextItem], image: Image.Image | None = None
    ) -> list[dict]:
        """The chat ``read`` sends: instructions, then each tile labelled with its image and/or text
        (with inputs auto, its image or its numbered lines), then the question's ``image`` when
        given, then the question. Images are ``{"type": "image"}`` placeholders, given in order to
        the processor.
        """
        system = {
            "role": "system",
            "content": instructions(
                self.inputs,
                self.coordinates,
                pages=bool(context),
                number_from=self.number_from,
                question_image=image is not None,
            ),
        }
        if self.inputs == "text":
            return [system, {"role": "user", "content": passages_prompt(question, context, self.number_from)}]
        parts: list[dict] = []
        texts = text_items(self.inputs, context)
        for n, item in enumerate(context, self.number_from):
            if n - self.number_from in texts:  # inputs auto: this tile as its text
                parts.append({"type": "text", "text": f"{passage(item, n)}\n"})
                continue
            parts.append({"type": "text", "text": f"Image {n}: {label(item)}\n"})
            parts.append({"type": "image"})
            if self.inputs == "images+text" and item.text:
                parts.append({"type": "text", "text": f"\nText of image {n}:\n{item.text}\n"})
        if image is not None:
            parts += [{"type": "text", "text": f"\n{QUESTION_IMAGE}:\n"}, {"type": "image"}]
        parts.append({"type": "text", "text": f"\nQuestion: {question}"})
        return [system, {"role": "user", "content": parts}]

    def _inputs(self, messages: list[dict], images: Sequence[Image.Image], tools: list[dict] | None = None):
        """The processor's tensors for ``messages`` (its chat template, with ``tools`` when some) and
        ``images`` in order, on the model's device."""
        try:
            prompt = self.processor.apply_chat_template(
                messages, tools=tools, tokenize=False, add_generation_prompt=True
            )
            if images:
                inputs = self.processor(
                    text=[prompt], images=list(images), add_special_tokens=False, return_tensors="pt"
                )
            else:
                inputs = self.processor(text=[prompt], add_special_tokens=False, return_tensors="pt")
        except (ValueError, TypeError) as exc:
            raise PagesightError(f"transformers reader (model '{self.source}'): {one_line(exc)}") from exc
        inputs = inputs.to(self.model.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        return inputs

    def generate(
        self,
        messages: list[dict],
        images: Sequence[Image.Image] = (),
        tools: list[dict] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Generation:
        """Greedy generation over ``messages`` (the processor's chat template, given ``tools`` when
        some) with ``images`` in order (``answer.vlm_generation``); ``on_text`` is given the text in
        pieces as it is written. Its timings start with "preprocess": the template and the
        processor."""
        start = time.perf_counter()
        inputs = self._inputs(messages, images, tools)
        preprocess = time.perf_counter() - start
        generation = generate(
            self.model,
            self.processor,
            inputs,
            max_tokens=self.max_tokens,
            logprobs=self.logprobs,
            on_text=on_text,
            static=self.static_cache,
        )
        generation.timings = {"preprocess": preprocess, **generation.timings}
        return generation


def _usage(generation: Generation) -> dict:
    """A reading's token counts, and its decoding speed (tokens after the first, a second)."""
    usage: dict = {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": len(generation.tokens),
        "image_tokens": generation.image_tokens,
    }
    decode = generation.timings.get("decode")
    if decode and len(generation.tokens) > 1:
        usage["decode_tokens_per_s"] = round((len(generation.tokens) - 1) / decode, 2)
    return usage


def _prompt_message(prompt: str, images: Sequence[Image.Image]) -> dict:
    """A user message of ``images`` (placeholders, given in order to the processor), then ``prompt``."""
    if not images:
        return {"role": "user", "content": prompt}
    return {
        "role": "user",
        "content": [*({"type": "image"} for _ in images), {"type": "text", "text": prompt}],
    }


def tool_calls(text: str) -> list[ToolCall]:
    """The ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks of ``text`` (the last
    one may be cut short), each as a ``ToolCall``; a block that is no such object reads as a problem."""
    calls = []
    for n, match in enumerate(TOOL_CALL.finditer(text), 1):
        body = match.group(1).strip()
        try:
            call = json.loads(body)
        except json.JSONDecodeError:
            call = None
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            calls.append(ToolCall(f"call_{n}", call["name"], call.get("arguments") or {}))
        else:
            problem = f'a tool call must be {{"name": ..., "arguments": {{...}}}}, got {body[:100]!r}'
            calls.append(ToolCall(f"call_{n}", "", body, problem))
    return calls
