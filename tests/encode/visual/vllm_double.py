"""A stand-in for vLLM's OpenAI-compatible server on loopback, serving tiny random-weight models
behind vLLM's documented request and response shapes (vLLM cannot serve a vision-language model on
these machines: its CPU build pins torch, and its Qwen-VL models import torchvision).

Read in vLLM's repository (the commits are named in ``pagesight.encode.vllm_client``): ``/pooling``
takes ``{model, task, input | messages, chat_template, add_special_tokens, encoding_format}`` and
answers ``{id, object: "list", created, model, data: [{index, object: "pooling", data}], usage}``;
``/v1/embeddings`` the same with ``{index, object: "embedding", embedding}``; ``/v1/models`` lists
``{id, object: "model", root, max_model_len, ...}``. Errors are ``{"error": {"message", "type",
"param", "code"}}``: an unknown model 404, a request's chat template refused without
``trust_request_chat_template``, a prompt past ``max_model_len`` 400, no key 401.

What vLLM does with a request the double does with transformers, none of it pagesight's code: the
chat template rendered over the conversation (an image part given to it as ``{"type": "image"}``,
vLLM's "openai" content format), the standard ``Qwen3VLProcessor`` (vLLM's ColQwen3 and ColQwen3.5
models force it) on the prompt and the decoded images in the request's own thread (vLLM's frontend
works apart from its engine), the tokens checked against ``max_model_len``, then the model and its
pooler: ``token_embed``, the ColQwen head's vector of every
token, L2-normalised (vLLM's ``ColQwen3Model.forward``: backbone, ``custom_text_proj``, normalise);
``embed``, the last token's final hidden state, normalised. Requests that arrive together are run
as one batch (left-padded), as vLLM's scheduler batches across clients.

A test queues faults (``Double.faults``: a status, headers and body answered before the model runs:
429 with ``Retry-After``, 503, a redirect) and reads what came in (``Double.seen``: path, headers,
body). ``python -m tests.encode.visual.vllm_double NAME=KIND:FOLDER ... --port P`` serves in a process
of its own (the benchmarks).
"""

from __future__ import annotations

import argparse
import base64
import collections
import io
import json
import queue
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import transformers
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from PIL import Image

from pagesight.encode.visual.processors import image_only

KINDS = ("colqwen3", "colqwen3.5", "qwen3-vl-embedding")
DTYPES = {"float32": np.float32, "float16": np.float16}  # embed_dtype (numpy holds no bfloat16)
ORDERS = ("native", "little", "big")
WINDOW = 0.005  # seconds the scheduler waits for more requests to join a batch


def error(
    status: int, message: str, kind: str = "BadRequestError", headers: dict | None = None
) -> JSONResponse:
    """vLLM's error body."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


@dataclass
class Served:
    """One model the double serves: ``kind`` (``KINDS``) from ``folder``."""

    kind: str
    folder: str
    model: Any = None
    processor: Any = None
    task: str = ""

    def load(self) -> None:
        if self.kind in ("colqwen3", "colqwen3.5"):
            from pagesight.encode.visual.late_interaction import import_colpali

            models = import_colpali()
            model_class = models.ColQwen3 if self.kind == "colqwen3" else models.ColQwen3_5
            self.model = model_class.from_pretrained(self.folder, dtype=torch.float32).eval()
            self.task = "token_embed"
        else:
            self.model = transformers.Qwen3VLModel.from_pretrained(self.folder, dtype=torch.float32).eval()
            self.task = "embed"
        self.processor = image_only(transformers.Qwen3VLProcessor).from_pretrained(self.folder)
        self.processor.tokenizer.padding_side = "left"

    def prepare(self, prompts: list[str], images: list[Image.Image]) -> dict:
        """The processor's inputs of one request (its prompts, unpadded when one), on the CPU: what
        vLLM's frontend does apart from the engine."""
        return dict(self.processor(text=prompts, images=images or None, padding=True, return_tensors="pt"))

    def run(self, prepared: list[dict]) -> list[tuple[torch.Tensor, int]]:
        """The pooled output of each prompt of the requests ``prepared`` and its token count, run as
        one left-padded batch."""
        inputs = collate(prepared, self.processor.tokenizer.pad_token_id)
        tokens = inputs["attention_mask"].sum(dim=1).tolist()
        with torch.inference_mode():
            if self.task == "token_embed":
                backbone = type(self.model).__mro__[1]  # Qwen3VLModel or Qwen3_5Model
                hidden = backbone.forward(self.model, **inputs, use_cache=False).last_hidden_state
                vectors = torch.nn.functional.normalize(self.model.custom_text_proj(hidden), dim=-1)
                mask = inputs["attention_mask"].bool()
                return [(rows[keep], count) for rows, keep, count in zip(vectors, mask, tokens)]
            hidden = self.model(**inputs).last_hidden_state
            pooled = torch.nn.functional.normalize(hidden[:, -1], dim=-1)  # left padding: the last is real
            return list(zip(pooled, tokens))


TOKENS = ("input_ids", "attention_mask", "mm_token_type_ids")  # a value a token, padded on the left


def collate(prepared: list[dict], pad: int) -> dict:
    """Requests' processor outputs as one batch: their token rows left-padded to the longest (the
    pad token, 0 elsewhere), the rest (the images' patches and grids) one after another in the
    rows' order."""
    width = max(part["input_ids"].shape[1] for part in prepared)
    batch = {}
    for key in {key for part in prepared for key in part}:
        parts = [part[key] for part in prepared if key in part]
        if key not in TOKENS:
            batch[key] = torch.cat(parts)
            continue
        padded = [
            torch.nn.functional.pad(rows, (width - rows.shape[1], 0), value=pad if key == "input_ids" else 0)
            for rows in parts
        ]
        batch[key] = torch.cat(padded)
    return batch


@dataclass
class _Job:
    served: Served
    prepared: dict
    count: int  # prompts
    done: Future = field(default_factory=Future)


class Double:
    """The server (module docstring): ``models`` by served name; ``api_key`` required when set;
    ``trust_request_chat_template`` as vLLM's flag; ``max_model_len`` per prompt; ``max_batch``
    prompts a forward pass takes."""

    def __init__(
        self,
        models: dict[str, Served],
        api_key: str | None = None,
        trust_request_chat_template: bool = True,
        max_model_len: int = 4096,
        max_batch: int = 16,
    ):
        self.models, self.api_key = models, api_key
        self.trust, self.max_model_len, self.max_batch = trust_request_chat_template, max_model_len, max_batch
        for served in models.values():
            served.load()
        self.faults: collections.deque[tuple[int, dict, Any]] = collections.deque()
        self.seen: list[tuple[str, dict, Any]] = []
        self.forward_sizes: list[int] = []  # prompts in each forward pass
        self.in_flight = self.most_in_flight = 0  # requests being answered at once
        self.delay = 0.0  # seconds each request waits before it is answered (a busy server)
        self._counting = threading.Lock()
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._worker = threading.Thread(target=self._schedule, daemon=True, name="double-scheduler")
        self._worker.start()
        self.app = self._app()
        self._server: uvicorn.Server | None = None
        self.url = ""

    # the HTTP side -----------------------------------------------------------------------------

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def authorize(request: Request, call_next):
            if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
            return await call_next(request)

        @app.get("/v1/models")
        def models(request: Request):
            self.seen.append(("/v1/models", dict(request.headers), None))
            data = [
                {
                    "id": name,
                    "object": "model",
                    "created": int(time.time()),
                    "owned_by": "vllm",
                    "root": served.folder,
                    "parent": None,
                    "max_model_len": self.max_model_len,
                }
                for name, served in self.models.items()
            ]
            return {"object": "list", "data": data}

        @app.post("/pooling")
        def pooling(request: Request, body: dict):
            return self._answer("/pooling", request, body)

        @app.post("/v1/embeddings")
        def embeddings(request: Request, body: dict):
            return self._answer("/v1/embeddings", request, body)

        return app

    def _answer(self, path: str, request: Request, body: dict):
        with self._counting:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return self._answered(path, request, body)
        finally:
            with self._counting:
                self.in_flight -= 1

    def _answered(self, path: str, request: Request, body: dict):
        self.seen.append((path, dict(request.headers), body))
        time.sleep(self.delay)
        if self.faults:
            status, headers, content = self.faults.popleft()
            if isinstance(content, str):
                return error(status, content, headers=headers)
            return JSONResponse(content, status_code=status, headers=headers)
        served = self.models.get(body.get("model"))
        if served is None:
            return error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
        wanted = "token_embed" if path == "/pooling" else "embed"
        if served.task != wanted or body.get("task", wanted) != wanted:
            return error(400, f"Task {body.get('task', wanted)} is not supported by {body['model']}")
        encoding = (
            body.get("encoding_format", "float"),
            body.get("embed_dtype", "float32"),
            body.get("endianness", "native"),
        )
        if encoding[0] not in ("float", "base64") or encoding[1] not in DTYPES or encoding[2] not in ORDERS:
            return error(400, f"the double answers float, or base64 of {'/'.join(DTYPES)}, alone")
        try:
            prompts, images = self._prompts(served, body)
        except ValueError as exc:
            return error(400, str(exc))
        prepared = served.prepare(prompts, images)
        tokens = int(prepared["attention_mask"].sum(dim=1).max())
        if tokens > self.max_model_len:
            return error(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, you "
                f"requested {tokens} tokens in the input for embedding generation. Please reduce the "
                "length of the input.",
            )
        job = _Job(served, prepared, len(prompts))
        self._jobs.put(job)
        outputs = job.done.result()
        key, kind = ("data", "pooling") if path == "/pooling" else ("embedding", "embedding")
        data = [{"index": i, "object": kind, key: _encoded(v, *encoding)} for i, (v, _) in enumerate(outputs)]
        tokens = sum(count for _, count in outputs)
        content = {
            "id": f"pool-{time.monotonic_ns()}",
            "object": "list",
            "created": int(time.time()),
            "model": body["model"],
            "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return Response(json.dumps(content), media_type="application/json")

    def _prompts(self, served: Served, body: dict) -> tuple[list[str], list[Image.Image]]:
        """The prompts and images of a request, as vLLM's renderer makes them."""
        if "messages" in body:
            template = body.get("chat_template")
            if template is not None and not self.trust:
                raise ValueError(
                    "Chat template is passed with request, but --trust-request-chat-template is not set. "
                    "Refused request with untrusted chat template."
                )
            images, conversation = [], []
            for message in body["messages"]:
                parts = message["content"]
                if isinstance(parts, str):
                    conversation.append(message)
                    continue
                content = []
                for part in parts:
                    if part["type"] == "text":
                        content.append({"type": "text", "text": part["text"]})
                    elif part["type"] == "image_url":
                        images.append(_decoded(part["image_url"]["url"]))
                        content.append({"type": "image"})
                    else:
                        raise ValueError(f"Unknown part type: {part['type']}")
                conversation.append({"role": message["role"], "content": content})
            prompt = served.processor.apply_chat_template(
                conversation,
                chat_template=template,
                tokenize=False,
                add_generation_prompt=body.get("add_generation_prompt", False),
            )
            return [prompt], images
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise ValueError("input must be a string or a list of strings")
        return texts, []

    # the scheduler -----------------------------------------------------------------------------

    def _schedule(self) -> None:
        """Jobs of one model run together, up to ``max_batch`` prompts a forward pass."""
        while (job := self._jobs.get()) is not None:
            batch = [job]
            deadline = time.monotonic() + WINDOW
            while sum(j.count for j in batch) < self.max_batch:
                try:
                    more = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if more is None or more.served is not job.served:
                    self._jobs.put(more)
                    break
                batch.append(more)
            try:
                self.forward_sizes.append(sum(j.count for j in batch))
                outputs = [(v.float().numpy(), n) for v, n in job.served.run([j.prepared for j in batch])]
            except Exception as exc:  # every request of the batch sees the failure
                for j in batch:
                    j.done.set_exception(exc)
                continue
            start = 0
            for j in batch:
                j.done.set_result(outputs[start : start + j.count])
                start += j.count

    # running -----------------------------------------------------------------------------------

    def start(self, port: int = 0) -> Double:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
        self._server = uvicorn.Server(config)
        thread = threading.Thread(target=self._server.run, daemon=True, name="double-http")
        thread.start()
        while not self._server.started:
            if not thread.is_alive():
                raise RuntimeError("the double did not start")
            time.sleep(0.01)
        bound = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{bound}"
        self._thread = thread
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._jobs.put(None)

    def __enter__(self) -> Double:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _encoded(vectors, encoding: str, dtype: str, order: str):
    """An output's vectors as vLLM writes them: JSON numbers, or base64 of their values flattened
    in ``dtype`` and byte ``order`` (``serial_utils.tensor2binary``)."""
    if encoding == "float":
        return vectors.tolist()
    flat = vectors.astype(DTYPES[dtype]).ravel()
    if order != "native" and order != sys.byteorder:
        flat = flat.byteswap()
    return base64.b64encode(flat.tobytes()).decode("ascii")


def _decoded(url: str) -> Image.Image:
    """A data URL's image, as vLLM's media connector reads it (RGB)."""
    header, _, data = url.partition(",")
    if not header.startswith("data:image/") or ";base64" not in header:
        raise ValueError("the double reads data:image/...;base64 URLs alone")
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="NAME=KIND:FOLDER")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    models = {}
    for given in args.models:
        name, _, rest = given.partition("=")
        kind, _, folder = rest.partition(":")
        models[name] = Served(kind, folder)
    double = Double(models).start(args.port)
    print(f"serving at {double.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        double.stop()


if __name__ == "__main__":
    main()
