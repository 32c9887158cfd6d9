"""Pure ranking for memory recall: keyword ranking (BM25) and cosine similarity of embeddings.

Both rankers return ``(id, score)`` pairs, best first, ties broken by id, so the same input
always gives the same order (a resumed run sees the same memories).
"""

from __future__ import annotations

import math
import re
import struct
from collections import Counter
from collections.abc import Sequence

__all__ = [
    "bm25_rank",
    "cosine",
    "from_blob",
    "similarity_rank",
    "to_blob",
    "tokenize",
]

_WORD = re.compile(r"\w+")
_STOPWORD_TEXT = """
    a about above after again all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves
    out over own same she should so some such than that the their theirs them themselves then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of ``text``, without common English stopwords.

    Possessives and plain plurals are folded (``dog's``, ``dogs`` → ``dog``), so a memory and a
    question about it meet on the same terms.

    Args:
        text: Any text.
    """
    out = []
    for word in _WORD.findall(text.casefold()):
        if word in _STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def bm25_rank(
    query: str,
    documents: Sequence[tuple[str, str]],
    *,
    k1: float = 1.5,
    b: float = 0.75,
) -> list[tuple[str, float]]:
    """Rank ``(id, text)`` documents for ``query`` by BM25, best first, ties by id.

    Scores are never negative (the IDF is ``ln(1 + (N - n + 0.5) / (n + 0.5))``). A document
    whose tokens equal the query's ranks above every other; one that contains the query's tokens
    as a phrase ranks above those that do not. A document sharing no term scores 0.

    Args:
        query: The text to match.
        documents: The candidates as ``(id, text)``.
        k1: Term-frequency saturation.
        b: Length normalisation (0: none, 1: full).
    """
    terms = tokenize(query)
    docs = [(doc_id, tokenize(text)) for doc_id, text in documents]
    if not docs:
        return []
    n_docs = len(docs)
    avg_len = sum(len(t) for _, t in docs) / n_docs or 1.0
    df: Counter[str] = Counter()
    for _, tokens in docs:
        df.update(set(tokens))
    unique = set(terms)
    idf = {t: math.log(1.0 + (n_docs - df[t] + 0.5) / (df[t] + 0.5)) for t in unique}
    scores: list[tuple[str, float, int]] = []
    for doc_id, tokens in docs:
        tf = Counter(tokens)
        norm = k1 * (1.0 - b + b * len(tokens) / avg_len)
        score = 0.0
        for term in unique:
            f = tf.get(term, 0)
            if f:
                score += idf[term] * f * (k1 + 1.0) / (f + norm)
        level = 0
        if terms and tokens == terms:
            level = 2
        elif terms and _contains(tokens, terms):
            level = 1
        scores.append((doc_id, score, level))
    # Exact and phrase matches are lifted above every plain score, keeping scores monotone.
    lift = max(s for _, s, _ in scores) + 1.0
    ranked = [(doc_id, score + level * lift) for doc_id, score, level in scores]
    ranked.sort(key=lambda p: (-p[1], p[0]))
    return ranked


def _contains(tokens: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    return any(tokens[i : i + n] == phrase for i in range(len(tokens) - n + 1))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors; 0 when either is all zeros.

    Args:
        a: One vector.
        b: Another, of the same length.

    Raises:
        ValueError: The lengths differ.
    """
    if len(a) != len(b):
        raise ValueError(f"vectors of {len(a)} and {len(b)} dimensions cannot be compared")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))


def similarity_rank(
    query: Sequence[float], vectors: Sequence[tuple[str, Sequence[float]]]
) -> list[tuple[str, float]]:
    """Rank ``(id, vector)`` pairs by cosine similarity to ``query``, best first, ties by id.

    Args:
        query: The query's embedding.
        vectors: The candidates' embeddings as ``(id, vector)``.
    """
    ranked = [(doc_id, cosine(query, vec)) for doc_id, vec in vectors]
    ranked.sort(key=lambda p: (-p[1], p[0]))
    return ranked


def to_blob(vector: Sequence[float]) -> bytes:
    """A vector as little-endian float32 bytes.

    Args:
        vector: The embedding.
    """
    return struct.pack(f"<{len(vector)}f", *vector)


def from_blob(blob: bytes) -> list[float]:
    """A vector stored by ``to_blob``.

    Args:
        blob: Its bytes (a multiple of 4).
    """
    if len(blob) % 4:
        raise ValueError(f"an embedding blob of {len(blob)} bytes is not float32 values")
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))
