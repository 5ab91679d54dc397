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
    assert detect_language("tar xzf") is None
    assert detect_language("用 ssh-keygen 生成密钥") is None


def test_fold_matches_unicode61_remove_diacritics() -> None:
    assert fold("Café") == "cafe"
    assert fold("ÜBER") == "uber"
    assert fold("perché") == "perche"


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
