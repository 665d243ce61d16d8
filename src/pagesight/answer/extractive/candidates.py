"""What the extractive reader chooses among: every answer its context offers, of every kind, with
the features its fitted scorer weighs (``FEATURES``).

A candidate is a sentence or a part of one, a labelled value, a figure under its label, a table
cell, or a figure a question's program computes from cells (``figures.py``), each with its
answer text, the boxes it cites and the quotes it reads. Its features are named; those a kind
does not have are 0, and each kind has a feature of its own (``kind:<name>``), so one logistic
model scores them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagesight.answer.extractive.program import OPERATIONS
from pagesight.records import Box

# read from a tile's lines (``lines.py``); a part: a sentence's clause, or what follows the
# question's words in it ("... primarily due to [higher interest rates]")
LINE_KINDS = ("sentence", "part", "label", "figure", "row")
TABLE_KINDS = ("cell", *(op for op in OPERATIONS if op != "span"))  # a cell, or computed from cells
KINDS = (*LINE_KINDS, *TABLE_KINDS)
FEATURES = (
    "operation",  # the question model's probability of the candidate's operation
    "log_operation",
    *(f"kind:{kind}" for kind in KINDS),
    # cells and computed figures
    "rows",  # the mean likelihood of its operands' rows (``cells.Operands``)
    "rows_min",
    "columns",  # ... and columns
    "columns_min",
    "operands",  # log(its operands)
    "periods_found",  # the share of the periods the question names that its operands' columns name
    "percent_cells",  # its operands are percentages
    "unsigned",  # an average or sum of figures printed negative, taken as their amounts
    "count_rows",  # a count of a section's rows
    "count_under",  # a count of the periods whose figure is below the question's bound (else above)
    # lines
    "coverage",  # how much of the question it holds, by rarity among the candidates
    "dense",  # MiniLM's similarity to the question, against the best candidate's
    "static",  # MiniLM's static word vectors' similarity to the question, against the best's
    "static_label",  # ... of its label's
    "form",  # the question model's probability of the form of its answer (a number, a date, words)
    "holds",  # ... of each form it states beyond the question's words (``reader.holds``)
    "label",  # its label names the question's terms
    "opening",  # it opens with the question's words
    "rank",  # its tile's rank
    "document_named",  # its document's name or title holds a name the question asks about
    "repeats",  # it says nothing the question does not
    "quote",  # a quotation
    "other_year",  # it names years, none the question names
    "words",  # log(1 + its answer's words)
    "novelty",  # the share of its answer's words the question does not hold
    "part_of",  # the share of its sentence's words a part keeps
    "follows",  # a part stands after the last of the question's words in its sentence
    "measured",  # it states a figure in a unit the question names ("1,536 bytes" for "how many bytes")
    "unit",  # a figure and the word after it, its unit ("1024 pixels")
)


@dataclass
class Candidate:
    """An answer the context offers: its ``kind`` (``KINDS``), text, the boxes it cites and the
    text they quote by context item, the context item it mainly stands in, and its features."""

    kind: str
    text: str
    item: int
    cited: dict[int, list[Box]] = field(default_factory=dict)
    quotes: dict[int, str] = field(default_factory=dict)
    features: dict[str, float] = field(default_factory=dict)

    def vector(self) -> list[float]:
        found = {**self.features, f"kind:{self.kind}": 1.0}
        return [found.get(name, 0.0) for name in FEATURES]
