"""The offline default reader: the answer is a sentence, a labelled value or a table cell of the
retrieved tiles, with its boxes.

No generative model is needed. Each tile's text lines are read first as a layout: lines on one row
that the OCR or the web page gave apart (a receipt's "TOTAL" and its "$48.66") are joined; runs of
lines that line up as a table (numbers in columns, or rows that start at one edge with an even
pitch) are kept apart and read with their header line; the other lines are grouped into blocks
(lines that follow each other closely; a short line without closing punctuation, such as a
heading, ends its block) and each block is split into sentences. Values are paired with the labels
that name them: "Label: value", a label followed by numbers on its row ("VAT 7%  1.68"), and a short
label line above a large figure ("Q4 Net Sales" over "$3.2 Billion"). Each candidate scores by

- how much of the question it covers, each question term weighted by its rarity among the
  candidates (a term every line has says nothing); a line is read in its document's context, so
  the words of the document's name and title count for each of its lines (a page header does not
  win by repeating them), and a table header's words count for its rows at a discount,
- its MiniLM similarity to the question, for the best candidates by the other signals (when the
  ``dense`` extra is installed),
- whether it holds the kind of answer the question asks for, beyond the question's own words: an
  amount for "how much" or "what was the total" (a percentage is a rate, not an amount), a
  percentage for a rate, a date or year for "when", a name for "who" or "which",
- whether a label names what the question asks about (its terms, or the kind: "Date:" for "when"),
  and then its value is what is returned, narrowed to the number of the kind asked for,
- for "what does X do" and "what is X", whether X is the sentence's subject (it opens it),
- how well its tile was ranked by retrieval,

and a candidate is set back when it only repeats the question (a heading, the question's own
words), when it is a quotation and the question asks for a figure or a date, or when it names a
year other than the one the question asks about. The answer is cited with the boxes of the lines
it came from, cut to the sentence's part of a line in proportion to its characters.

The reader declines when the chosen line is unlikely to be a supported answer: the probability
(``Reading.support``) of a logistic model over what of the question's specific constraints its
tile, the pages beside it and its document name, and the line's lead over the next.

Modules: ``lines.py`` (the layout and the candidates), ``questions.py`` (what a question asks
for), ``reader.py`` (the scorer), ``support.py`` (a question's constraints, found however they are
worded) and ``confidence.py`` (the probability of support; its model in ``support.json``).
"""

from pagesight.answer.extractive.reader import ExtractiveReader

__all__ = ["ExtractiveReader"]
