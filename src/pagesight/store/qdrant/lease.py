"""The Qdrant store's single writer: a lease in the index point, taken by ``Store.writing`` and
renewed by each commit; a lease whose owner stopped renewing it, or whose process on this host has
ended, is taken over."""

from __future__ import annotations

import os
import socket
import time

from pagesight.errors import IndexLockedError

LEASE_SECONDS = 600.0  # a writer that stops renewing its lease for this long is taken to be gone


class Lease:
    """The lease methods of ``QdrantCatalog`` (its index point: ``load``, ``_index``, ``_save_index``)."""

    def take_lease(self, owner: str, location: str) -> None:
        self.load()
        lease = self._index.get("lease")
        if lease and lease["owner"] != owner and lease["expires"] > time.time() and not dead(lease["owner"]):
            raise IndexLockedError(f"{location}: another process ({lease['owner']}) is writing this index")
        self._index["lease"] = {"owner": owner, "expires": time.time() + LEASE_SECONDS}
        self._save_index()

    def release_lease(self, owner: str) -> None:
        self.load()
        if (self._index.get("lease") or {}).get("owner") == owner:
            self._index["lease"] = None
            self._save_index()


def dead(owner: str) -> bool:
    """Whether a lease's owner (``host:pid:nonce``) is a process of this host that has ended."""
    host, pid, _ = owner.rsplit(":", 2)
    if host != socket.gethostname():
        return False  # another machine's writer: its lease runs out on its own
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        pass
    return False
