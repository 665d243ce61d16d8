import json
import subprocess

from tests.conftest import SAMPLES
from tests.test_cli import pagesight


def test_bench_reports_stages_ingest_latency_memory_and_scale(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"text": "West region revenue"}) + "\n" + json.dumps({"text": "Brightmere"}) + "\n"
    )
    result = json.loads(
        pagesight(
            "bench", str(SAMPLES), "--no-dense", "--max-pages", "4", "--ocr-pages", "1", "--scale", "3000",
            "--queries", str(queries), "--index", str(tmp_path / "ix"),
        ).stdout
    )  # fmt: skip
    assert result["machine"]["cpus"] >= 1 and result["settings"]["dense_model"] is None
    stages = result["stages"]
    assert stages["pages"] == 4 and stages["ocr_pages"] == 1
    assert all(stages[key] > 0 for key in ("render_pages_per_s", "text_layer_pages_per_s", "ocr_pages_per_s"))
    ingest = result["ingest"]
    assert (ingest["documents"], ingest["pages"], ingest["tiles"], ingest["reingest_unchanged"]) == (
        5,
        8,
        11,
        5,
    )
    listed = subprocess.run(  # the files' sizes as find(1) sees them, after the run closed the index
        ["find", str(tmp_path / "ix"), "-type", "f", "-printf", "%s\n"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ingest["bytes_on_disk"] == sum(int(size) for size in listed.stdout.split())
    assert ingest["bytes_per_page"] == round(ingest["bytes_on_disk"] / ingest["pages"])
    search = result["search"]
    assert search["queries"] == 2 and list(search["ms"]) == ["lexical"]
    assert search["ms"]["lexical"]["p50"] <= search["ms"]["lexical"]["p99"]
    assert result["memory"]["peak_rss_mb"] > 0
    (scaled,) = result["scale"]
    assert scaled["vectors"] == 3000 and scaled["recall@10_vs_exact"] == 1.0  # flat search is exact
    # what the store builds below dense.IVF_FROM vectors, as saved: float16 codes, an id, a header
    assert scaled["index"] == "faiss IndexIDMap2(IndexScalarQuantizer), fp16"
    assert 2 * 384 + 8 <= scaled["bytes_per_vector"] <= 2 * 384 + 8 + 64
