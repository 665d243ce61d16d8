"""Answers from retrieved page images: readers, the context they read, citations with boxes."""

from pagesight.answer.base import (
    READERS,
    Answer,
    Citation,
    ContextItem,
    Reader,
    Reading,
    make_reader,
    register,
)

__all__ = ["READERS", "Answer", "Citation", "ContextItem", "Reader", "Reading", "make_reader", "register"]
