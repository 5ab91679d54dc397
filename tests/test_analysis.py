"""Query and text analysis: CJK bigrams, folding, query terms, quoting."""

from __future__ import annotations

from brainmap.analysis import fold, fts_quote, fts_text, is_stopword, query_terms, split_tokens


def test_cjk_runs_become_overlapping_bigrams() -> None:
    assert fts_text("生成密钥") == " 生成 成密 密钥 "
    assert split_tokens("用 ssh-keygen 生成密钥") == ["用", "ssh", "keygen", "生成", "成密", "密钥"]
    assert fts_text("plain latin text") == "plain latin text"


def test_mnemonic_brackets_inside_words_are_removed() -> None:
    assert fts_text("E[x]tract a g[z]ipped [c]reated Lis[t] [link](url) [x] done") == (
        "Extract a gzipped created List [link](url) [x] done"
    )


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
