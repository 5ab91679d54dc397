"""What a query is searched by in the full-text index: its FTS5 expression, the terms shown
and highlighted, and the weight (IDF) of each of its words for the match level.

The analyzer (tokens, stems, stopwords) is analysis.py's, shared with indexing; what is here
needs the index: how many chunks hold each term, and which languages the index is in.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brainmap.analysis import (
    DEFAULT_LANGUAGE,
    common_above,
    detect_language,
    fts_quote,
    is_stopword,
    query_terms,
    term_stems,
)

if TYPE_CHECKING:
    from brainmap.config import Config
    from brainmap.store import Store

MAX_QUERY_TERMS = 24  # a 10 kB query keeps its rarest terms only
MAX_CANDIDATE_TERMS = 400
LANGUAGES_TTL_S = 60.0  # how long the index's languages are taken as known


@dataclass(frozen=True)
class QueryAnalysis:
    """What a query is searched by: its FTS5 expression, the terms shown and highlighted,
    and its informative words, each with the forms that match it and its weight (IDF)."""

    expression: str | None
    terms: list[str]
    words: list[tuple[str, tuple[str, ...], float]]
    languages: tuple[str, ...]
    known: bool  # some word of the query is in the index (as written or by stem)
    function_words_only: bool  # "the", "what is it": nothing to match closely


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency; a word found nowhere weighs the most."""
    return math.log((total - df + 0.5) / (df + 0.5) + 1.0)


class QueryAnalyser:
    """Analyses queries against one store; keeps the index's languages for a while."""

    def __init__(self, cfg: Config, store: Store) -> None:
        self.cfg = cfg
        self.store = store
        self._languages: tuple[float, tuple[str, ...], frozenset[str]] | None = None

    def match_expression(self, query: str) -> tuple[str | None, list[str]]:
        """The FTS5 expression for a query and the terms it holds (see :meth:`analyse`)."""
        analysis = self.analyse(query)
        return analysis.expression, analysis.terms

    def analyse(self, query: str) -> QueryAnalysis:
        """A query's FTS5 expression (an OR of its phrases, informative terms and their
        stems) and the weight of each of its words for the match level.

        Stopwords are dropped, then terms found in more than ``df_prune`` of all chunks (or
        in none); an FTS5 OR over frequent words costs far more and ranks no better.
        """
        phrases, terms = query_terms(query)
        languages = self.languages(query)
        # the first few hundred distinct words are plenty to pick the rarest from
        words = ([t for t in terms if not is_stopword(t)] or terms)[:MAX_CANDIDATE_TERMS]
        # a phrase's words weigh in the match level as the other words do
        phrase_words = [w for p in phrases for w in p.split() if not is_stopword(w)]
        weighed_words = list(dict.fromkeys(phrase_words + words))[:MAX_CANDIDATE_TERMS]
        # each word's stems follow it: an exact match then scores above a stem-only one
        variants = term_stems(" ".join(weighed_words), languages)
        forms_of_word = {w: (w, *variants.get(w, ())) for w in weighed_words}
        candidates = list(dict.fromkeys(f for w in words for f in forms_of_word.get(w, (w,))))
        candidates = candidates[:MAX_CANDIDATE_TERMS]
        freqs = self.store.entries.doc_freqs(
            list(dict.fromkeys([*candidates, *(f for fs in forms_of_word.values() for f in fs)]))
        )
        total = max(self.store.entries.chunk_count(), 1)
        present = [t for t in candidates if freqs.get(t)]
        limit = common_above(total, self.cfg.search.df_prune)
        keep = [t for t in present if freqs[t] <= limit]
        if not keep and present and not phrases:
            keep = [min(present, key=lambda t: freqs[t])]
        keep = sorted(keep, key=lambda t: freqs[t])[:MAX_QUERY_TERMS]
        keep.sort(key=candidates.index)
        parts = [fts_quote(p) for p in phrases] + [fts_quote(t) for t in keep]
        weighed = [
            (word, forms, idf(max(freqs.get(f, 0) for f in forms), total))
            for word, forms in forms_of_word.items()
        ]
        return QueryAnalysis(
            expression=" OR ".join(parts) if parts else None,
            terms=phrases + keep,
            words=weighed,
            languages=languages,
            known=any(freqs.get(f) for _, forms, _ in weighed for f in forms),
            function_words_only=all(is_stopword(w) for w in weighed_words),
        )

    def languages(self, query: str) -> tuple[str, ...]:
        """The languages a query's words are stemmed in: the index's main ones (those of at
        least a tenth of its entries), and the one its function words tell if the index
        holds it."""
        now = time.monotonic()
        if self._languages is None or now - self._languages[0] > LANGUAGES_TTL_S:
            counts = self.store.entries.languages()
            total = sum(counts.values())
            main = [lang for lang, n in sorted(counts.items(), key=lambda kv: -kv[1])
                    if n >= total / 10][:3]  # fmt: skip
            self._languages = (now, tuple(main) or (DEFAULT_LANGUAGE,), frozenset(counts))
        _, main_languages, present = self._languages
        # two function words at least, of a language the index holds: "vi" or "die" alone
        # would stem an English query in Italian or German
        told = detect_language(query, at_least=2)
        if told in present and told not in main_languages:
            return (told, *main_languages)
        return main_languages
