"""The store contract (``pagesight.testing.store``) run against every store of the project: the
local one and Qdrant's local mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight.testing.store import StoreContract


class TestLocalStore(StoreContract):
    @pytest.fixture
    def location(self, tmp_path: Path) -> str:
        return str(tmp_path / "index")


class TestQdrantStore(StoreContract):
    @pytest.fixture
    def location(self, tmp_path: Path) -> str:
        pytest.importorskip("qdrant_client")
        return f"qdrant:{tmp_path / 'index'}"
