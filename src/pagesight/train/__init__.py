"""Learning from the user's corpus: synthetic queries, hard negatives, contrastive training.

``pagesight train`` strings the modules together: ``queries`` (synthetic queries per tile),
``negatives`` (mined from the index, false negatives filtered), ``contrastive`` (InfoNCE training of
the dense text model, the cross-encoder reranker and visual encoders' LoRA adapters) and
``dataset`` (the queries written as an evaluation dataset, so ``pagesight eval`` runs on them).
Heavy libraries load inside the functions that train.
"""
