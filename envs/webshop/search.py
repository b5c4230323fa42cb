"""Keyword search over the catalog with BM25 (bm25s), standing in for WebShop's pyserini index.

Why our own ranking loop: bm25s's top-k uses partial sorts whose tie order is not specified; we take
the full score vector (1000 docs, cheap) and sort by (-score, catalog index) so identical queries give
identical pages everywhere. Like WebShop, at most 50 results are returned (5 pages of 10).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import bm25s
import numpy as np

from envs.webshop.catalog import Product

TOP_N = 50
PAGE_SIZE = 10
_TOKEN = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
# Lucene's English stop words (what WebShop's pyserini analyzer drops) plus a few pronouns.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with i me my we our you your am".split())


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def product_document(p: Product) -> str:
    """What a product is found by: title, type, attributes, option values, description, features."""
    opts = " ".join(v for values in p.options.values() for v in values)
    return " ".join([p.title, p.product_type, " ".join(p.attributes), opts, p.description, " ".join(p.features)])


class SearchEngine:
    def __init__(self, products: Sequence[Product]):
        self.asins = [p.asin for p in products]
        self._bm25 = bm25s.BM25()
        self._bm25.index([tokenize(product_document(p)) for p in products], show_progress=False)
        self._vocab = set(self._bm25.vocab_dict)
        self._cached = lru_cache(maxsize=8192)(self._search_tokens)

    def search(self, query: str, top_n: int = TOP_N) -> tuple[str, ...]:
        """Asins of the best `top_n` products with a positive score, best first."""
        tokens = tuple(t for t in tokenize(query) if t in self._vocab)
        return self._cached(tokens, top_n)

    def _search_tokens(self, tokens: tuple[str, ...], top_n: int) -> tuple[str, ...]:
        if not tokens:
            return ()
        scores = np.asarray(self._bm25.get_scores(list(tokens)), dtype=np.float64)
        idx = np.flatnonzero(scores > 0)
        order = idx[np.lexsort((idx, -scores[idx]))][:top_n]
        return tuple(self.asins[i] for i in order)
