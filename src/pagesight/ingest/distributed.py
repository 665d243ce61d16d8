"""Ingestion on Ray Data: reading and encoding spread over a Ray cluster, commits in one place.

    planned files ─► read        Ray tasks; each file in its own limited worker process, exactly
                 │               as local ingestion reads it (``workers.read_files``: time limit,
                 │               memory cap, a crash fails the file alone)
                 ├─► dense       an actor pool holding the text model (``num_gpus`` when asked)
                 ├─► visual      an actor pool holding the visual encoder, a GPU each when the
                 │               cluster has GPUs (``visual_gpus``); a batch's documents' tiles
                 │               encoded together (``visual.encode_documents``)
                 └─► the driver  commits each document into the store, one at a time

The driver is the index's single writer, so the store's promises hold unchanged: whole documents
only, a killed run resumes by ingesting again (unchanged files are skipped by the plan). Every node
reads the input files at the paths the driver names, so on a cluster they live on a shared file
system. ``address`` is a Ray address (``ray://HOST:10001``, ``HOST:6379`` or ``auto``); without
one, a local Ray starts in this process and stops at the end.

Rows carry documents and vectors pickled, so Ray Data moves them as opaque bytes through its
object store; each stage handles a few documents per batch to keep memory flat.
"""

from __future__ import annotations

import logging
import pickle
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from pagesight.errors import PagesightError
from pagesight.ingest.options import RayOptions, TextOptions
from pagesight.ingest.workers import FileTask, TimeLimit
from pagesight.settings import Settings

FILES_PER_TASK = 4  # files one read task takes; small, so a slow file holds few others back
DOCUMENTS_PER_BATCH = 4  # documents an encoder actor takes at once


@contextmanager
def cluster(address: str | None) -> Iterator[None]:
    """Ray connected: to ``address``, to the Ray this process already joined, or a local one."""
    try:
        import ray
    except ImportError:
        raise PagesightError("ingestion on Ray needs the ray extra: pip install 'pagesight[ray]'") from None
    started = False
    if not ray.is_initialized():
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = address or "a local Ray"
            raise PagesightError(f"cannot start or reach {where}: {str(exc).splitlines()[0]}") from None
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def read_and_encode(
    todo: list[FileTask],
    settings: Settings,
    text_options: TextOptions,
    *,
    limit: TimeLimit,
    max_memory: int | None,
    options: RayOptions,
    batch: int | None = None,
    devices: set[str] | None = None,
) -> Iterator[tuple[FileTask, object, dict, dict, dict | None]]:
    """(task, Document | UNCHANGED | exception, dense vectors, visual vectors, visual spec) for
    every task, in the order the cluster finishes them, the visual encoder taking ``batch`` tiles a
    call (None: ``feeding.default_batch`` on its device); where its actors ran goes into
    ``devices`` ("cuda (Ray GPU 3)"). Runs inside ``cluster``."""
    import ray
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the caller's progress callback reports per file
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    rows = [
        {"path": str(task.path), "doc_id": task.doc_id, "known": task.known_sha256 or ""} for task in todo
    ]
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, -(-len(rows) // FILES_PER_TASK)))
    dataset = dataset.map_batches(
        _read,
        batch_size=FILES_PER_TASK,
        fn_kwargs={
            "settings": settings,
            "text_options": text_options,
            "limit": limit,
            "max_memory": max_memory,
        },
        compute=ray.data.TaskPoolStrategy(size=options.readers),
        num_cpus=1,
    )
    dataset = _encoding(dataset, settings, options, batch)
    by_path = {str(task.path): task for task in todo}
    for row in dataset.iter_rows():
        outcome = pickle.loads(row["outcome"])
        dense = pickle.loads(row["dense"]) if row.get("dense") else {}
        visual = pickle.loads(row["visual"]) if row.get("visual") else {}
        spec = pickle.loads(row["spec"]) if row.get("spec") else None
        if devices is not None and row.get("where"):
            devices.add(row["where"])
        yield by_path[row["path"]], outcome, dense, visual, spec


def _encoding(dataset, settings: Settings, options: RayOptions, batch: int | None):
    """``dataset`` of documents read, then encoded by the index's models' actor pools. An encoder
    actor is not restarted: Ray Data keeps its constructor's arguments in the object store, from
    which a restart cannot be sure to read them (ray-project/ray#53727), and says so in an error
    line on every run of restartable actors; a dead encoder fails the run instead.
    ``max_restarts=0`` is how Ray Data's actor pool is told (2.60 names it no other way, and warns
    that such extra arguments are deprecated: that warning is left out)."""
    import ray.data

    actors = ray.data.ActorPoolStrategy(size=options.encoders)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        if settings.dense_model:
            dataset = dataset.map_batches(
                DenseStage,
                batch_size=DOCUMENTS_PER_BATCH,
                fn_constructor_kwargs={"settings": settings},
                compute=actors,
                num_gpus=options.gpus_per_encoder or 0,
                max_restarts=0,
            )
        if settings.visual_encoder:
            dataset = dataset.map_batches(
                VisualStage,
                batch_size=DOCUMENTS_PER_BATCH,
                fn_constructor_kwargs={
                    "settings": settings,
                    "device": options.device,
                    "trust_remote_code": options.trust_remote_code,
                    "batch": batch,
                },
                compute=actors,
                num_gpus=visual_gpus(options, ray.cluster_resources()),
                max_restarts=0,
            )
    return dataset


def visual_gpus(options: RayOptions, resources: dict) -> float:
    """GPUs each visual encoder actor asks for: ``options.gpus_per_encoder`` when given, else one
    when the cluster has a GPU (Ray then gives each actor a GPU of its own, ``CUDA_VISIBLE_DEVICES``
    naming it, and ``--ray-encoders N`` spreads N actors over N GPUs), else none."""
    if options.gpus_per_encoder is not None:
        return options.gpus_per_encoder
    return 1.0 if resources.get("GPU", 0) >= 1 else 0.0


def _read(
    batch: dict, settings: Settings, text_options: TextOptions, limit: TimeLimit, max_memory: int | None
) -> dict:
    """Read a few files, each in a worker process of its own (the local limits and isolation)."""
    from pathlib import Path

    from pagesight.ingest.workers import read_files

    tasks = [
        FileTask(Path(path), doc_id, known or None)
        for path, doc_id, known in zip(batch["path"], batch["doc_id"], batch["known"])
    ]
    done = list(read_files(tasks, settings, text_options, workers=1, limit=limit, max_memory=max_memory))
    return {"path": [str(task.path) for task, _ in done], "outcome": [pickle.dumps(out) for _, out in done]}


def _documents(batch: dict) -> Iterator[tuple[int, object]]:
    """(row, Document) for the rows of ``batch`` that hold a document read."""
    from pagesight.records import Document

    for row, blob in enumerate(batch["outcome"]):
        outcome = pickle.loads(blob)
        if isinstance(outcome, Document):
            yield row, outcome


class DenseStage:
    """An actor holding the index's dense text model: the chunk vectors of each document."""

    def __init__(self, settings: Settings):
        from pagesight.encode.dense import dense_model

        self.settings = settings
        self.model = dense_model(settings.dense_model)

    def __call__(self, batch: dict) -> dict:
        from pagesight.ingest.encoding import encode_text

        vectors = [b""] * len(batch["outcome"])
        for row, document in _documents(batch):
            vectors[row] = pickle.dumps(encode_text(document, self.model, self.settings))
        return {**batch, "dense": vectors}


class VisualStage:
    """An actor holding the index's visual encoder: the vectors of each document's tile images,
    rendered again on the node from the file (as local ingestion does), and the encoder's spec."""

    def __init__(self, settings: Settings, device: str, trust_remote_code: bool, batch: int | None = None):
        from pagesight.encode.visual import make_encoder
        from pagesight.ingest.feeding import default_batch

        self.settings = settings
        self.encoder = make_encoder(
            settings.visual_encoder,
            model=settings.visual_model,
            adapter=settings.visual_adapter,
            device=device,
            trust_remote_code=trust_remote_code,
        )
        self.batch = batch or default_batch([self.encoder])
        import ray

        gpus = ", ".join(str(gpu) for gpu in ray.get_gpu_ids())
        self.where = f"{self.encoder.device} (Ray GPU {gpus})" if gpus else str(self.encoder.device)

    def __call__(self, batch: dict) -> dict:
        from pagesight.ingest.visual import encode_documents

        outcomes, vectors = list(batch["outcome"]), [b""] * len(batch["outcome"])
        read = list(_documents(batch))
        rows = [row for row, _ in read]
        found = encode_documents([document for _, document in read], self.encoder, self.settings, self.batch)
        for row, encoded in zip(rows, found):
            if isinstance(encoded, Exception):  # the file changed under us: it fails alone, as locally
                outcomes[row] = pickle.dumps(encoded)
            else:
                vectors[row] = pickle.dumps(encoded)
        spec = pickle.dumps(self.encoder.spec())
        where = [self.where] * len(outcomes)
        return {
            **batch,
            "outcome": outcomes,
            "visual": vectors,
            "spec": [spec] * len(outcomes),
            "where": where,
        }
