"""The extractive reader: the question read into its program, every candidate the context offers
scored by one fitted model, the best one the answer unless it is unlikely to be supported."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pagesight.answer.base import ContextItem, Reading
from pagesight.answer.extractive.candidates import FEATURES, Candidate
from pagesight.answer.extractive.cells import Operands, Tables
from pagesight.answer.extractive.confidence import judge
from pagesight.answer.extractive.figures import table_candidates
from pagesight.answer.extractive.lines import AMOUNT, AnswerCandidate, answer_candidates
from pagesight.answer.extractive.program import Program, form, read_question, reader_model
from pagesight.answer.extractive.support import Evidence, asked, is_figure
from pagesight.encode import lexical
from pagesight.errors import PagesightError
from pagesight.text.lines import PRINTED_YEAR

DENSE_FLOOR = 0.2  # how far below the best line a table's candidate stands in MiniLM's eyes
LINES_POOL = 48  # the line candidates offered: the likeliest by their words (``_likeliest``)
PARTS_POOL = 16  # ... and those whose parts are offered too


@lru_cache(maxsize=1 << 16)
def terms(text: str) -> tuple[str, ...]:
    """``encode.lexical.terms`` of a short text, remembered: the question's words and each
    sentence's are read again for every part of it a candidate is."""
    return tuple(lexical.terms(text))


@dataclass
class Offer:
    """What a context offers a question: its program, tables, operands and every candidate."""

    program: Program
    tables: Tables
    operands: Operands
    candidates: list[Candidate]


class ExtractiveReader:
    """Picks the answer from the retrieved tiles' text (text layer or OCR): a cell, a figure
    computed from cells, a labelled value or a sentence."""

    name = "extractive"
    inputs = "text"
    max_images = None

    def __init__(
        self,
        dense: bool | None = None,
        dense_pool: int = 3,
        dense_model: str = "minilm-l6-v2",
        abstain: bool = True,
        min_support: float | None = None,
        thesaurus: str | None = "finance",
        fitted: dict | None = None,
    ):
        """``dense``: weigh the line candidates by MiniLM's static word vectors (None: when the
        dense extra is installed); ``dense_pool``: how many of the likeliest MiniLM itself reads
        too (about 25 ms an ask on two cores; 0: none, for a reader fitted without it).
        ``abstain``: decline, with the reason, when
        the probability that the chosen answer is supported (``confidence``) is under
        ``min_support`` (None: the fitted model's threshold), the answer carrying that probability
        (``Reading.support``); False: always answer. ``thesaurus``: the other names of the terms a
        table's rows go by (``search/thesauri``). ``fitted``: the fitted reader (``reader.json``'s
        content; None: the packaged one)."""
        self.thesaurus = thesaurus
        self.dense_pool = dense_pool
        self.abstain = abstain
        self.min_support = min_support
        self.fitted = fitted
        self._model = self._static = None
        if dense is not False:
            from pagesight.encode.dense import StaticMiniLM
            from pagesight.encode.dense import dense_model as load

            try:
                self._static = load(StaticMiniLM.name)
                self._model = load(dense_model) if dense_pool > 0 else None
            except PagesightError:
                if dense:
                    raise

    @property
    def model(self) -> dict:
        return reader_model() if self.fitted is None else self.fitted

    def offer(self, question: str, context: Sequence[ContextItem]) -> Offer:
        """Everything ``context`` offers ``question``, each candidate with its features."""
        model = self.model
        program = read_question(question, model.get("question", {}))
        tables = Tables.of(context)
        operands = Operands(question, program, tables, model, self.thesaurus)
        found = table_candidates(question, program, tables, operands, self.thesaurus)
        self._read_as_lines(question, program, context, found)
        found += self._line_candidates(question, program, context, tables)
        named = named_documents(question, context)
        for c in found:
            c.features["document_named"] = float(context[c.item].hit.doc_id in named)
        return Offer(program, tables, operands, found)

    def _read_as_lines(
        self, question: str, program: Program, context: Sequence[ContextItem], found: list[Candidate]
    ) -> None:
        """The line features a table's candidates share with the lines': how much of the question
        their cells' labels and headings (and their documents' names) hold, by rarity among them,
        their static similarity to it, whether they hold the form asked, their tiles' rank."""
        if not found:
            return
        read = [" ".join(c.quotes.values()) for c in found]
        extra = {
            i: set(terms(item.hit.doc_id.replace("-", " ").replace("_", " ")))
            for i, item in enumerate(context)
        }
        owned = [set(terms(text)) | extra.get(c.item, set()) for text, c in zip(read, found)]
        asked = set(terms(question))
        df = Counter(t for own in owned for t in own)
        idf = {t: math.log(1 + len(found) / (1 + df[t])) for t in asked}
        total = sum(idf.values()) or 1.0
        static = np.zeros(len(found))
        if self._static is not None:
            vectors = self._static.encode([question, *read])
            static = vectors[1:] @ vectors[0]
            static -= static.max()
        for c, own, similar in zip(found, owned, static):
            c.features |= {
                "dense": -DENSE_FLOOR if self._model is not None else 0.0,
                "coverage": min(sum(idf[t] for t in asked & own) / total, 1.0),
                "static": float(similar),
                "holds": holds(c.text, question, program),
                "rank": 1.0 - c.item / max(len(context), 1),
                "words": math.log1p(len(c.text.split())),
            }

    def scores(self, offer: Offer) -> np.ndarray:
        """Each candidate's score under the fitted scorer (a log-odds of being right)."""
        fitted = self.model.get("scorer")
        if not offer.candidates:
            return np.zeros(0)
        x = np.array([c.vector() for c in offer.candidates])
        if not fitted:
            return x[:, FEATURES.index("operation")]
        x = (x - fitted["mean"]) / np.array(fitted["scale"])
        return x @ np.array(fitted["coef"]) + fitted["intercept"]

    def read(self, question: str, context: Sequence[ContextItem]) -> Reading:
        offer = self.offer(question, context) if question.strip() else None
        if offer is None or not offer.candidates:
            if self.abstain and question.strip():
                return Reading(
                    "", usage={"candidates": 0}, answered=False, reason="the pages found have no text"
                )
            return Reading(text="", usage={"candidates": 0})
        scores = self.scores(offer)
        chosen = int(np.argmax(scores))
        best = offer.candidates[chosen]
        usage = {"candidates": len(offer.candidates), "kind": best.kind, "operation": offer.program.operation}
        support = None
        fitted = self.model.get("support")
        if self.abstain and fitted:
            judged = judge(question, context, best.item, scores, chosen, fitted)
            support = judged.support
            threshold = fitted["threshold"] if self.min_support is None else self.min_support
            if support < threshold:
                return Reading(
                    "",
                    usage={**usage, "declined_answer": best.text},
                    answered=False,
                    reason=judged.reason(threshold),
                    support=support,
                )
        return Reading(text=best.text, cited=best.cited, quotes=best.quotes, usage=usage, support=support)

    def _line_candidates(
        self, question: str, program: Program, context: Sequence[ContextItem], tables: Tables
    ) -> list[Candidate]:
        """The ``LINES_POOL`` likeliest line candidates as answers (a sentence, and for the
        ``PARTS_POOL`` likeliest the parts of it an answer may be; a labelled value and each amount
        in it), with their features."""
        lines = answer_candidates(context, tables.printed(), tables.lines)
        if not lines:
            return []
        features = line_features(question, lines, len(context))
        self._similar(question, lines, features)
        self._dense(question, lines, features)
        p = program.probabilities.get("span", 0.0)
        found = []
        order = _likeliest(features, LINES_POOL).tolist()
        likeliest = set(order[:PARTS_POOL])
        for k in sorted(order):
            c = lines[k]
            own = {name: float(values[k]) for name, values in features.items()}
            own |= {"operation": p, "log_operation": math.log(max(p, 1e-6))}
            kind = "figure" if c.places and c.label and c.value and c.answer == c.value else "sentence"
            answers = [(kind, c.answer)]
            if kind == "sentence" and k in likeliest:
                answers += [("part", part) for part in parts(c.answer, question)]
            if c.label and c.value and c.value != c.answer:
                value = c.value.strip().rstrip(".;,")
                amounts = [m.group().strip() for m in AMOUNT.finditer(value)]
                answers += [("label", value)] + [("label", a) for a in amounts if len(amounts) > 1]
            for kind, answer in dict.fromkeys(answers):
                shares = {
                    "holds": holds(answer, question, program),
                    "words": math.log1p(len(answer.split())),
                    "novelty": novelty(answer, question),
                    "part_of": len(answer.split()) / max(len(c.answer.split()), 1),
                    "follows": follows(answer, c.answer, question),
                    "measured": measured(answer, c.answer, question),
                    "unit": unit(answer),
                    "form": program.forms.get(form(answer), 0.0),
                }
                # a part of a sentence cites the sentence it was read from: its evidence
                cited = {c.item: c.boxes if kind == "part" else c.boxes_of(answer)}
                found.append(Candidate(kind, answer, c.item, cited, {c.item: c.text}, own | shares))
        return found

    def _similar(self, question: str, lines: list[AnswerCandidate], features: dict[str, np.ndarray]) -> None:
        """Each line candidate's and its label's similarity to the question by MiniLM's static
        word vectors (``encode.dense.StaticMiniLM``: a table look-up a word), less the best's: the
        words a page writes for the question's ("weighs" for "weight", "founded" for
        "established") count where no term of the question is on the line."""
        features["static"] = np.zeros(len(lines))
        features["static_label"] = np.zeros(len(lines))
        if self._static is None:
            return
        labels = list(dict.fromkeys(c.label for c in lines if c.label))
        vectors = self._static.encode([question] + [_dense_text(c) for c in lines] + labels)
        similarity = vectors[1 : 1 + len(lines)] @ vectors[0]
        features["static"] = similarity - similarity.max()
        named = dict(zip(labels, vectors[1 + len(lines) :] @ vectors[0]))
        features["static_label"] = np.array([named.get(c.label, 0.0) if c.label else 0.0 for c in lines])

    def _dense(self, question: str, lines: list[AnswerCandidate], features: dict[str, np.ndarray]) -> None:
        """MiniLM's similarity to the question of the best line candidates by their words and
        static vectors, less the best one's (``dense_pool`` at most); the rest as far below as the
        pool's last (``DENSE_FLOOR`` below the best without a model)."""
        found = np.full(len(lines), 0.0 if self._model is None else -DENSE_FLOOR)
        if self._model is not None and len(lines) > 1:
            pool = list(_likeliest(features, self.dense_pool))
            vectors = self._model.encode_queries([question] + [_dense_text(lines[i], 24) for i in pool])
            similarity = vectors[1:] @ vectors[0]
            found[:] = similarity.min() - similarity.max()
            found[pool] = similarity - similarity.max()
        features["dense"] = found


def _likeliest(features: dict[str, np.ndarray], n: int) -> np.ndarray:
    """The ``n`` line candidates likeliest by the question's words they and their labels hold
    and their static vectors' similarity: the few read further (their parts, MiniLM)."""
    first = features["coverage"] + features["static"] + features["static_label"]
    return np.argsort(-first, kind="stable")[:n]


def line_features(question: str, candidates: list[AnswerCandidate], n_items: int) -> dict[str, np.ndarray]:
    """The line candidates' features (``candidates.FEATURES``'s line block): how much of the
    question each holds, its label holds and its opening words hold (each question term weighted
    by its rarity among the candidates: a word every line has says nothing), its tile's rank, and
    whether it repeats the question, quotes, or names years other than those asked."""
    question_terms = set(terms(question))
    own_terms = [set(terms(c.own or c.text)) for c in candidates]
    df = Counter(t for own in own_terms for t in own)
    idf = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in question_terms}
    total = sum(idf.values()) or 1.0

    def held(words: set[str]) -> float:
        return min(sum(idf[t] for t in question_terms & words) / total, 1.0)

    f = {"coverage": np.array([held(own | c.extra) for c, own in zip(candidates, own_terms)])}
    f["label"] = np.array([held(set(terms(c.label))) if c.label else 0.0 for c in candidates])
    f["opening"] = np.array(
        [held(set(terms(_opening(c.own or c.text, len(question_terms))))) for c in candidates]
    )
    f["rank"] = np.array([1.0 - c.item / max(n_items, 1) for c in candidates])
    # nothing the question does not say, a section number ("3.1 The break statement") aside
    f["repeats"] = np.array([not _words(own) - question_terms for own in own_terms], dtype=float)
    f["quote"] = np.array([c.quote for c in candidates], dtype=float)
    years = set(PRINTED_YEAR.findall(question))
    found = [set(PRINTED_YEAR.findall(c.text)) for c in candidates]
    f["other_year"] = np.array([bool(years and named and not named & years) for named in found], dtype=float)
    return f


def _opening(text: str, n: int) -> str:
    """The first words of ``text`` (as many as the question has terms, and three), a leading
    section number ("2.1", "(a)") aside."""
    words = text.split()
    if (
        words
        and words[0].rstrip(".)").replace(".", "").strip("(").isalnum()
        and any(ch.isdigit() for ch in words[0])
    ):
        words = words[1:]
    return " ".join(words[: n + 3])


def parts(sentence: str, question: str) -> list[str]:
    """The parts of a sentence an answer may be: each clause between its commas and semicolons,
    what follows the last of the question's words in it (its first words that say nothing of
    their own left out: "[were due primarily to] tax adjustments"), and each amount and year it
    states that the question does not ("[was founded in] 1966"); each shorter than the sentence."""
    asked = set(terms(question))
    words = sentence.rstrip(".").split()
    found = []
    last = max((k for k, w in enumerate(words) if set(terms(w)) & asked), default=-1)
    if 0 <= last < len(words) - 1:
        rest = words[last + 1 :]
        while rest and not terms(rest[0]):  # "to", "of", "in", "is": no word of its own
            rest = rest[1:]
        found.append(" ".join(rest))
    clause = []
    for word in words + [","]:
        if word == "," or word.endswith((",", ";")):
            if word != ",":
                clause.append(word.rstrip(",;"))
            found.append(" ".join(clause))
            clause = []
        else:
            clause.append(word)
    amounts = [m for m in AMOUNT.finditer(sentence) if not _asked_figure(m.group(), question)]
    found += [m.group().strip() for m in amounts]
    found += [f"{m.group().strip()} {unit}" for m in amounts for unit in _units_after(sentence, m.end())]
    found += _names(words, asked)
    whole = " ".join(words)
    return [p for p in dict.fromkeys(found) if p and p != whole]


def _units_after(sentence: str, end: int, most: int = 2) -> list[str]:
    """The words printed right after a figure ending at ``end``, in lower case, with no mark
    between and no function word among them, one and then two of them: the figure's unit
    ("1,536 [bytes]", "12 [working days]"; not "60, which", "2019 and" nor "1024 pixels so").
    Which of them is the answer, the scorer weighs."""
    found: list[str] = []
    for word in sentence[end:].split(" ")[1 : most + 1] if sentence[end : end + 1] == " " else []:
        bare = word.rstrip(".,;:")
        if not (bare.isalpha() and bare.islower() and bare not in lexical.FUNCTION_WORDS and terms(bare)):
            break
        found.append(" ".join([*found[-1:], bare]))
        if bare != word:  # a mark after it ends the unit
            break
    return found


def unit(text: str) -> float:
    """1 when ``text`` is a figure and the words after it, its unit ("1,536 bytes")."""
    words = text.split(" ")
    for n in (1, 2):
        figure, rest = " ".join(words[:-n]), " ".join(words[-n:])
        if figure and AMOUNT.fullmatch(figure) and rest in _units_after(text, len(figure)):
            return 1.0
    return 0.0


def named_documents(question: str, context: Sequence[ContextItem]) -> set[str]:
    """The documents of ``context`` whose name or title holds one of the names the question asks
    about (``support.asked``; two of them side by side too: "Brenvik" "Harbour" for BRENVIKHARBOUR)."""
    names = [w for w in asked(question) if not is_figure(w)]
    names += [f"{a} {b}" for a, b in zip(names, names[1:])]
    if not names:
        return set()
    headings = {item.hit.doc_id: f"{item.hit.doc_id.replace('_', ' ')}\n{item.title}" for item in context}
    return {doc for doc, heading in headings.items() if any(Evidence(heading).holds(name) for name in names)}


def holds(text: str, question: str, program: Program) -> float:
    """How likely ``text`` holds the kind of answer the question asks for, beyond the question's
    own words: the question model's probability of each form (``program.FORMS``) where the text
    states a figure (a number, a date) or a name the question does not, or words."""
    asked = set(terms(question))
    stated = [m.group().strip() for m in AMOUNT.finditer(text) if not _asked_figure(m.group(), question)]
    dates = [s for s in stated if form(s) == "date"]
    numbers = [s for s in stated if form(s) == "number"]
    named = form(text) == "name" or any(
        w[:1].isupper() for w in text.split()[1:] if not set(terms(w)) <= asked
    )
    forms = program.forms
    return (
        forms.get("text", 0.0)
        + forms.get("date", 0.0) * bool(dates)
        + forms.get("number", 0.0) * bool(numbers)
        + forms.get("name", 0.0) * (named and not set(terms(text)) <= asked)
    )


def follows(part: str, sentence: str, question: str) -> float:
    """1 when ``part`` stands after the last of the question's words in its sentence ("... takes
    [1,536 bytes]"), where an answer to it usually stands."""
    at = sentence.find(part)
    if at <= 0:
        return 0.0
    asked = set(terms(question))
    before = sentence[:at].split()
    after = sentence[at + len(part) :].split()
    return float(any(set(terms(w)) & asked for w in before) and not any(set(terms(w)) & asked for w in after))


def _names(words: list[str], asked: set[str]) -> list[str]:
    """The runs of capitalised words of a sentence (its first word aside) the question does not
    name: "Hugo Kestrel", "Umeå"."""
    found, run = [], []
    for word in [*words[1:], ""]:
        bare = word.strip(",;:()\"'“”")
        if bare[:1].isupper() and not set(terms(bare)) <= asked:
            run.append(bare)
            continue
        if run:
            found.append(" ".join(run))
        run = []
    return found


def measured(text: str, sentence: str, question: str) -> float:
    """1 when ``text`` states a figure the question does not with a word of the question in the
    two words after it in its sentence: the unit asked for ("takes [1,536] bytes" for "How many
    bytes ...", where "32-bit floats" is not)."""
    asked = set(terms(question))
    at = max(sentence.find(text), 0)
    for m in AMOUNT.finditer(text):
        after = " ".join(sentence[at + m.end() :].split()[:2])
        if not _asked_figure(m.group(), question) and _words(terms(after)) & asked:
            return 1.0
    return 0.0


def _asked_figure(figure: str, question: str) -> bool:
    """Whether the question states ``figure`` ("500" in "... at 500 MHz?"; "2.3" is no term of
    it, so its terms cannot tell)."""
    return _bare(figure) in _figures(question)


@lru_cache(maxsize=256)
def _figures(question: str) -> frozenset[str]:
    return frozenset(_bare(m.group()) for m in AMOUNT.finditer(question))


def _bare(figure: str) -> str:
    return figure.strip().lstrip("$€£¥").replace(",", "")


def novelty(text: str, question: str) -> float:
    """The share of ``text``'s words (its numbers aside when it has words) the question does not hold."""
    own = list(_words(terms(text))) or terms(text)
    if not own:
        return 0.0
    asked = set(terms(question))
    return sum(t not in asked for t in own) / len(own)


def _words(stems) -> set[str]:
    """The stems that are words, not figures or section numbers."""
    return {t for t in stems if not t[:1].isdigit()}


def _dense_text(c: AnswerCandidate, most: int = 48) -> str:
    """What MiniLM reads of a candidate: a short one (a label and its value) with its page's title;
    its first ``most`` words (the full model reads 24: its time grows with the longest text, 36 ms
    a batch of four at 48 words against 25 ms at 24 on two cores)."""
    words = c.text.split()
    if len(words) <= 8 and c.title and c.title != c.text:
        return f"{c.title}: {c.text}"
    return " ".join(words[:most])
