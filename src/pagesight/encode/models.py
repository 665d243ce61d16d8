"""Loading models, whichever stage uses them (visual encoders, dense text models, rerankers, readers,
training): extras named when a library is missing, hub models refused at once when neither cached
nor reachable, loading failures as one line naming the model, leave to run a model's own code
(``trust_remote_code``) asked for in one wording, PEFT adapters merged with their fit checked, and
transformers' load reports kept quiet.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pagesight.errors import PagesightError

HUB_PROBE_TIMEOUT = 3.0  # seconds to reach the hub before a missing model is refused


def require(module: str, extra: str) -> Any:
    """Import ``module``, or raise a ``PagesightError`` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise PagesightError(
            f"this model needs '{module.split('.')[0]}' ({error}): install the '{extra}' extra "
            f"(pip install 'pagesight[{extra}]')"
        ) from None


def looks_like_path(model: str) -> bool:
    """Whether ``model`` names a local folder rather than a hub id (``org/name``)."""
    if Path(model).expanduser().exists():
        return True
    return model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model


def load_pretrained(what: str, model: str, loader: Callable[..., Any], **kwargs: Any) -> Any:
    """``loader(model, **kwargs)`` with loading failures (missing folder, unreachable hub, bad
    checkpoint) turned into a one-line ``PagesightError`` naming the model."""
    if looks_like_path(model):
        if not Path(model).expanduser().is_dir():
            raise PagesightError(f"cannot load the {what} from '{model}': no such folder")
    else:
        check_available(model, kwargs.get("revision"))
    try:
        with quiet_transformers():
            return loader(model, **kwargs)
    except PagesightError:
        raise
    except Exception as error:  # a third-party loader: anything it raises means the model is unusable
        if asks_for_trust(error):
            raise remote_code_refused(f"the {what}", model) from None
        first = first_line(error)
        if "ignore_mismatched_sizes" in first:  # transformers' message points at a report it logged
            first = "its weights have other shapes than this encoder's architecture (another model family?)"
        raise PagesightError(f"cannot load the {what} from '{model}': {first}") from None


def first_line(error: Exception) -> str:
    """The first line of what ``error`` says, or its type's name when it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


TRUST_FLAG = "--trust-remote-code"


def remote_code_refused(what: str, model: str) -> PagesightError:
    """The one-line refusal of a model that runs code of its own (an ``auto_map`` in its config
    names its classes in Python files beside its weights) when leave to run it was not given."""
    return PagesightError(
        f"{what} '{model}' runs code of its own, shipped with the model: pass {TRUST_FLAG} "
        "(trust_remote_code=True) to run it, if you trust its source"
    )


def asks_for_trust(error: Exception) -> bool:
    """Whether ``error`` is transformers' refusal to run a model's own code without
    ``trust_remote_code=True`` (it names that argument, in every version's wording)."""
    return "trust_remote_code=True" in str(error)


# where a visual model's folder is given: the index's encoder at ingestion, a reranker at a search
MODEL_OPTIONS = "ingest --encoder-model FOLDER, or search and ask --rerank-model FOLDER"


def check_available(model: str, revision: str | None = None, option: str = MODEL_OPTIONS) -> None:
    """Refuse at once, in one line saying what to do, a hub model that is neither in the local
    Hugging Face cache nor downloadable (offline mode, or the hub out of reach), rather than
    letting the hub client retry every file for minutes."""
    import huggingface_hub
    from huggingface_hub import constants

    try:
        huggingface_hub.snapshot_download(model, revision=revision, local_files_only=True)
        return
    except Exception:  # not cached (or a partial cache): can it be downloaded?
        pass
    if constants.HF_HUB_OFFLINE:
        reason = "the Hugging Face hub is switched off here (HF_HUB_OFFLINE)"
    else:
        host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
        try:
            socket.create_connection((host, 443), timeout=HUB_PROBE_TIMEOUT).close()
            return
        except OSError:
            reason = f"{host} cannot be reached"
    raise PagesightError(
        f"model '{model}' is not on this machine and {reason}: download it where the hub is reachable "
        f"(hf download {model} --local-dir FOLDER), copy the folder here and pass it: {option}"
    )


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' logging at error level while loading (its load reports list the LM head a
    bare backbone leaves out, which is expected here); the caller's level is restored after."""
    if "transformers" not in sys.modules:
        yield
        return
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def apply_adapter(model: Any, adapter: str | None, key_mapping: dict[str, str] | None = None) -> Any:
    """``model`` with the PEFT (LoRA) adapter at ``adapter`` (hub id or folder) merged into its
    weights; ``model`` itself when no adapter is given. ``key_mapping`` renames the adapter's weights
    (regular expressions, as peft applies them) when it was trained on a model that nests this one.

    peft only warns when an adapter's weights do not fit the model, and then leaves those layers
    untouched; that would silently give the base model's vectors, so it is an error here."""
    if adapter is None:
        return model
    peft = require("peft", "visual")

    def load(path: str) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            wrapped = peft.PeftModel.from_pretrained(model, path, key_mapping=key_mapping)
        if any("missing adapter keys" in str(warning.message) for warning in caught):
            raise PagesightError(
                f"cannot load the adapter from '{path}': its weights do not match the layers of the model "
                f"({type(model).__name__})"
            )
        return wrapped

    return load_pretrained("adapter", adapter, load).merge_and_unload()


def hub_revision(config: Any) -> str | None:
    """The commit a hub checkpoint was loaded at; None for a local folder."""
    return getattr(config, "_commit_hash", None)
