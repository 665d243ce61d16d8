"""``inputs="auto"``: each tile as its text where its text layer covers it (no table or figure on
it, enough words, and, without layout regions, no ink outside its lines), as its image otherwise;
the prompt, the citations of both kinds, the image tokens counted, both model readers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from PIL import Image, ImageDraw

from pagesight.answer import ContextItem, Reading
from pagesight.answer.ask import ask
from pagesight.answer.context import build_context, context_tokens
from pagesight.answer.inputs import (
    MAX_UNCOVERED_INK,
    MIN_WORDS,
    as_text,
    image_items,
    text_items,
    uncovered_ink,
    why_image,
)
from pagesight.answer.prompts import check_options, instructions, parse_citations
from pagesight.errors import PagesightError
from pagesight.records import Hit, Region, Span
from pagesight.request import AskRequest

QUESTION = "What does the method rank first?"
WORDS = " ".join(f"word{i}" for i in range(12))  # twelve words a line


def _item(
    lines: int = 6,
    regions: list[Region] | None = None,
    layout: bool = True,
    figure: bool = False,
    region: Region | None = None,
) -> ContextItem:
    """A 400 x 300 tile at y = 300 on its page: ``lines`` lines of twelve words, drawn where their
    spans say; with ``figure`` a filled box below them that no line covers."""
    tile_box = (0.0, 300.0, 400.0, 600.0)
    spans = [Span(WORDS, (10.0, 310.0 + 20 * i, 390.0, 326.0 + 20 * i), "pdf") for i in range(lines)]
    hit = Hit("paper", 2, 1, 1.0, {}, "", [], (400, 900), tile_box, region)

    def render() -> Image.Image:
        image = Image.new("RGB", (400, 300), "white")
        draw = ImageDraw.Draw(image)
        for i in range(lines):
            draw.rectangle((12, 12 + 20 * i, 380, 24 + 20 * i), fill="black")  # the line's ink
        if figure:
            draw.rectangle((40, 170, 360, 290), fill="black")
        return image

    return ContextItem(hit=hit, spans=spans, load_image=render, regions=regions or [], layout=layout)


@pytest.mark.timeout(30)
def test_a_tile_goes_as_text_when_its_text_layer_covers_it():
    assert why_image(_item()) is None and as_text(_item())
    assert why_image(_item(lines=3)) == "words"  # 36 words, under MIN_WORDS
    assert MIN_WORDS > 36
    figure = Region("figure", (20.0, 450.0, 380.0, 590.0))
    assert why_image(_item(regions=[figure])) == "region"
    table = Region("table", (0.0, 100.0, 400.0, 900.0))  # a large table, a third of it on the tile
    assert why_image(_item(regions=[table])) == "region"
    sliver = Region("figure", (0.0, 590.0, 400.0, 890.0))  # a thirtieth of it on the tile
    assert why_image(_item(regions=[sliver])) is None
    caption = Region("figure_caption", (20.0, 450.0, 380.0, 590.0))  # not a table or figure
    assert why_image(_item(regions=[caption])) is None
    unit = Region("table", (0.0, 300.0, 400.0, 600.0))
    assert why_image(_item(region=unit)) == "region"  # the hit is a table unit itself


@pytest.mark.timeout(30)
def test_without_layout_regions_ink_outside_the_lines_keeps_the_image():
    assert why_image(_item(layout=False)) is None  # every dark pixel lies under a line
    assert why_image(_item(layout=False, figure=True)) == "ink"
    specks = _item(layout=False)
    page = specks.image.copy()
    for x in range(40, 360, 40):  # a speck in eight cells under the lines: dust, not a figure
        page.putpixel((x, 200), (0, 0, 0))
    specks._image = page
    assert uncovered_ink(specks) == 0.0 and why_image(specks) is None
    curve = _item(layout=False)
    page = curve.image.copy()
    ImageDraw.Draw(page).line([(20, 290), (200, 160), (380, 250)], fill="black", width=2)  # a chart's line
    curve._image = page
    assert uncovered_ink(curve) > MAX_UNCOVERED_INK and why_image(curve) == "ink"
    assert why_image(_item(layout=True, figure=True)) is None  # the layout said no figure: not rendered
    unrendered = _item(layout=True)
    unrendered.load_image = None
    assert as_text(unrendered)  # the catalog alone decides


@pytest.mark.timeout(30)
def test_prompt_and_citations_of_both_kinds():
    check_options("auto", None, None)
    assert AskRequest(QUESTION, inputs="auto").inputs == "auto"
    system = instructions("auto", "norm1000")
    assert '<bboxes image="N">' in system and '<lines passage="N">' in system
    assert "numbered together from 1" in system
    context = [_item(), _item(regions=[Region("figure", (20.0, 450.0, 380.0, 590.0))])]
    assert text_items("auto", context) == {0} and image_items("auto", context) == [context[1]]
    assert text_items("text", context) == {0, 1} and text_items("images", context) == set()
    reply = (
        'It ranks BM25 first. <lines passage="1">[2]</lines> <bboxes image="2">[[0, 0, 500, 500]]</bboxes>'
        ' <bboxes image="1">[[0, 0, 10, 10]]</bboxes> <lines passage="2">[1]</lines>'
    )
    text, cited, quotes, problems = parse_citations(reply, context, "auto", "norm1000")
    assert text == "It ranks BM25 first."
    assert cited[0] == [context[0].spans[1].box] and quotes == {0: WORDS}
    assert cited[1] == [pytest.approx((0.0, 300.0, 200.0, 450.0))]  # half the tile, on its page
    assert problems == [
        "a tag for image 1, but 1 was given as a passage: cite its lines",
        "a tag for passage 2, but 2 was given as an image: cite boxes",
    ]


class AutoReader:
    """A reader of inputs auto that answers without looking: what ``ask`` counts for it."""

    name, inputs, max_images = "auto-test", "auto", None

    def read(self, question, context) -> Reading:
        return Reading("BM25", usage={"prompt_tokens": 10})


class RegionCatalog:
    def __init__(self, regions):
        self.regions = regions

    def tile_at(self, doc_id, page, tile):
        """Tile 0 of each page holds six lines of twelve words; the others no text."""
        spans = [(WORDS, (10.0, 10.0 + 20 * i, 390.0, 26.0 + 20 * i), "pdf", 1.0) for i in range(6)]
        return SimpleNamespace(spans=spans if tile == 0 else [])

    def page_regions(self, doc_id, page):
        return self.regions


class Settings:
    layout = True


class FakeIndex:
    def __init__(self, regions):
        self.catalog, self.settings = RegionCatalog(regions), Settings()

    def tile_image(self, doc_id, page, tile=0, compression=1.0, *, rerender=False):
        return Image.new("RGB", (400, 300), "white")


@pytest.mark.timeout(30)
def test_ask_counts_the_image_tokens_of_the_image_tiles_alone():
    figure = Region("figure", (20.0, 450.0, 380.0, 590.0))
    hits = [
        Hit("paper", 2, 0, 1.0, {}, "", [], (400, 900), (0.0, 0.0, 400.0, 300.0)),
        Hit("paper", 2, 1, 0.9, {}, "", [], (400, 900), (0.0, 300.0, 400.0, 600.0)),
    ]
    index = FakeIndex([figure])
    answer = ask(index, AskRequest(QUESTION, k=2), AutoReader(), hits=hits)
    context = build_context(index, hits)
    assert [len(item.regions) for item in context] == [0, 1] and all(item.layout for item in context)
    # the first tile's words stand for it; the second has a figure (and no words)
    assert answer.usage["text_tiles"] == 1
    assert answer.usage["image_tokens"] == context_tokens(context[1:]) == 154
    worded = [_item(), _item(regions=[figure])]
    assert context_tokens(image_items("auto", worded)) == context_tokens(worded[1:]) < context_tokens(worded)


@pytest.mark.timeout(30)
def test_an_agent_refuses_auto():
    from pagesight.answer.agent import agent_ask

    class Tools(AutoReader):
        coordinates = "norm1000"

        def turn(self, transcript, tools, final):
            raise AssertionError("never asked")

    with pytest.raises(PagesightError, match="inputs auto is for readers given the tiles"):
        agent_ask(FakeIndex([]), AskRequest(QUESTION, agent=True), Tools())


@pytest.mark.timeout(60)
def test_openai_reader_sends_passages_and_images():
    pytest.importorskip("openai")
    from pagesight.answer.openai_chat import OpenAIReader

    reader = OpenAIReader(model="m", base_url="http://127.0.0.1:9/v1", inputs="auto")
    context = [_item(), _item(regions=[Region("figure", (20.0, 450.0, 380.0, 590.0))])]
    parts = reader._user_content(QUESTION, context)
    kinds = [part["type"] for part in parts]
    assert kinds == ["text", "text", "image_url", "text"]
    assert parts[0]["text"].startswith("Passage 1: paper page 2 tile 1\n[1] word0 word1")
    assert parts[1]["text"] == "Image 2: paper page 2 tile 1"
    assert "numbered together" in reader._instructions()
