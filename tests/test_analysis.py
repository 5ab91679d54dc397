"""Query and text analysis: CJK bigrams, folding, query terms, quoting."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brainmap.analysis import (
    detect_language,
    fold,
    fts_quote,
    fts_text,
    is_stopword,
    other_forms,
    query_terms,
    split_tokens,
    term_stems,
)


def test_cjk_runs_become_overlapping_bigrams() -> None:
    assert fts_text("生成密钥") == " 生成 成密 密钥 "
    assert split_tokens("用 ssh-keygen 生成密钥") == ["用", "ssh", "keygen", "生成", "成密", "密钥"]
    assert fts_text("plain latin text") == "plain latin text"


def _tokens_char_by_char(text: str) -> list[str]:
    """The definition: maximal runs of letters, digits, marks and private-use characters."""
    tokens, current = [], ""
    for ch in fts_text(text):
        category = unicodedata.category(ch)
        if category[0] in "LNM" or category == "Co":
            current += ch
        elif current:
            tokens, current = [*tokens, current], ""
    return [*tokens, current] if current else tokens


# letters, digits, marks, private use, punctuation, spaces, underscores, CJK, emoji
_TEXT = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from("a_Z9 -.\u0301\u0915\u093f\ue000\u00e9\u4e2d\u6587\U0001f600\u3000"),
    )
)


@given(_TEXT)
def test_tokens_are_runs_of_letters_digits_marks_and_private_use(text: str) -> None:
    assert split_tokens(text) == _tokens_char_by_char(text)


def test_bracketed_words_are_indexed_as_written_and_joined() -> None:
    text = "E[x]tract a g[z]ipped [c]reated Lis[t] [link](url) [x] done, then array[i]"
    assert fts_text(text) == text  # the tokenizer sees what is written: array, i
    assert split_tokens("array[i] = 0") == ["array", "i", "0"]
    forms = other_forms(text, "none").split()
    assert {"extract", "gzipped", "created", "list", "arrayi"} <= set(forms)
    assert "link" not in forms and "x" not in forms and "done" not in forms


def test_stems_in_english_spanish_and_italian() -> None:
    assert other_forms("She painted and was painting", "english").split() == ["paint", "paint"]
    assert other_forms("Comprime los archivos", "spanish").split() == ["comprim", "archiv"]
    assert other_forms("Comprimere gli archivi", "italian").split() == ["comprim", "archiv"]
    # Greek stems are unaccented: a query typed without accents meets them
    assert other_forms("μαγείρευε μουσακά", "greek").split() == ["μαγειρευ", "μουσακ"]
    assert term_stems("μουσακα", ("greek",)) == {"μουσακα": ["μουσακ"]}
    assert other_forms("paint the wall", "english") == ""  # nothing beyond what is written
    assert other_forms("painted", "none") == ""
    # the query side: each term with its stems, folded, in the languages asked for
    assert term_stems("painting Archivos", ("english", "spanish")) == {
        "painting": ["paint"],
        "archivos": ["archivo", "archiv"],
    }


def test_language_is_told_by_function_words() -> None:
    assert detect_language("What did she paint in the summer of that year?") == "english"
    assert detect_language("Comprime o descomprime los archivos de una carpeta") == "spanish"
    assert detect_language("Crea un archivio compresso della cartella con i file") == "italian"
    assert detect_language("Η γιαγιά μαγείρευε για όλη την οικογένεια") == "greek"
    assert detect_language("ΕΙΝΑΙ ΓΙΑ ΤΗΝ ΟΙΚΟΓΕΝΕΙΑ") == "greek"  # capitals, no accents
    assert is_stopword("ειναι") and is_stopword("είναι")
    assert detect_language("tar xzf") is None
    assert detect_language("用 ssh-keygen 生成密钥") is None


def test_fold_matches_unicode61_remove_diacritics() -> None:
    assert fold("Café") == "cafe"
    assert fold("ÜBER") == "uber"
    assert fold("perché") == "perche"
    # only Latin letters lose their diacritics, one character at a time, no compatibility forms
    assert fold("Найти ФАЙЛЫ") == "найти файлы"
    assert fold("ΛΌΓΟΣ") == "λόγοσ"
    assert fold("データベース 개발했다 ﬁle cafe\u0301") == "データベース 개발했다 ﬁle cafe"


# letters unicode61 folds otherwise: its Unicode tables predate them (or, ǡ, keep a diacritic)
_NEWER_THAN_SQLITE = {0x1E0, 0x1E1, 0x37F}


def test_fold_is_what_sqlite_indexes_in_latin_greek_cyrillic_kana_and_hangul() -> None:
    """Query terms are folded as the FTS5 tokenizer folds the text: checked against SQLite
    itself, character by character."""
    import apsw

    from brainmap.analysis import FTS_TOKENIZER

    ranges = [(0xC0, 0x250), (0x1E00, 0x1F00), (0x370, 0x400), (0x400, 0x500),
              (0x3040, 0x3100), (0xAC00, 0xD7A4)]  # fmt: skip
    chars = [chr(c) for a, b in ranges for c in range(a, b)
             if unicodedata.category(chr(c))[0] in "LM" and c not in _NEWER_THAN_SQLITE]  # fmt: skip
    db = apsw.Connection(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize={fts_quote(FTS_TOKENIZER)})")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    with db:
        for i, ch in enumerate(chars, 1):
            db.execute("INSERT INTO t(rowid, x) VALUES (?, ?)", (i, f"q{ch}q"))
    indexed = {doc: term for term, doc in db.execute("SELECT term, doc FROM v")}
    wrong = [(hex(ord(ch)), indexed.get(i), fold(f"q{ch}q"))
             for i, ch in enumerate(chars, 1) if indexed.get(i) != fold(f"q{ch}q")]  # fmt: skip
    assert not wrong, wrong[:20]


def test_query_terms_phrases_and_dedup() -> None:
    phrases, terms = query_terms('How do I "undo the commit" undo?')
    assert phrases == ["undo the commit"]
    assert terms == ["how", "do", "i", "undo"]
    assert query_terms('unbalanced "quote')[1] == ["unbalanced", "quote"]
    assert query_terms("AND OR NOT * ( ) : -") == ([], ["and", "or", "not"])


def test_stopwords_and_quoting() -> None:
    assert is_stopword("the") and is_stopword("della") and is_stopword("cuando")
    assert not is_stopword("commit")
    assert fts_quote('say "hi"') == '"say ""hi"""'


def test_a_full_stem_cache_never_loses_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    from brainmap import analysis

    monkeypatch.setattr(analysis, "_STEM_CACHE_SIZE", 50)
    monkeypatch.setattr(analysis, "_stem_caches", {})
    first = " ".join(f"walking{chr(97 + i % 26)}{i}" for i in range(45))
    other_forms(first, "english")
    mixed = first + " " + " ".join(f"running{chr(97 + i % 26)}{i}" for i in range(30))
    assert other_forms(mixed, "english") == other_forms(mixed, "english")
    assert "painted" not in other_forms("painted", "none")
    assert term_stems("painting", ("none",)) == {}
