"""Render stage: sources (PDF, images) become pages, pages become tiles."""

from pagesight.render.sources import SUFFIXES, open_source, source_type
from pagesight.render.tiles import cut_tiles

__all__ = ["SUFFIXES", "cut_tiles", "open_source", "source_type"]
