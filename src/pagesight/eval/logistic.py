"""The logistic models ``pagesight fit-reader`` fits (scikit-learn's, on standardised features):
the candidate scorer's, the row and column models', the support model's, and the question model's
heads over hashed words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagesight.answer.extractive.program import hashed, question_features
from pagesight.errors import PagesightError

C = 1.0
C_QUESTION = 10.0  # the question model's inverse regularisation (held-out accuracy at 1, 3, 10, 30: .82, .86, .87, .87)


@dataclass
class Logistic:
    """A fitted logistic model as the reader's package file holds it."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float

    def to_dict(self) -> dict:
        return {"mean": self.mean, "scale": self.scale, "coef": self.coef, "intercept": self.intercept}


def fit_logistic(X: np.ndarray, y: np.ndarray, C: float = C, weights: np.ndarray | None = None) -> Logistic:
    """scikit-learn's logistic regression on standardised features."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting the reader needs scikit-learn: pip install 'pagesight[eval]'") from None
    if y.all() or not y.any():
        raise PagesightError("fitting needs both right and wrong examples")
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale < 1e-6] = 1.0  # a feature that does not vary (or only in its sixth decimal)
    model = LogisticRegression(C=C, max_iter=5000).fit((X - mean) / scale, y, sample_weight=weights)
    return Logistic(
        mean.round(6).tolist(),
        scale.round(6).tolist(),
        model.coef_[0].round(6).tolist(),
        round(float(model.intercept_[0]), 6),
    )


def fit_head(questions: Sequence[str], labels: Sequence[str], C: float = C_QUESTION) -> dict:
    """One head of the question model: a (multinomial) logistic regression over each question's
    hashed features (``program.question_features``), its weights kept for the buckets questions
    use."""
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise PagesightError("fitting the reader needs scikit-learn: pip install 'pagesight[eval]'") from None
    from scipy import sparse

    X = sparse.csr_matrix(np.vstack([hashed(question_features(q)) for q in questions]))
    model = LogisticRegression(C=C, max_iter=5000).fit(X, np.array(labels))
    classes = [str(c) for c in model.classes_]
    # a bucket no two questions share says little of questions to come: left out, the model
    # package small (its weights rounded, as its probabilities need no more)
    shared = np.asarray((X > 0).sum(axis=0)).ravel() >= 2
    used = np.flatnonzero(shared & (np.abs(model.coef_).max(axis=0) > 0.03))
    weights = {str(int(b)): model.coef_[:, b].round(3).tolist() for b in used}
    return {"classes": classes, "intercept": model.intercept_.round(3).tolist(), "weights": weights}
