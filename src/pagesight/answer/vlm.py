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

The reading reports the log-probability of the generated tokens under the model (the sum of the
log-softmax of the model's logits at each chosen token, before any repetition penalty of the
model's generation config), which VisRAG's weighted selection needs. ``chat`` is a plain
prompt-to-text completion, the callable the LLM judge of ``pagesight.eval.answers`` takes.

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

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from pagesight.answer.abstention import refusal
from pagesight.answer.agent import TOOL_CALL, Message, ToolCall, Turn
from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.prompts import (
    QUESTION_IMAGE,
    answer_logprob,
    check_options,
    instructions,
    label,
    parse_bboxes,
    parse_lines,
    passages_prompt,
    strip_thinking,
)
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


@dataclass
class Generation:
    """One greedy generation: the reply and what it cost."""

    text: str  # the new tokens decoded, special tokens left out
    tokens: list[int]  # the new token ids
    logprobs: list[float]  # the log-probability of each of ``tokens`` under the model
    prompt_tokens: int
    image_tokens: int  # image placeholder tokens in the prompt
    cut: bool  # stopped by max_tokens rather than by an end-of-sequence token
    seen_sizes: list[tuple[int, int]] | None  # (width, height) of each image as the model saw it


class TransformersReader:
    """A reader running a local vision-language model with ``transformers``."""

    name = "transformers"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        max_tokens: int = 512,
        inputs: str = "images",
        coordinates: str | None = None,
        number_from: int = 1,
        max_images: int | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        adapter: str | None = None,
        trust_remote_code: bool = False,
    ) -> None:
        _check_options(max_tokens, inputs, coordinates, max_images, number_from)
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
            inputs=inputs,
            min_pixels=min_pixels,
            max_pixels=max_pixels,
            adapter=adapter,
            trust_remote_code=trust_remote_code,
        )
        self._attach(loaded, processor, model, max_tokens, inputs, coordinates, number_from, max_images)

    @classmethod
    def from_objects(
        cls,
        model: Any,
        processor: Any,
        *,
        source: str = "model object",
        max_tokens: int = 512,
        inputs: str = "images",
        coordinates: str | None = None,
        number_from: int = 1,
        max_images: int | None = None,
    ) -> TransformersReader:
        """A reader over an already built model and its processor (or tokenizer, for ``inputs="text"``).

        ``source`` names the model in messages.
        """
        _check_options(max_tokens, inputs, coordinates, max_images, number_from)
        reader = cls.__new__(cls)
        reader._attach(model, processor, source, max_tokens, inputs, coordinates, number_from, max_images)
        return reader

    def _attach(
        self,
        model: Any,
        processor: Any,
        source: str,
        max_tokens: int,
        inputs: str,
        coordinates: str | None,
        number_from: int,
        max_images: int | None,
    ) -> None:
        if not getattr(processor, "chat_template", None):
            raise PagesightError(f"transformers reader: model '{source}' has no chat template")
        if inputs != "text" and not hasattr(processor, "image_processor"):
            raise PagesightError(
                f"transformers reader: model '{source}' has no image processor, so it reads no images; "
                "pass inputs='text' for a text-only model"
            )
        self.model = model.eval()
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.source = source
        self.max_tokens = max_tokens
        self.inputs = inputs
        family = getattr(model.config, "model_type", None)
        self.coordinates = coordinates or FAMILY_COORDINATES.get(family, DEFAULT_COORDINATES)
        self.number_from = number_from
        self.max_images = max_images
        self._template_tools: bool | None = None  # whether the chat template renders tools

    def read(
        self, question: str, context: Sequence[ContextItem], image: Image.Image | None = None
    ) -> Reading:
        """Answer ``question`` from ``context`` (and the question's ``image``, shown after the tiles)
        in one generation; cited boxes are in page pixels."""
        where = f"transformers reader (model '{self.source}')"
        if image is not None and self.inputs == "text":
            raise PagesightError(f"{where}: reads text (inputs text), so it is shown no question image")
        images = [] if self.inputs == "text" else [item.image for item in context]
        images += [image] if image is not None else []
        if self.max_images is not None and len(images) > self.max_images:
            raise PagesightError(
                f"{where}: takes at most {self.max_images} images, got {len(images)}; read them with the "
                "concat or weighted strategy"
            )
        generation = self.generate(self.messages(question, context, image), images)
        answer = strip_thinking(generation.text)
        if self.inputs == "text":
            text, cited, quotes, warnings = parse_lines(answer, context, self.number_from)
        else:
            seen = generation.seen_sizes[: len(context)] if generation.seen_sizes else None  # the tiles'
            text, cited, warnings = parse_bboxes(answer, context, self.coordinates, seen, self.number_from)
            quotes = {}
        if generation.cut:
            warnings.append(f"the answer was cut at max_tokens={self.max_tokens}")
        usage: dict = {
            "prompt_tokens": generation.prompt_tokens,
            "completion_tokens": len(generation.tokens),
            "image_tokens": generation.image_tokens,
        }
        if warnings:
            usage["warnings"] = warnings
        pieces = [self.tokenizer.decode([token], skip_special_tokens=True) for token in generation.tokens]
        logprob, tokens = answer_logprob(list(zip(pieces, generation.logprobs)), generation.text)
        reason = refusal(text)
        return Reading(text, cited, quotes, logprob, usage, tokens, reason is None, reason)

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
        """The chat ``read`` sends: instructions, then each tile labelled with its image and/or text,
        then the question's ``image`` when given, then the question. Images are ``{"type": "image"}``
        placeholders, given in order to the processor.
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
        for n, item in enumerate(context, self.number_from):
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
        self, messages: list[dict], images: Sequence[Image.Image] = (), tools: list[dict] | None = None
    ) -> Generation:
        """Greedy generation over ``messages`` (the processor's chat template, given ``tools`` when
        some) with ``images`` in order."""
        import torch

        inputs = self._inputs(messages, images, tools)
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                do_sample=False,
                max_new_tokens=self.max_tokens,
                output_logits=True,
                return_dict_in_generate=True,
            )
            steps = self.model.compute_transition_scores(
                out.sequences, tuple(logits.float() for logits in out.logits), normalize_logits=True
            )
        prompt_ids = inputs["input_ids"][0]
        tokens = out.sequences[0, prompt_ids.shape[0] :].tolist()
        eos = self.model.generation_config.eos_token_id
        eos = {eos} if isinstance(eos, int) else set(eos or ())
        image_token = getattr(self.processor, "image_token_id", None)
        grid = inputs.get("image_grid_thw")
        seen = None
        if grid is not None:
            patch = self.processor.image_processor.patch_size
            seen = [(int(w) * patch, int(h) * patch) for _, h, w in grid.tolist()]
        return Generation(
            text=self.tokenizer.decode(tokens, skip_special_tokens=True),
            tokens=tokens,
            logprobs=[float(value) for value in steps[0].tolist()],
            prompt_tokens=int(prompt_ids.shape[0]),
            image_tokens=int((prompt_ids == image_token).sum()) if image_token is not None else 0,
            cut=len(tokens) >= self.max_tokens and (not tokens or tokens[-1] not in eos),
            seen_sizes=seen,
        )


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


def _check_options(
    max_tokens: int, inputs: str, coordinates: str | None, max_images: int | None, number_from: int
) -> None:
    if max_tokens < 1:
        raise PagesightError(f"max_tokens must be 1 or more, got {max_tokens}")
    check_options(inputs, coordinates, max_images, number_from)
