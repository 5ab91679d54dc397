"""What a query is searched by in the full-text index: its terms (shown and highlighted), the
rarest of them, and the weight (IDF) of each of its words for the match level.

The analyzer (tokens, stems, stopwords) is analysis.py's, shared with indexing; what is here
needs the index: how many chunks hold each term, and which languages the index is in.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from brainmap.analysis import (
    DEFAULT_LANGUAGE,
    common_above,
    detect_language,
    is_stopword,
    number_run,
    number_run_tokens,
    query_terms,
    term_stems,
)

if TYPE_CHECKING:
    from brainmap.config import Config
    from brainmap.store import Store

MAX_QUERY_TERMS = 24  # a 10 kB query keeps its rarest terms only
MAX_NUMBER_RUNS = 4  # dotted runs of numbers searched as phrases (a prompt may hold many)
MAX_CANDIDATE_TERMS = 400
RARE_ROWS = 2000  # the chunks a query's rarest terms may hold for BM25 to score only those
#: a query whose words' chunks number more than this together scores those holding all of
#: its words first (below, scoring every match costs little)
EVERY_WORD_ROWS = 20_000
#: rare terms in at most this many chunks are scored before those holding every word: they
#: cost little (PostgreSQL scores a chunk in ~45 us, FTS5 in ~2) and miss nothing of them
RARE_FIRST_ROWS = 500
MAX_CACHED_TERMS = 200_000  # document frequencies kept
STALE_SHARE = 0.01  # of the index changed since they were read: frequencies are read again


@dataclass(frozen=True)
class QueryAnalysis:
    """What a query is searched by: its terms (folded words and phrases, any of which
    matches; also shown and highlighted), and its informative words, each with the forms
    that match it and its weight (IDF)."""

    terms: list[str]
    # where the best chunks are, tried in turn until one holds enough (then every match):
    # each a list of groups of terms, a chunk holding one term of every group: its words
    # (every_word) or one group of its rarest terms (rarest)
    cuts: list[list[list[str]]]
    words: list[tuple[str, tuple[str, ...], float]]
    languages: tuple[str, ...]
    known: bool  # some word of the query is in the index (as written or by stem)
    function_words_only: bool  # "the", "what is it": nothing to match closely


def _run_freq(numbers: list[str], freqs: dict[str, int]) -> int:
    return min(freqs.get(n, 0) for n in (numbers if freqs.get(numbers[0]) else numbers[1:]))


def rarest(terms: list[str], freqs: dict[str, int], rows: int, at_least: int) -> list[str]:
    """The rarest of ``terms`` whose chunks number at most ``rows`` together, when they hold
    ``at_least`` (the candidates wanted) and leave some term out; else none (scoring every
    match costs little, or the rare terms' chunks alone would be too few).

    BM25 costs FTS5 about 2 us for every chunk it scores (tldr, 42k chunks): a query of a
    few frequent words scores ten thousand chunks. A chunk that holds none of the rare
    terms seldom ranks among the best (benchmarks/search_load.py has the figures), so only the
    chunks that hold one are scored, by all the terms."""
    chosen: list[str] = []
    held = 0
    for term in sorted(terms, key=lambda t: freqs[t]):
        if held + freqs[term] > rows:
            break
        chosen.append(term)
        held += freqs[term]
    return chosen if held >= at_least and len(chosen) < len(terms) else []


def every_word(
    terms: list[str],
    forms_of_word: dict[str, tuple[str, ...]],
    freqs: dict[str, int],
    rows: int,
    at_least: int,
) -> list[list[list[str]]]:
    """When the chunks holding one of ``terms`` number more than ``rows``: those holding every
    word of the query (one of its forms among ``terms``), then those holding its two rarest
    words; else none, and none that cannot hold ``at_least`` chunks (its rarest word is in
    fewer). (Each word fewer in turn would cost a query each: too many.)

    Scoring every chunk that holds one of a few frequent words costs the most (tldr repeated
    to 1M chunks: seconds on PostgreSQL), and those holding all of them rank first but for a
    few (a chunk holding one word many times, or in its title, can outrank them): the same
    trade as Elasticsearch's common terms query for a query of frequent terms only."""
    if sum(freqs[t] for t in terms) <= rows:
        return []
    kept = set(terms)
    groups: list[list[str]] = []
    for forms in forms_of_word.values():
        group = [f for f in forms if f in kept]
        if group and group not in groups:
            groups.append(group)
    if len(groups) < 2 or min(sum(freqs[f] for f in g) for g in groups) < at_least:
        return []
    groups.sort(key=lambda group: max(freqs[f] for f in group))
    return [groups] + ([groups[:2]] if len(groups) > 2 else [])


#: Terms in at most this many chunks are checked against a team user's libraries (a check
#: per term; the figures of more frequent terms are the whole index's)
VIEW_CHECKED_DF = 1000


def idf(df: int, total: int) -> float:
    """BM25's inverse document frequency; a word found nowhere weighs the most."""
    return math.log((total - df + 0.5) / (df + 0.5) + 1.0)


class QueryAnalyser:
    """Analyses queries against one store, with the index's figures from ``stats``."""

    def __init__(self, cfg: Config, store: Store, stats: TermStats | None = None) -> None:
        self.cfg = cfg
        self.store = store
        self.stats = stats or TermStats()
        # (text generation, view) -> whether the view holds each rare term checked
        self._held: tuple[tuple[int, frozenset[str]] | None, dict[str, bool]] = (None, {})

    def analyse(self, query: str) -> QueryAnalysis:
        """A query's terms (its phrases, informative terms and their stems, any of which
        matches) and the weight of each of its words for the match level.

        Stopwords are dropped, then terms found in more than ``df_prune`` of all chunks (or
        in none); an FTS5 OR over frequent words costs far more and ranks no better.
        """
        phrases, terms = query_terms(query)
        languages = self.languages(query)
        # the first few hundred distinct words are plenty to pick the rarest from
        words = ([t for t in terms if not is_stopword(t)] or terms)[:MAX_CANDIDATE_TERMS]
        # a quoted phrase's words weigh in the match level as the other words do; a run of
        # numbers (2.3.1) weighs as one word, held only where it is held whole: its numbers
        # one by one are in any text that counts
        quoted = [p for p in phrases if not number_run(p)]
        numbers = [p for p in phrases if number_run(p)][:MAX_NUMBER_RUNS]
        phrases = quoted + numbers
        in_numbers = number_run_tokens(query) if numbers else set()
        quoted_words = [w for p in quoted for w in p.split() if not is_stopword(w)]
        weighed_words = list(
            dict.fromkeys(quoted_words + [w for w in words if w not in in_numbers])
        )[:MAX_CANDIDATE_TERMS]
        # each word's stems follow it: an exact match then scores above a stem-only one
        variants = term_stems(" ".join(weighed_words), languages)
        forms_of_word = {w: (w, *variants.get(w, ())) for w in weighed_words}
        candidates = list(dict.fromkeys(f for w in words for f in forms_of_word.get(w, (w,))))
        candidates = candidates[:MAX_CANDIDATE_TERMS]
        freqs, total = self.stats.doc_freqs(
            self.store,
            list(dict.fromkeys([*candidates, *in_numbers,
                                *(f for fs in forms_of_word.values() for f in fs)])),
        )  # fmt: skip
        total = max(total, 1)
        freqs = self._in_view(freqs)
        present = [t for t in candidates if freqs[t]]
        limit = common_above(total, self.cfg.search.df_prune)
        # a run's numbers are kept however frequent: they find it written onto a word (v2.3.1)
        keep = [t for t in present if freqs[t] <= limit or t in in_numbers]
        if not keep and present and not quoted:
            keep = [min(present, key=lambda t: freqs[t])]
        keep = sorted(keep, key=lambda t: freqs[t])[:MAX_QUERY_TERMS]
        keep.sort(key=candidates.index)
        wanted = self.cfg.search.candidates
        rare = [] if quoted else rarest(keep, freqs, RARE_ROWS, wanted)
        cuts = []
        if not quoted and (not rare or sum(freqs[t] for t in rare) > RARE_FIRST_ROWS):
            # frequent words only, or rare terms in many chunks (a large index): the chunks
            # holding every word are scored first
            cuts = every_word(keep, forms_of_word, freqs, EVERY_WORD_ROWS, wanted)
        # a run of numbers is in no more chunks than its rarest number; its first may be
        # written onto a word (v4.5.6 is indexed v4 5 6), so it alone may be missing
        freqs = {**freqs, **{p: _run_freq(p.split(), freqs) for p in numbers}}
        weighed = [
            (word, forms, idf(max(freqs.get(f, 0) for f in forms), total))
            for word, forms in [*((p, (p,)) for p in numbers), *forms_of_word.items()]
        ]
        return QueryAnalysis(
            terms=phrases + keep,
            cuts=cuts + ([[rare]] if rare else []),
            words=weighed,
            languages=languages,
            known=any(freqs.get(f) for _, forms, _ in weighed for f in forms),
            function_words_only=not numbers and all(is_stopword(w) for w in weighed_words),
        )

    def _in_view(self, freqs: dict[str, int]) -> dict[str, int]:
        """The frequencies as a call that sees only some libraries may know them: a rare
        term none of its libraries holds is found nowhere, as a made-up word is (else its
        weight, the match level and the terms kept would tell a team's user whether another
        library holds, say, a password). Frequent terms keep the whole index's figures.
        What was checked is kept for the view until the full text changes."""
        visible = self.store.db.visible
        rare = {t for t, n in freqs.items() if 0 < n <= VIEW_CHECKED_DF}
        if visible is None or not rare:
            return freqs
        key = (self.store.entries.text_generation(), visible)
        if self._held[0] != key:
            self._held = (key, {})
        held = self._held[1]
        unchecked = [t for t in rare if t not in held]
        if unchecked:
            ids = list(self.store.entries.library_ids(visible).values())
            found = self.store.entries.held_by(unchecked, ids)
            held.update((t, t in found) for t in unchecked)
        return {t: (0 if t in rare and not held[t] else n) for t, n in freqs.items()}

    def languages(self, query: str) -> tuple[str, ...]:
        """The languages a query's words are stemmed in: the index's main ones (those of at
        least a tenth of its entries), and the one its function words tell if the index
        holds it."""
        text = self.stats.current(self.store)
        # two function words at least, of a language the index holds: "vi" or "die" alone
        # would stem an English query in Italian or German
        told = detect_language(query, at_least=2)
        if told in text.languages and told not in text.main_languages:
            return (told, *text.main_languages)
        return text.main_languages


@dataclass
class TextState:
    """What one generation of the full-text index says as a whole: its chunk count, its
    languages, and the document frequencies of the words looked up so far (``freqs``, those
    found; ``absent``, those found nowhere)."""

    generation: int
    total: int
    main_languages: tuple[str, ...]
    languages: frozenset[str]
    freqs: dict[str, int] = field(default_factory=dict)
    freqs_since: int = 0  # the generation the frequencies were read at
    absent: set[str] = field(default_factory=set)
    counted_at: int = 0  # the generation the count and the languages were read at


class TermStats:
    """The full-text index's chunk count, languages and document frequencies; one per brain,
    shared by the searchers of all its threads (a term's frequency read for one request
    serves the next).

    The text generation counts the full-text rows written and deleted. The chunk count, the
    languages and the frequencies found are kept until ``STALE_SHARE`` of the index has
    changed since they were read (a note saved every second would otherwise have every query
    read its words again, and the first after each save count every entry): a few rows more
    or less do not change what a term weighs, nor which languages the index is in. A term
    found nowhere is looked up again after any change, so that a note just saved is found by
    its new words.
    """

    def __init__(self, max_terms: int = MAX_CACHED_TERMS) -> None:
        self.max_terms = max_terms
        self._state: TextState | None = None
        self._lock = threading.Lock()

    def current(self, store: Store) -> TextState:
        """The state of the index's current generation (read again when it changed)."""
        generation = store.entries.text_generation()
        state = self._state
        if state is not None and state.generation == generation:
            return state
        # one thread reads the new state; the others, which saw the same change, wait for it
        with self._lock:
            old = self._state
            if old is not None and old.generation == generation:
                return old
            if old is not None and 0 <= generation - old.counted_at <= STALE_SHARE * old.total:
                # a few rows more or less: the count and the languages as they were (reading
                # them again scans every entry, ~5 ms at 40k, after every save of a server)
                state = replace(old, generation=generation, absent=set())
            else:
                with store.db.reading():
                    generation = store.entries.text_generation()
                    counts = store.entries.languages()
                    total = store.entries.chunk_count()
                entries = sum(counts.values())
                main = [lang for lang, n in sorted(counts.items(), key=lambda kv: -kv[1])
                        if n >= entries / 10][:3]  # fmt: skip
                languages = (tuple(main) or (DEFAULT_LANGUAGE,), frozenset(counts))
                state = TextState(generation, total, *languages, freqs_since=generation,
                                  counted_at=generation)  # fmt: skip
            if old is not None and 0 <= generation - old.freqs_since <= STALE_SHARE * state.total:
                state.freqs, state.freqs_since = old.freqs, old.freqs_since
            self._state = state
        return state

    def doc_freqs(self, store: Store, terms: list[str]) -> tuple[dict[str, int], int]:
        """How many chunks hold each of ``terms`` (folded; 0 for none), and how many chunks
        there are."""
        state = self.current(store)
        freqs, absent = state.freqs, state.absent
        with self._lock:  # another thread may clear them between the look and the answer
            known = {t: freqs[t] for t in terms if t in freqs}
            missing = [t for t in terms if t not in known and t not in absent]
        if missing:
            found = store.entries.doc_freqs(missing)
            known.update(found)
            with self._lock:
                if len(freqs) + len(absent) + len(missing) > self.max_terms:
                    freqs.clear()
                    absent.clear()
                freqs.update(found)
                absent.update(t for t in missing if t not in found)
        return {t: known.get(t, 0) for t in terms}, state.total
