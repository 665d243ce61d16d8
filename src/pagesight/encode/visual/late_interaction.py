"""Late-interaction (ColBERT-style) encoders through colpali-engine's own model and processor classes.

A page becomes one 128-dim vector per token (image patches and prompt tokens), a query one vector
per query token; MaxSim scores them. Padding positions, which colpali-engine's models zero out,
are dropped, so each array holds exactly the input's real tokens.

colpali-engine's package ``__init__`` imports every model family, and its Qwen processors import
``smart_resize`` from transformers' torchvision image-processor module. Without torchvision (a CPU
install) that import fails although the function itself needs no torchvision, so ``import_colpali``
lends colpali-engine transformers' PIL copy of the function for the duration of the import, then
removes the loan: nothing else in the process ever sees it.

Each family's padding behaviour is settled in its module: ColQwen derives rotary positions from the
attention mask; ColSmol (causal Llama) and ColModernVBert (bidirectional ModernBERT) mask padding
keys and use relative rotary positions; ColPali needs ``token_type_ids`` to get the bidirectional
attention it was trained with under every batch, and its tied LM head restored (see ``colpali``).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from PIL import Image

from pagesight.encode.models import require
from pagesight.encode.visual.base import TorchEncoder, normalize
from pagesight.encode.visual.processors import image_only
from pagesight.errors import PagesightError

if TYPE_CHECKING:
    import torch

EXTRA = "colpali"
_TORCHVISION_MODULE = "transformers.models.qwen2_vl.image_processing_qwen2_vl"


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"


def import_colpali() -> Any:
    """``colpali_engine.models``, importable without torchvision."""
    if "colpali_engine.models" in sys.modules:
        return sys.modules["colpali_engine.models"]
    require("transformers", EXTRA)
    loaned = False
    if importlib.util.find_spec("torchvision") is None and _TORCHVISION_MODULE not in sys.modules:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

        stand_in = types.ModuleType(_TORCHVISION_MODULE, "smart_resize only, for colpali-engine's import")
        stand_in.smart_resize = smart_resize
        sys.modules[_TORCHVISION_MODULE] = stand_in
        loaned = True
    try:
        return require("colpali_engine.models", EXTRA)
    finally:
        if loaned:
            del sys.modules[_TORCHVISION_MODULE]


class LateInteractionEncoder(TorchEncoder):
    """A colpali-engine ``Col*`` model and processor: ``process_images`` for pages and image
    queries, ``process_queries`` (with its query augmentation tokens) for text queries."""

    multi_vector: ClassVar[bool] = True
    extra: ClassVar[str] = EXTRA
    model_class: ClassVar[str]
    processor_class: ClassVar[str]
    backbone: ClassVar[str | None] = None  # transformers' module of the backbone, when recent

    def __init__(
        self,
        model: str | None = None,
        device: str = "auto",
        adapter: str | None = None,
        batch_size: int = 4,
        dtype: str = "auto",
        revision: str | None = None,
        max_pixels: int | None = None,
    ):
        super().__init__(model, device, adapter, batch_size, dtype, revision)
        self._check_backbone()
        models = import_colpali()
        if not hasattr(models, self.model_class):
            raise PagesightError(
                f"visual encoder '{self.name}' needs colpali-engine's {self.model_class}, which colpali-engine "
                f"{_version('colpali-engine')} lacks: pip install -U 'colpali-engine>=0.3.18'"
            )
        processor_class = image_only(getattr(models, self.processor_class))
        self.processor = self._from_pretrained("processor", processor_class.from_pretrained)
        self.max_pixels = self._configure_images(max_pixels)
        self.model = self._load_model(getattr(models, self.model_class))
        self.dim = int(self.model.dim)

    def _check_backbone(self) -> None:
        """Refuse, in one line, a transformers without the backbone this family is built on."""
        require("transformers", EXTRA)
        if (
            self.backbone is not None
            and importlib.util.find_spec(f"transformers.models.{self.backbone}") is None
        ):
            raise PagesightError(
                f"visual encoder '{self.name}' needs transformers' {self.backbone} backbone, which transformers "
                f"{_version('transformers')} lacks: pip install -U transformers"
            )

    def _configure_images(self, max_pixels: int | None) -> int:
        """Apply ``max_pixels`` to the processor; returns the largest image the model sees unscaled."""
        raise NotImplementedError

    def _embed(self, batch: Any) -> list[torch.Tensor]:
        batch = self._to_device(batch)
        output = self.model(**batch)
        mask = batch["attention_mask"].bool()
        return [vectors[keep] for vectors, keep in zip(output, mask)]

    def _prepare_images(self, images: list[Image.Image]) -> Any:
        return self.processor.process_images(images)

    def _embed_prepared(self, prepared: Any) -> list[torch.Tensor]:
        return self._embed(prepared)

    def _embed_queries(self, texts: list[str]) -> list[torch.Tensor]:
        return self._embed(self.processor.process_queries(texts))

    def patch_similarity(self, image: Image.Image, query: str) -> np.ndarray:
        """Each of ``image``'s patches' best similarity to ``query``'s tokens, as the (rows,
        columns) grid the model cut the image into (``search.explain``), from the same unit
        vectors MaxSim ranks with."""
        from pagesight.vectors.maxsim import best_similarity

        image = image if image.mode == "RGB" else image.convert("RGB")
        batch = self.processor.process_images([image])
        where = self.processor.get_image_mask(batch)[0].cpu().numpy().astype(bool)
        with self.torch.inference_mode():
            (tokens,) = self._embed(batch)  # one image: every token real, in the input's order
        patches = normalize(tokens.float().cpu().numpy())[where]
        rows, columns, order = self._patch_layout(image, len(patches))
        (query_vectors,) = self.encode_queries([query])
        return best_similarity(patches[order].reshape(rows, columns, -1), query_vectors)

    def _patch_layout(self, image: Image.Image, tokens: int) -> tuple[int, int, np.ndarray]:
        """(rows, columns, order) of the patch grid the model cuts ``image`` into: ``order`` gives,
        for each cell in raster order, its image token's place among the ``tokens``. Here the
        tokens are the grid in raster order (ColPali, ColQwen)."""
        columns, rows = self._patch_grid(image)
        if tokens != rows * columns:
            raise PagesightError(
                f"visual encoder '{self.name}': {tokens} image tokens for a grid of {columns}x{rows} patches"
            )
        return rows, columns, np.arange(tokens)

    def _patch_grid(self, image: Image.Image) -> tuple[int, int]:
        """(columns, rows) of the patches the model cuts ``image`` into (colpali-engine's
        ``get_n_patches``)."""
        raise PagesightError(
            f"visual encoder '{self.name}' draws no similarity maps (the late-interaction ones do)"
        )
