"""The ``openai`` reader: any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp's server,
hosted APIs) reads the retrieved tiles and answers with citations.

One question is one chat request: a system message with the instructions and a user message that
labels each tile (``Image N: <doc id> page <page> tile <tile>``) and gives its image as a PNG data
URL, then the question's own image when it comes with one (labelled ``The question's image``),
then the question. Three kinds of input, chosen with ``inputs``:

- ``"images"``: the tile images; the model cites regions ViDoRe V3's way,
  ``<bboxes image="N">[[x0, y0, x1, y1], ...]</bboxes>``, which ``parse_bboxes`` maps to page pixels:
  on the 0..1000 grid unless ``coordinates`` says otherwise (an endpoint does not say which model
  family it serves; a Qwen2.5-VL behind it answers in ``"pixels"``, each image's size then given
  in its label). ``number_from`` 0 numbers the images (and passages) from 0.
- ``"text"``: the tiles' text layer or OCR instead of images (PixelRAG's screenshot-to-OCR
  ablation), for text-only models. The lines are numbered and the model cites them as
  ``<lines passage="N">[k, ...]</lines>``; a cited line gives its box and its text.
- ``"images+text"``: both, as ViDoRe V3's hybrid contexts; citations are boxes on the images.
- ``"auto"``: each tile's text where its text layer covers it, its image otherwise
  (``answer.inputs``), numbered together; each cited its own way.

With ``logprobs`` the reader asks for token log-probabilities and reports their sum over the
answer's tokens and their number (citation tags and thinking left out), which VisRAG's weighted
selection needs. A reasoning model's ``<think>`` block is dropped from the answer; with no tiles
the model is asked to answer from what it knows (the no-retrieval baseline). Retries with
backoff on 408/409/429/5xx and on timeouts are the ``openai`` client's (it honours Retry-After);
every failure that remains becomes a one-line ``PagesightError`` naming the endpoint and the model.

``turn`` takes part in agentic search (``answer/agent.py``) through OpenAI tool calling: the
conversation goes as chat messages (tool results as ``tool`` messages, the tiles they found as
image parts of the user message after them) and the model's ``tool_calls`` come back as calls.

Its calls go to an ``Endpoint`` (``answer/endpoint.py``, the one place every model call passes):
the one given (a server's, from the operator's offer), else one made of ``base_url``, ``api_key``
and ``model``, what is not given read from the environment (``PAGESIGHT_OPENAI_BASE_URL`` then
``OPENAI_BASE_URL``, ``PAGESIGHT_OPENAI_MODEL``, ``PAGESIGHT_OPENAI_API_KEY`` then
``OPENAI_API_KEY``; a local server needs no key: a placeholder is sent). ``chat`` is a plain
prompt-to-text completion, the callable the LLM judge of ``pagesight.eval.answers`` takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image

from pagesight.answer.abstention import refusal
from pagesight.answer.agent import Message, ToolCall, Turn
from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.endpoint import NO_ENDPOINT, Endpoint
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
from pagesight.errors import PagesightError
from pagesight.render.png import image_data_url

_HTML_TAG = re.compile(r"<[^>]*>")
_OVERLOADED = (429, 502, 503, 504, 529)


@dataclass
class _Reply:
    """What a chat completion says: its text, why it stopped, its tokens' logprobs, token counts."""

    text: str
    finish_reason: str | None
    tokens: list[tuple[str, float]] | None  # (token, logprob), when the endpoint reported them
    usage: dict
    calls: list[ToolCall] = field(default_factory=list)  # the tools the model called
    alternatives: list[dict[str, float]] | None = None  # per token: top tokens' logprobs, when asked


class OpenAIReader:
    """A reader served by an OpenAI-compatible chat endpoint."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        endpoint: Endpoint | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        max_tokens: int = 512,
        temperature: float = 0.0,
        inputs: str = "images",
        coordinates: str | None = None,
        number_from: int = 1,
        logprobs: bool = False,
        max_images: int | None = None,
    ) -> None:
        """``endpoint``: where the calls go (``answer.endpoint``); without it, ``base_url``,
        ``api_key`` and ``model`` make one, what is not given read from the environment."""
        try:
            import openai  # noqa: F401
        except ImportError:
            raise PagesightError(
                "the openai reader needs the openai package: pip install 'pagesight[openai]'"
            ) from None
        if endpoint is None:
            endpoint = Endpoint.from_environment(base_url, api_key, model)
        elif base_url is not None or api_key is not None:
            raise PagesightError("the openai reader takes an endpoint or a base_url and api_key, not both")
        if endpoint.base_url is None:
            raise PagesightError(f"the openai reader: {NO_ENDPOINT}")
        self.endpoint = endpoint
        self.model = model or endpoint.model
        if not self.model:
            raise PagesightError(
                "the openai reader needs a model: pass model= (--model) or set PAGESIGHT_OPENAI_MODEL "
                "to the name the endpoint serves"
            )
        check_options(inputs, coordinates, max_images, number_from)
        if timeout <= 0:
            raise PagesightError(f"timeout must be positive, got {timeout}")
        if max_retries < 0:
            raise PagesightError(f"max_retries must be 0 or more, got {max_retries}")
        self.base_url = endpoint.base_url
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.inputs = inputs
        self.coordinates = coordinates or "norm1000"
        self.number_from = number_from
        self.logprobs = logprobs
        self.max_images = max_images

    def read(
        self, question: str, context: Sequence[ContextItem], image: Image.Image | None = None
    ) -> Reading:
        """Answer ``question`` from ``context`` (and the question's ``image``, shown after the tiles)
        in one chat request; cited boxes are in page pixels."""
        if image is not None and self.inputs == "text":
            raise PagesightError(
                f"{self._where()}: reads text (inputs text), so it is shown no question image"
            )
        images = len(context) - len(text_items(self.inputs, context)) + (image is not None)
        if self.max_images is not None and images > self.max_images:
            raise PagesightError(
                f"{self._where()}: takes at most {self.max_images} images, got {images}; "
                "read them with the concat or weighted strategy"
            )
        messages = [
            {
                "role": "system",
                "content": self._instructions(pages=bool(context), question_image=image is not None),
            },
            {"role": "user", "content": self._user_content(question, context, image)},
        ]
        reply = self._complete(messages, logprobs=self.logprobs)
        answer = strip_thinking(reply.text)
        text, cited, quotes, warnings = parse_citations(
            answer, context, self.inputs, self.coordinates, number_from=self.number_from
        )
        if reply.finish_reason == "length":
            warnings.append(f"the answer was cut at max_tokens={self.max_tokens}")
        logprob = tokens = None
        if self.logprobs:
            if reply.tokens:
                logprob, tokens = answer_logprob(reply.tokens, reply.text)
            else:
                warnings.append("logprobs were asked for, but the endpoint returned none")
        usage = dict(reply.usage)
        if warnings:
            usage["warnings"] = warnings
        reason = refusal(text)
        return Reading(
            text=text,
            cited=cited,
            quotes=quotes,
            logprob=logprob,
            usage=usage,
            tokens=tokens,
            answered=reason is None,
            reason=reason,
        )

    def turn(self, transcript: Sequence[Message], tools: list[dict], final: bool) -> Turn:
        """One turn of agentic search: the model's reply to ``transcript`` with ``tools`` offered
        (``tool_choice`` none when ``final``, so it answers)."""
        messages = [_chat_message(message) for message in transcript]
        reply = self._complete(messages, logprobs=False, tools=tools, tool_choice="none" if final else "auto")
        return Turn(reply.text, reply.calls, reply.usage, cut=reply.finish_reason == "length")

    def chat(self, prompt: str, images: Sequence[Image.Image] = ()) -> str:
        """The model's reply to ``prompt`` (after ``images``, when given) with no instructions: a
        judge's callable, and the question writer of ``pagesight train``."""
        return self._complete([self._prompt_message(prompt, images)], logprobs=False).text.strip()

    def first_token_logprobs(self, prompt: str, images: Sequence[Image.Image] = (), top: int = 10) -> dict:
        """The log-probabilities of the endpoint's ``top`` likeliest first tokens of the reply to
        ``prompt`` (after ``images``): a yes/no judgement's confidence (the ``vlm`` reranker)."""
        reply = self._complete(
            [self._prompt_message(prompt, images)], logprobs=True, top_logprobs=top, max_tokens=1
        )
        if not reply.alternatives:
            raise PagesightError(f"{self._where()}: the endpoint returned no top log-probabilities")
        return reply.alternatives[0]

    def _prompt_message(self, prompt: str, images: Sequence[Image.Image]) -> dict:
        if not images:
            return {"role": "user", "content": prompt}
        parts: list[dict] = [{"type": "image_url", "image_url": {"url": image_data_url(i)}} for i in images]
        return {"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}

    def _instructions(self, pages: bool = True, question_image: bool = False) -> str:
        return instructions(
            self.inputs,
            self.coordinates,
            sizes_labelled=True,
            pages=pages,
            number_from=self.number_from,
            question_image=question_image,
        )

    def _user_content(
        self, question: str, context: Sequence[ContextItem], image: Image.Image | None = None
    ) -> str | list[dict]:
        """The user message: each tile labelled, then its image and/or text (with inputs auto, its
        image or its numbered lines), then the question's ``image`` when given, then the question.

        Text-only requests are one string, which every endpoint (text-only ones included) accepts.
        """
        if self.inputs == "text":
            return passages_prompt(question, context, self.number_from)
        parts: list[dict] = []
        texts = text_items(self.inputs, context)
        for n, item in enumerate(context, self.number_from):
            if n - self.number_from in texts:  # inputs auto: this tile as its text
                parts.append({"type": "text", "text": passage(item, n)})
                continue
            text = f"Image {n}: {label(item)}"
            if self.coordinates == "pixels":
                width, height = item.image_size()
                text += f" ({width}x{height} pixels)"
            parts.append({"type": "text", "text": text})
            parts.append({"type": "image_url", "image_url": {"url": image_data_url(item.image)}})
            if self.inputs == "images+text" and item.text:
                parts.append({"type": "text", "text": f"Text of image {n}:\n{item.text}"})
        if image is not None:
            parts.append({"type": "text", "text": f"{QUESTION_IMAGE}:"})
            parts.append({"type": "image_url", "image_url": {"url": image_data_url(image)}})
        parts.append({"type": "text", "text": f"Question: {question}"})
        return parts

    def _complete(
        self,
        messages: list[dict],
        logprobs: bool,
        tools: list[dict] | None = None,
        tool_choice: str | None = None,
        top_logprobs: int | None = None,
        max_tokens: int | None = None,
    ) -> _Reply:
        """One chat completion, with every failure turned into a one-line ``PagesightError``.

        The reply is read defensively: compatible servers differ, and a proxy may answer with HTML.
        """
        options: dict = {"max_tokens": max_tokens or self.max_tokens, "temperature": self.temperature}
        if logprobs:
            options["logprobs"] = True
        if top_logprobs:
            options["top_logprobs"] = top_logprobs
        if tools:
            options.update(tools=tools, tool_choice=tool_choice)
        return _parsed_reply(self._create(messages, options), self._where())

    def _create(self, messages: list[dict], options: dict):
        """The endpoint's response to ``messages``; a failed call is a one-line ``PagesightError``
        saying what to check."""
        import openai

        where = self._where()
        tries = f" after {self.max_retries + 1} tries" if self.max_retries else ""
        try:
            body = {"model": self.model, "messages": messages, **options}
            return self.endpoint.create(body, self.timeout, self.max_retries)
        except openai.APITimeoutError:
            raise PagesightError(f"{where}: no reply within {self.timeout:g} s{tries}") from None
        except openai.APIConnectionError as exc:
            cause = _one_line(str(exc.__cause__ or exc))
            raise PagesightError(f"{where}: cannot connect ({cause}); is the server running?") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise PagesightError(
                f"{where}: the API key was refused (HTTP {exc.status_code}: {_detail(exc)}); "
                "set PAGESIGHT_OPENAI_API_KEY or OPENAI_API_KEY"
            ) from None
        except openai.NotFoundError as exc:
            raise PagesightError(
                f"{where}: not found (HTTP 404: {_detail(exc)}); check the model name and that the "
                "base URL ends where the API starts (often /v1)"
            ) from None
        except openai.APIStatusError as exc:
            if exc.status_code in _OVERLOADED:
                raise PagesightError(
                    f"{where}: the server is overloaded{tries} (HTTP {exc.status_code}: {_detail(exc)}); "
                    "try again later or raise max_retries"
                ) from None
            raise PagesightError(f"{where}: HTTP {exc.status_code}: {_detail(exc)}") from None
        except openai.OpenAIError as exc:
            raise PagesightError(f"{where}: {_one_line(str(exc))}") from None

    def _where(self) -> str:
        return f"openai reader (model '{self.model}' at {self.base_url})"


def _parsed_reply(response, where: str) -> _Reply:
    """A chat completion's first choice as a ``_Reply``; what is not one (no choices, a refusal,
    a filtered answer, no text) is a one-line ``PagesightError`` naming the endpoint (``where``)."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        raise PagesightError(f"{where}: the reply is not a chat completion: {_one_line(str(response), 100)}")
    if not choices:
        raise PagesightError(f"{where}: the reply has no answer (no choices)")
    message = getattr(choices[0], "message", None)
    finish_reason = getattr(choices[0], "finish_reason", None)
    refusal = getattr(message, "refusal", None)
    if refusal:
        raise PagesightError(f"{where}: the model refused: {_one_line(str(refusal))}")
    if finish_reason == "content_filter":
        raise PagesightError(f"{where}: the answer was withheld by the endpoint's content filter")
    text = getattr(message, "content", None)
    calls = _tool_calls(getattr(message, "tool_calls", None))
    if text is None and calls:
        text = ""
    if not isinstance(text, str):
        raise PagesightError(f"{where}: the reply has no text (finish reason: {finish_reason})")
    tokens = getattr(getattr(choices[0], "logprobs", None), "content", None)
    counts = getattr(response, "usage", None)
    usage = {key: getattr(counts, key, None) for key in ("prompt_tokens", "completion_tokens")}
    return _Reply(
        text=text,
        finish_reason=finish_reason,
        tokens=[(t.token, t.logprob) for t in tokens] if tokens else None,
        usage={key: value for key, value in usage.items() if value is not None},
        calls=calls,
        alternatives=[{a.token: a.logprob for a in t.top_logprobs or ()} for t in tokens] if tokens else None,
    )


def _chat_message(message: Message) -> dict:
    """A transcript message as an OpenAI chat message; images become PNG data URLs."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.text}
    if message.role == "assistant":
        chat: dict = {"role": "assistant", "content": message.text or None}
        if message.calls:
            chat["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                    },
                }
                for call in message.calls
            ]
        return chat
    if all(isinstance(part, str) for part in message.parts):
        return {"role": message.role, "content": message.text}
    content = [
        {"type": "text", "text": part}
        if isinstance(part, str)
        else {"type": "image_url", "image_url": {"url": image_data_url(part)}}
        for part in message.parts
    ]
    return {"role": message.role, "content": content}


def _tool_calls(calls) -> list[ToolCall]:
    """The ``tool_calls`` of a reply as ``ToolCall``; a call without a function reads as a problem."""
    found = []
    for n, call in enumerate(calls if isinstance(calls, list) else [], 1):
        function = getattr(call, "function", None)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        problem = "" if isinstance(name, str) else "the tool call names no function"
        found.append(
            ToolCall(str(getattr(call, "id", None) or f"call_{n}"), name or "", arguments or "", problem)
        )
    return found


def _detail(exc: Exception) -> str:
    """The server's own error message (JSON error object, or the page it sent), on one line."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        body = body.get("message") or json.dumps(body)
    elif isinstance(body, str):
        body = _HTML_TAG.sub(" ", body)  # a proxy's error page
    return _one_line(str(body)) if body else "no details"


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
