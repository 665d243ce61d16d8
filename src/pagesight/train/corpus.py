"""The index's tiles as training material: id, place and text of each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingTile:
    id: int
    doc_id: str
    page: int
    idx: int
    text: str

    @property
    def key(self) -> tuple[str, int, int]:
        """What a search hit names it by: (doc id, page, tile)."""
        return (self.doc_id, self.page, self.idx)


def load_tiles(catalog) -> list[TrainingTile]:
    """Every tile of the catalog with its text, in id order."""
    texts = dict(catalog.tile_texts())
    rows = catalog.tiles(list(texts), spans=False)
    return [
        TrainingTile(tile_id, row.doc_id, row.page, row.idx, texts[tile_id])
        for tile_id, row in sorted(rows.items())
    ]
