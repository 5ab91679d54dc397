"""Project identity from a working directory: real git repositories and real worktrees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from brainmap import ops
from brainmap.config import Config, LibraryConfig
from brainmap.project import git_root, identify
from conftest import run_cli, write


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=env).stdout  # fmt: skip


def repo(path: Path) -> Path:
    write(path / "src" / "app.py", "print('hi')\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path


def test_worktrees_of_one_repository_are_one_project(tmp_path: Path) -> None:
    main = repo(tmp_path / "webapp")
    git(main, "worktree", "add", "-q", str(tmp_path / "feature-x"), "-b", "feature-x")
    cfg = Config(home=tmp_path / "home")
    here = identify(cfg, tmp_path / "feature-x" / "src")
    there = identify(cfg, main / "src")
    assert here.name == there.name == "webapp"
    assert here.root == there.root == main and here.git
    assert git_root(tmp_path / "feature-x") == main
    # a file's path is its path in the worktree it is in
    assert here.relative(tmp_path / "feature-x" / "src" / "app.py") == "src/app.py"
    assert there.relative(main / "src" / "app.py") == "src/app.py"
    # a symlink to a checkout is the same project
    (tmp_path / "link").symlink_to(main)
    linked = identify(cfg, tmp_path / "link" / "src")
    assert (linked.name, linked.root) == ("webapp", main)
    assert linked.relative(tmp_path / "link" / "src" / "app.py") == "src/app.py"


def test_a_library_holding_the_project_names_it(tmp_path: Path) -> None:
    main = repo(tmp_path / "webapp")
    write(main / "docs" / "a.md", "# A\n")
    cfg = Config(home=tmp_path / "home")
    cfg.libraries = [LibraryConfig("brain", tmp_path / "home" / "brain", "global"),
                     LibraryConfig("shop", main), LibraryConfig("shop-docs", main / "docs")]  # fmt: skip
    found = identify(cfg, main / "src")
    assert found.name == "shop"  # the library whose folder holds the repository
    assert found.libraries == ("shop", "shop-docs")  # and every library inside it
    assert found.relative(main / "src" / "app.py") == "src/app.py"
    assert found.relative(tmp_path / "elsewhere.py") is None


def test_outside_git_the_folder_names_the_project(tmp_path: Path) -> None:
    folder = tmp_path / "scratch pad"
    (folder / "sub").mkdir(parents=True)
    found = identify(Config(home=tmp_path / "home"), folder / "sub")
    assert (found.name, found.root, found.git) == ("sub", folder / "sub", False)


def test_a_fifo_in_place_of_dot_git_never_hangs(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    os.mkfifo(folder / ".git")
    found = identify(Config(home=tmp_path / "home"), folder)
    assert found.root == folder  # a .git that is neither a folder nor a file: not a repository


def test_save_and_search_use_the_project_of_the_working_directory(
    brain: ops.Brain, home: Path, tmp_path: Path
) -> None:
    brain.close()
    main = repo(tmp_path / "webapp")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    saved = run_cli(home, "save", "Pool limits of webapp", "-b", "At most 10 connections.",
                    "--json", cwd=tmp_path / "wt" / "src")  # fmt: skip
    assert '"status": "saved"' in saved.stdout
    entry = run_cli(home, "get", "brain:pool-limits-of-webapp.md", "--json").stdout
    assert '"project": "webapp"' in entry
    mine = run_cli(home, "search", "connections", "--project", ".", "--json", cwd=main).stdout
    assert "pool-limits-of-webapp.md" in mine
    other = run_cli(home, "search", "connections", "--project", "other", "--json").stdout
    assert "pool-limits-of-webapp.md" not in other


def test_git_head_reads_what_pygit2_reads(tmp_path: Path) -> None:
    import pygit2

    from brainmap.project import git_head

    def theirs(path: Path) -> str | None:
        found = pygit2.discover_repository(str(path))
        repository = pygit2.Repository(found)
        return None if repository.head_is_unborn else str(repository.head.target)

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert git_head(empty) is None and theirs(empty) is None  # unborn
    main = repo(tmp_path / "main")
    assert git_head(main / "src") == theirs(main) != None  # noqa: E711
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "wt")
    write(tmp_path / "wt" / "b.txt", "b\n")
    git(tmp_path / "wt", "add", ".")
    git(tmp_path / "wt", "commit", "-q", "-m", "on wt")
    assert git_head(tmp_path / "wt") == theirs(tmp_path / "wt") != git_head(main)
    git(main, "pack-refs", "--all")  # refs only in packed-refs now
    assert git_head(main) == theirs(main)
    git(main, "checkout", "-q", "--detach")
    assert git_head(main) == theirs(main)
    assert git_head(tmp_path) is None
