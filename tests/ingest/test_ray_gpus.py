"""Ray's visual encoder actors on GPUs: each asks for one GPU of its own when the cluster has GPUs,
so ``--ray-encoders N`` spreads N actors over N GPUs. The cluster here is a local Ray told it has
two GPUs (a declared resource: Ray places actors by it, and torch, seeing no CUDA, runs them on
the CPU), which is what placement reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagesight import Index
from pagesight.ingest.distributed import visual_gpus
from pagesight.ingest.options import RayOptions
from tests.conftest import make_pdf

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(180)


@pytest.mark.timeout(30)
def test_a_visual_encoder_actor_asks_for_a_gpu_when_the_cluster_has_one():
    assert visual_gpus(RayOptions(), {"CPU": 16.0, "GPU": 2.0}) == 1.0
    assert visual_gpus(RayOptions(), {"CPU": 16.0}) == 0.0
    assert visual_gpus(RayOptions(gpus_per_encoder=0.5), {"GPU": 2.0}) == 0.5  # as asked
    assert visual_gpus(RayOptions(gpus_per_encoder=0), {"GPU": 2.0}) == 0


def test_encoder_actors_take_a_gpu_each_on_a_cluster_with_gpus(tmp_path: Path):
    pytest.importorskip("transformers")
    from tests.encode.visual.conftest import clip_report_and_memo
    from tests.ingest.test_feeding import stored_vectors

    settings = clip_report_and_memo(tmp_path)
    more = [make_pdf(tmp_path / f"note{n}.pdf", [[f"Note {n} on owls"]]) for n in range(4)]
    pdfs = [tmp_path / "report.pdf", tmp_path / "memo.pdf", *more]
    local = Index.open(tmp_path / "local", settings=settings, device="cpu")
    assert local.add(pdfs, ocr="never").ok
    # two actors and a read task hold a CPU each: declared, as the GPUs are
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        on_ray = Index.open(tmp_path / "ray", settings=settings)
        report = on_ray.add(pdfs, ocr="never", ray=RayOptions(encoders=2, device="cpu"))
    finally:
        ray.shutdown()
    assert report.ok
    # every actor that encoded was given a GPU of its own (Ray numbers them 0 and 1 here)
    devices = report.visual["devices"]
    assert devices and set(devices) <= {"cpu (Ray GPU 0)", "cpu (Ray GPU 1)"}, devices
    expected, got = stored_vectors(local), stored_vectors(on_ray)
    assert len(expected) == 7 and expected.keys() == got.keys()
    for key, vector in expected.items():
        assert abs(float(vector @ got[key]) - float(vector @ vector)) < 1e-3
    local.close()
    on_ray.close()
