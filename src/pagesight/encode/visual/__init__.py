"""Visual encoders: page images and queries to vectors, chosen by name (``make_encoder``).

Importing this package costs nothing heavy; torch, transformers, peft and colpali-engine load when
an encoder is built. See ``base`` for the protocol and the registry.
"""

from pagesight.encode.visual.base import (
    ENCODERS,
    VisualEncoder,
    check_compatible,
    describe_spec,
    joint_queries,
    make_encoder,
    register,
)

__all__ = [
    "ENCODERS",
    "VisualEncoder",
    "check_compatible",
    "describe_spec",
    "joint_queries",
    "make_encoder",
    "register",
]
