"""config.toml round trip, validation, and the glob language of include/exclude."""

from __future__ import annotations

from pathlib import Path

import pytest

from brainmap import config
from brainmap.config import PathFilter, glob_regex
from brainmap.errors import UserError


def test_round_trip(tmp_path: Path) -> None:
    cfg, created = config.ensure_home(tmp_path / "h")
    assert created and (tmp_path / "h" / "brain").is_dir()
    cfg.libraries.append(config.LibraryConfig("docs", tmp_path / 'we"ird path', include=["*.md"]))
    cfg.search.rrf_k = 30
    cfg.collect.allow_from = ["~/.ssh", 'we"ird']
    config.save(cfg)
    again = config.load(tmp_path / "h")
    assert [lib.name for lib in again.libraries] == ["brain", "docs"]
    assert again.libraries[1].path == tmp_path / 'we"ird path'
    assert again.libraries[1].include == ["*.md"]
    assert again.search.rrf_k == 30
    assert again.collect.allow_from == ["~/.ssh", 'we"ird']
    assert again.libraries[0].scope == "global"


@pytest.mark.parametrize(
    "text",
    [
        "embedder = [",
        "[search]\nrrf_k = 'many'\n",
        "[search]\nunknown = 1\n",
        "[[library]]\npath = 'x'\n",
        "[search]\nrrf_k = -1\n",
        "[search]\ncandidates = 0\n",
        "[search]\ndecay_floor = 2\n",
        "[index]\nembed_batch = 0\n",
        "[index]\nchunk_tokens = 12.5\n",
        "[search]\nhalf_life_days = true\n",
        "[[library]]\nname = 'a'\npath = '/x'\ninclude = '**/*.md'\n",
        "[[library]]\nname = 'a'\npath = '/x'\nexclude = ['[z-a].md']\n",
        "[[library]]\nname = 'a'\npath = '/x'\nscope = 'world'\n",
        "[collect]\nallow_from = '~/.ssh'\n",
        "[collect]\nallow_from = [1]\n",
    ],
)
def test_bad_config_is_a_user_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(UserError):
        config.load(tmp_path)


@pytest.mark.parametrize("name", ["", "../x", "a/b", "-x", "x" * 65, "a b", "é"])
def test_library_names_are_checked(name: str) -> None:
    with pytest.raises(UserError):
        config.check_library_name(name)


def test_invalid_glob_is_refused_at_library_add(tmp_path: Path) -> None:
    from brainmap import ops

    brain = ops.Brain(tmp_path / "home")
    with pytest.raises(UserError, match="invalid glob"):
        ops.library_add(
            brain, ops.LibraryAddInput(name="x", path=str(tmp_path), include=["[z-a].md"])
        )
    assert [lib.name for lib in config.load(tmp_path / "home").libraries] == ["brain"]


def test_globs() -> None:
    md = glob_regex("**/*.md")
    assert md.fullmatch("a.md") and md.fullmatch("x/y/a.md") and not md.fullmatch("a.mdx")
    assert glob_regex("docs/*.md").fullmatch("docs/a.md")
    assert not glob_regex("docs/*.md").fullmatch("docs/sub/a.md")
    assert glob_regex("note?.[mt]d").fullmatch("note1.md")
    paths = PathFilter(config.DEFAULT_INCLUDE, [*config.DEFAULT_EXCLUDE, "drafts/**"])
    assert paths.wants("a/b.md") and not paths.wants("a/.git/x.md")
    assert paths.prunes(".obsidian") and paths.prunes("x/node_modules") and paths.prunes("drafts")
    assert not paths.prunes("docs")
    assert paths.inside_pruned("a/.git/objects/ab") and not paths.inside_pruned("a/b/c.md")
