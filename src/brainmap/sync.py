"""Sync of a library's git repository with its remote: commit, pull (merge), push.

The library's folder must be the top of a git work tree with a remote. One sync commits
what changed in the library (saves, ingests, diary days), fetches the upstream branch,
merges it (the diary's ``merge=union`` attribute merges two machines' appends to one day
line by line), and pushes. It runs the git binary when there is one (no prompt, a
timeout), else pygit2.

- Offline (the remote cannot be reached): the local commit is kept and the report says so;
  the next sync pushes it. Nothing is lost.
- A conflict on a note (both sides changed the same lines of a file outside the diary): the
  merge is aborted, so the library stays exactly as it was here, and the remote's version is
  kept beside it in the home (``conflicts/<library>/<path>.remote-<blob>.md``: never indexed,
  never committed). The conflict is recorded in ``sync-conflicts.json`` in the home, which
  ``brainmap doctor`` reads. The user edits the note (taking what they want from the copy),
  deletes the copy and syncs again: the note as they left it wins over that remote version.
  A remote that changed the note once more meanwhile is a new conflict.
- Other conflicts inside the diary folder (rollups, which are rewritten from the days, not
  appended) keep the local version: the next rollup renders them again from the merged days.

The library's lock is held while the work tree changes (commit, merge), not while the
network is used (fetch, push), so that a save or a diary append waits seconds at most.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from brainmap.config import Config, LibraryConfig
from brainmap.errors import UserError
from brainmap.safefile import atomic_write, library_lock, safe_folder

if TYPE_CHECKING:
    import pygit2

Backend = Literal["auto", "git", "pygit2"]
LOCAL_TIMEOUT_S = 60.0  # git commands that stay on this machine
NETWORK_TIMEOUT_S = 120.0  # fetch and push (each)
CONNECT_TIMEOUT_S = 15
CONFLICTS_FILE = "sync-conflicts.json"
CONFLICTS_DIR = "conflicts"
_DAY = re.compile(r"[^/]+/\d{4}/\d{2}/\d{2}\.md")
_ROLLUP = re.compile(r"[^/]+/\d{4}-(W\d{2}|\d{2})\.md")
# a push refused because the remote moved on (not a network problem)
_REJECTED = re.compile(r"rejected|non-fast-?forward|fetch first|cannot push", re.IGNORECASE)

__all__ = ["Conflict", "SyncReport", "conflicts", "summarize", "sync_library"]


@dataclass
class Conflict:
    """A note both sides changed: the local version stays in the library, the remote one is
    kept in ``copy`` until the user resolves it."""

    library: str
    path: str  # inside the library
    copy: str  # the remote's version (absolute path, in the home)
    remote_commit: str
    remote_blob: str | None  # None: the remote deleted the note
    local_deleted: bool  # this side deleted it (the library has no file at ``path``)
    fix: str = ""


@dataclass
class SyncReport:
    """What one sync did."""

    library: str
    repository: str
    backend: str  # git or pygit2
    branch: str = ""
    remote: str = ""
    committed: list[str] = field(default_factory=list)  # files of the local commit
    commit: str | None = None  # the local commit made (None: nothing had changed)
    pulled_commits: int = 0  # remote commits merged in
    pulled_files: list[str] = field(default_factory=list)  # files the merge changed here
    pushed: bool = False
    conflicts: list[Conflict] = field(default_factory=list)  # the sync stopped on these
    resolved: list[str] = field(default_factory=list)  # conflicts the user resolved
    offline: bool = False
    message: str = ""  # one line: what happened (and what to do)


class _Offline(Exception):
    """The remote could not be reached (or refused us); the message says why."""


class _Rejected(Exception):
    """The remote refused a push: it moved on since the fetch."""


@dataclass
class _Stages:
    """One conflicted path of a merge: the blob ids of our and their side (None: deleted)."""

    path: str
    ours: str | None
    theirs: str | None


# --- the driver -----------------------------------------------------------------------------


def sync_library(cfg: Config, lib: LibraryConfig, *, backend: Backend = "auto") -> SyncReport:
    """Commit the library's changes, merge its upstream branch, push; see the module's text.

    Raises :class:`UserError` when the library is not the top of a git work tree, has no
    remote, is detached or in the middle of a merge, or when git fails for another reason.
    """
    repo = _open(lib.path, backend)
    report = SyncReport(lib.name, str(repo.top), repo.name)
    report.branch = repo.branch()
    remote, merge_branch, configured = repo.upstream(report.branch)
    report.remote = remote
    tracking = f"refs/remotes/{remote}/{merge_branch}"
    offline = None
    try:
        repo.fetch(remote)  # before the lock: the network may be slow
    except _Offline as exc:
        offline = str(exc)
    records = _read_records(cfg.home)
    mine = [r for r in records if r.library == lib.name]
    with library_lock(cfg.home, lib.name):
        repo.check_clean_state()
        report.committed, report.commit = repo.commit_all(
            lambda files: _commit_message(cfg, lib, files)
        )
        upstream = None if offline else repo.ref(tracking)
        head = repo.ref("HEAD")
        if upstream and (head is None or not repo.is_ancestor(upstream, head)):
            report.pulled_commits = repo.count(head, upstream)
            report.pulled_files = repo.changed(head, upstream)
            real = repo.merge(
                upstream, _resolver(cfg, lib, mine), f"brainmap sync: merge {remote}/"
                f"{merge_branch} ({socket.gethostname()})",
            )  # fmt: skip
            if real:
                report.conflicts = _keep_both(cfg, lib, repo, upstream, real, mine, records)
                report.pulled_files = []
                report.message = (
                    f"stopped: {len(real)} conflicting note(s) ({', '.join(c.path for c in real)})"
                    "; the library is as it was here, the remote's versions are kept in the home: "
                    "see `brainmap doctor`"
                )
                return report
    if not offline:
        # the remote is merged in (or had nothing new): earlier conflicts are over
        report.resolved = [r.path for r in mine]
        _write_records(cfg.home, [r for r in records if r.library != lib.name])
        for record in mine:
            with suppress(OSError):
                Path(record.copy).unlink()
        head = repo.ref("HEAD")
        if head is not None and head != repo.ref(tracking):
            try:
                repo.push(remote, report.branch, merge_branch, set_upstream=not configured)
                report.pushed = True
            except _Offline as exc:
                offline = str(exc)
            except _Rejected as exc:
                report.message = (
                    f"not pushed: {remote} moved on meanwhile ({exc}); run `brainmap sync` again"
                )
                return report
    if offline:
        report.offline = True
        kept = "committed locally" if report.commit else "nothing new to commit"
        report.message = f"offline: {kept}, will push next time ({offline})"
        return report
    report.message = summarize(report)
    return report


def summarize(report: SyncReport) -> str:
    """One line: what a sync that reached the remote did."""
    parts = [
        f"committed {len(report.committed)} file(s)" if report.commit else "nothing to commit",
        f"pulled {report.pulled_commits} commit(s), {len(report.pulled_files)} file(s)"
        if report.pulled_commits
        else "nothing to pull",
        "pushed" if report.pushed else "nothing to push",
    ]
    if report.resolved:
        parts.append(f"resolved {', '.join(report.resolved)}")
    return "; ".join(parts)


def _diary_folder(cfg: Config, lib: LibraryConfig) -> str | None:
    """The diary's folder inside ``lib`` (posix, no trailing slash), None when the diary is
    written elsewhere."""
    if cfg.diary.library != lib.name:
        return None
    return safe_folder(cfg.diary.folder).as_posix()


def _commit_message(cfg: Config, lib: LibraryConfig, files: list[str]) -> str:
    folder = _diary_folder(cfg, lib)
    inside = [p[len(folder) + 1 :] for p in files if folder and p.startswith(f"{folder}/")]
    days = sum(1 for p in inside if _DAY.fullmatch(p))
    rollups = sum(1 for p in inside if _ROLLUP.fullmatch(p))
    saves = len(files) - len(inside)
    more = f", {rollups} rollup{'s' * (rollups != 1)}" if rollups else ""
    return (
        f"brainmap sync: {saves} save{'s' * (saves != 1)}, {days} diary "
        f"day{'s' * (days != 1)}{more} ({socket.gethostname()})"
    )


def _resolver(
    cfg: Config, lib: LibraryConfig, records: list[Conflict]
) -> Callable[[_Stages], str | None]:
    """Which side a conflicted path takes without the user: ``ours``, ``theirs``, or None
    (a real conflict)."""
    folder = _diary_folder(cfg, lib)
    resolved = {
        (r.path, r.remote_blob) for r in records if not Path(r.copy).exists()
    }  # the user deleted the copy: the library holds what they want of both

    def decide(stages: _Stages) -> str | None:
        if folder and stages.path.startswith(f"{folder}/"):
            # days merge by union; a rollup is rendered again from the merged days
            return "ours" if stages.ours else "theirs"
        if (stages.path, stages.theirs) in resolved:
            return "ours"
        return None

    return decide


def _keep_both(
    cfg: Config,
    lib: LibraryConfig,
    repo: _Repo,
    upstream: str,
    real: list[_Stages],
    mine: list[Conflict],
    records: list[Conflict],
) -> list[Conflict]:
    """Write the remote's version of each conflicting note into the home and record the
    conflicts (replacing this library's earlier records but those resolved meanwhile, which
    the next sync still needs)."""
    out = []
    for stages in real:
        stem, suffix = os.path.splitext(stages.path)
        tag = (stages.theirs or "deleted")[:10]
        copy = cfg.home / CONFLICTS_DIR / safe_folder(lib.name) / f"{stem}.remote-{tag}{suffix}"
        if stages.theirs:
            data = repo.blob(stages.theirs)
        else:
            data = (
                f"{stages.path} was deleted on the remote (commit {upstream[:10]}) and "
                "changed here.\n"
            ).encode()
        atomic_write(cfg.home, copy, data)
        target = lib.path / stages.path
        if stages.theirs:
            fix = (
                f"edit {target} (take what you want from the remote's version {copy}), "
                "delete the copy, run brainmap sync"
            )
        else:
            fix = f"keep or delete {target}, delete the copy {copy}, run brainmap sync"
        out.append(
            Conflict(lib.name, stages.path, str(copy), upstream, stages.theirs,
                     stages.ours is None, fix)
        )  # fmt: skip
    now = {c.path for c in out}
    kept = [r for r in mine if r.path not in now and not Path(r.copy).exists()]
    for old in mine:
        if old not in kept and old.copy not in {c.copy for c in out}:
            with suppress(OSError):
                Path(old.copy).unlink()  # superseded: that version is in the remote's history
    others = [r for r in records if r.library != lib.name]
    _write_records(cfg.home, others + kept + out)
    return out


# --- the conflict records (in the home: the index is disposable, the library is synced) -----


def conflicts(home: Path) -> list[Conflict]:
    """The sync conflicts recorded in the home, each with its fix."""
    return _read_records(home)


def _read_records(home: Path) -> list[Conflict]:
    try:
        raw = json.loads((home / CONFLICTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for item in raw if isinstance(raw, list) else []:
        with suppress(TypeError):
            out.append(Conflict(**item))
    return out


def _write_records(home: Path, records: list[Conflict]) -> None:
    path = home / CONFLICTS_FILE
    if not records:
        with suppress(FileNotFoundError):
            path.unlink()
        return
    data = json.dumps([asdict(r) for r in records], indent=2, ensure_ascii=False) + "\n"
    atomic_write(home, path, data.encode("utf-8"))


# --- backends -------------------------------------------------------------------------------


class _Repo:
    """What a sync needs of git; two implementations: the git binary, pygit2."""

    name = ""
    top: Path

    def branch(self) -> str:
        raise NotImplementedError

    def remotes(self) -> list[str]:
        raise NotImplementedError

    def config(self, key: str) -> str | None:
        raise NotImplementedError

    def upstream(self, branch: str) -> tuple[str, str, bool]:
        """(remote, its branch, whether the branch has an upstream set)."""
        remote, merge = (
            self.config(f"branch.{branch}.remote"),
            self.config(f"branch.{branch}.merge"),
        )
        names = self.remotes()
        if remote and merge and remote in names:
            return remote, merge.removeprefix("refs/heads/"), True
        hint = f"git -C {self.top} remote add origin URL (an empty repository is fine)"
        if not names:
            raise UserError(f"{self.top} has no git remote to sync with", hint=hint)
        if "origin" in names or len(names) == 1:
            return ("origin" if "origin" in names else names[0]), branch, False
        raise UserError(
            f"{self.top} has several remotes ({', '.join(names)}) and branch {branch!r} "
            "tracks none of them",
            hint=f"git -C {self.top} branch --set-upstream-to REMOTE/{branch}",
        )

    def fetch(self, remote: str) -> None:
        raise NotImplementedError

    def check_clean_state(self) -> None:
        if (self.git_dir() / "MERGE_HEAD").exists() or any(
            (self.git_dir() / name).exists() for name in ("rebase-merge", "rebase-apply")
        ):
            raise UserError(
                f"a merge or rebase is in progress in {self.top}",
                hint=f"finish it (git -C {self.top} commit) or abort it "
                f"(git -C {self.top} merge --abort), then run brainmap sync",
                status=409,
            )

    def git_dir(self) -> Path:
        raise NotImplementedError

    def commit_all(self, message: Callable[[list[str]], str]) -> tuple[list[str], str | None]:
        raise NotImplementedError

    def ref(self, name: str) -> str | None:
        raise NotImplementedError

    def is_ancestor(self, a: str, b: str) -> bool:
        raise NotImplementedError

    def count(self, head: str | None, upstream: str) -> int:
        raise NotImplementedError

    def changed(self, head: str | None, upstream: str) -> list[str]:
        raise NotImplementedError

    def merge(
        self, upstream: str, decide: Callable[[_Stages], str | None], message: str
    ) -> list[_Stages]:
        """Merge ``upstream`` into HEAD; paths ``decide`` settles take that side. Returns the
        real conflicts, after aborting the merge (the work tree as it was), else []."""
        raise NotImplementedError

    def blob(self, oid: str) -> bytes:
        raise NotImplementedError

    def push(self, remote: str, branch: str, merge_branch: str, *, set_upstream: bool) -> None:
        raise NotImplementedError


def _open(path: Path, backend: Backend) -> _Repo:
    git = shutil.which("git") if backend in ("auto", "git") else None
    if backend == "git" and git is None:
        raise UserError("no git binary on PATH", hint="install git, or leave the backend to auto")
    repo: _Repo = _GitCli(git, path) if git else _Pygit2(path)
    if repo.top.resolve() != path.resolve():
        raise UserError(
            f"{path} is inside the git repository {repo.top}, not its top: brainmap sync "
            "syncs a repository of its own",
            hint=f"sync {repo.top} with git, or make {path} a repository of its own",
        )
    return repo


def _not_a_repository(path: Path) -> UserError:
    return UserError(
        f"{path} is not a git repository: brainmap sync needs one with a remote",
        hint=f"git -C {path} init && git -C {path} remote add origin URL (or clone the "
        "remote there instead)",
    )


def _identity() -> tuple[str, str]:
    return "brainmap", f"brainmap@{socket.gethostname() or 'localhost'}"


class _GitCli(_Repo):
    name = "git"

    def __init__(self, git: str, path: Path) -> None:
        self.git = git
        self.env = {
            **os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true",
            "GIT_MERGE_AUTOEDIT": "no", "LC_ALL": "C",
        }  # fmt: skip
        if not path.is_dir():
            raise UserError(f"{path} is not a folder", hint="brainmap library list")
        self.top = path
        got = self.run("rev-parse", "--show-toplevel", check=False)
        if got.returncode:
            raise _not_a_repository(path)
        self.top = Path(got.stdout.decode().strip())
        if "GIT_SSH_COMMAND" not in self.env and not self.config("core.sshCommand"):
            # never a password prompt, never a hang on an unreachable host
            self.env["GIT_SSH_COMMAND"] = (
                f"ssh -o BatchMode=yes -o ConnectTimeout={CONNECT_TIMEOUT_S}"
            )
        self.ident: list[str] = []
        if not self.config("user.email") or not self.config("user.name"):
            name, email = _identity()
            self.ident = ["-c", f"user.name={name}", "-c", f"user.email={email}"]

    def run(
        self, *args: str, check: bool = True, network: bool = False
    ) -> subprocess.CompletedProcess[bytes]:
        cmd = [self.git, "-C", str(self.top), *args]
        if network:
            cmd[3:3] = ["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=20"]
        try:
            got = subprocess.run(
                cmd, check=False, capture_output=True, env=self.env, stdin=subprocess.DEVNULL,
                timeout=NETWORK_TIMEOUT_S if network else LOCAL_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            if network:
                raise _Offline(f"git {args[0]} timed out after {NETWORK_TIMEOUT_S:g} s") from None
            raise UserError(
                f"git {args[0]} in {self.top} took over {LOCAL_TIMEOUT_S:g} s"
            ) from None
        if check and got.returncode:
            raise UserError(
                f"git {' '.join(args[:2])} failed in {self.top}: {_first_lines(got.stderr)}",
                hint=f"look at `git -C {self.top} status`",
            )
        return got

    def config(self, key: str) -> str | None:
        got = self.run("config", "--get", key, check=False)
        return got.stdout.decode().strip() or None if got.returncode == 0 else None

    def git_dir(self) -> Path:
        return Path(self.run("rev-parse", "--absolute-git-dir").stdout.decode().strip())

    def branch(self) -> str:
        got = self.run("symbolic-ref", "--short", "-q", "HEAD", check=False)
        if got.returncode:
            raise UserError(
                f"{self.top} is on a detached HEAD: no branch to sync",
                hint=f"git -C {self.top} switch BRANCH",
            )
        return got.stdout.decode().strip()

    def remotes(self) -> list[str]:
        return self.run("remote").stdout.decode().split()

    def fetch(self, remote: str) -> None:
        got = self.run("fetch", "-q", remote, check=False, network=True)
        if got.returncode:
            raise _Offline(f"{remote}: {_first_lines(got.stderr)}")

    def commit_all(self, message: Callable[[list[str]], str]) -> tuple[list[str], str | None]:
        self.run("add", "-A", "--", ".")
        out = self.run("diff", "--cached", "--name-only", "--no-renames", "-z").stdout
        files = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
        if not files:
            return [], None
        self.run(*self.ident, "commit", "-q", "--no-verify", "-m", message(files))
        return files, self.ref("HEAD")

    def ref(self, name: str) -> str | None:
        got = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False)
        return got.stdout.decode().strip() or None if got.returncode == 0 else None

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.run("merge-base", "--is-ancestor", a, b, check=False).returncode == 0

    def _base(self, head: str | None, upstream: str) -> str | None:
        if head is None:
            return None
        got = self.run("merge-base", head, upstream, check=False)
        return got.stdout.decode().strip() or None if got.returncode == 0 else None

    def count(self, head: str | None, upstream: str) -> int:
        span = upstream if head is None else f"{head}..{upstream}"
        return int(self.run("rev-list", "--count", span).stdout.decode().strip() or 0)

    def changed(self, head: str | None, upstream: str) -> list[str]:
        base = self._base(head, upstream)
        if base is None:
            out = self.run("ls-tree", "-r", "-z", "--name-only", upstream).stdout
        else:
            out = self.run("diff", "--name-only", "--no-renames", "-z", base, upstream).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def merge(
        self, upstream: str, decide: Callable[[_Stages], str | None], message: str
    ) -> list[_Stages]:
        head = self.ref("HEAD")
        args = [*self.ident, "merge", "-q", "--no-edit", "--no-verify", "-m", message]
        if head is not None and self._base(head, upstream) is None:
            args.append("--allow-unrelated-histories")  # two machines that started apart
        got = self.run(*args, upstream, check=False)
        if got.returncode == 0:
            return []
        unmerged = self._unmerged()
        if not unmerged:
            self.run("merge", "--abort", check=False)
            raise UserError(
                f"git merge failed in {self.top}: {_first_lines(got.stderr or got.stdout)}",
                hint=f"look at `git -C {self.top} status`, then run brainmap sync again",
            )
        real = []
        for stages in unmerged:
            side = decide(stages)
            if side is None:
                real.append(stages)
            elif (stages.ours if side == "ours" else stages.theirs) is None:
                self.run("rm", "-q", "-f", "--", stages.path)
            else:
                self.run("checkout", f"--{side}", "--", stages.path)
                self.run("add", "--", stages.path)
        if real:
            self.run("merge", "--abort")
            return real
        self.run(*self.ident, "commit", "-q", "--no-edit", "--no-verify")
        return []

    def _unmerged(self) -> list[_Stages]:
        out = self.run("ls-files", "-u", "-z").stdout.decode("utf-8", "surrogateescape")
        stages: dict[str, dict[int, str]] = {}
        for item in filter(None, out.split("\0")):
            meta, _, path = item.partition("\t")
            _mode, oid, stage = meta.split()
            stages.setdefault(path, {})[int(stage)] = oid
        return [_Stages(p, s.get(2), s.get(3)) for p, s in stages.items()]

    def blob(self, oid: str) -> bytes:
        return self.run("cat-file", "blob", oid).stdout

    def push(self, remote: str, branch: str, merge_branch: str, *, set_upstream: bool) -> None:
        args = ["push", "-q", *(["-u"] if set_upstream else []), remote,
                f"HEAD:refs/heads/{merge_branch}"]  # fmt: skip
        got = self.run(*args, check=False, network=True)
        if got.returncode:
            text = _first_lines(got.stderr)
            raise (_Rejected if _REJECTED.search(text) else _Offline)(f"{remote}: {text}")


def _first_lines(data: bytes, n: int = 2) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    return " / ".join(lines[:n]) or "no message"


def _paths(diff: pygit2.Diff) -> list[str]:
    return sorted({d.new_file.path for d in diff.deltas} | {d.old_file.path for d in diff.deltas})


class _Pygit2(_Repo):
    """The same with libgit2 (no git binary): commit, fetch, merge (fast-forward or a merge
    commit; libgit2 runs the union driver of ``.gitattributes``), push."""

    name = "pygit2"

    def __init__(self, path: Path) -> None:
        import pygit2

        if not path.is_dir():
            raise UserError(f"{path} is not a folder", hint="brainmap library list")
        try:
            found = pygit2.discover_repository(str(path))
            repo = pygit2.Repository(found) if found else None
        except pygit2.GitError as exc:
            raise UserError(f"git cannot open the repository of {path}: {exc}") from exc
        if repo is None or repo.is_bare or repo.workdir is None:
            raise _not_a_repository(path)
        self.repo: pygit2.Repository = repo
        self.top = Path(repo.workdir)
        for name, ms in (("server_connect_timeout", CONNECT_TIMEOUT_S * 1000),
                         ("server_timeout", int(NETWORK_TIMEOUT_S * 1000))):  # fmt: skip
            with suppress(Exception):  # older libgit2: no such setting
                setattr(pygit2.settings, name, ms)

    def _signature(self) -> pygit2.Signature:
        import pygit2

        try:
            return self.repo.default_signature
        except (KeyError, pygit2.GitError):
            return pygit2.Signature(*_identity())

    def config(self, key: str) -> str | None:
        try:
            return str(self.repo.config[key]) or None
        except KeyError:
            return None

    def git_dir(self) -> Path:
        return Path(self.repo.path)

    def branch(self) -> str:
        if self.repo.head_is_detached:
            raise UserError(
                f"{self.top} is on a detached HEAD: no branch to sync",
                hint=f"git -C {self.top} switch BRANCH",
            )
        target = self.repo.references["HEAD"].target
        return str(target).removeprefix("refs/heads/")

    def remotes(self) -> list[str]:
        return [name for name in self.repo.remotes.names() if name]

    def _callbacks(self) -> Any:
        import pygit2

        class Callbacks(pygit2.RemoteCallbacks):
            """Keys of the ssh agent, once (libgit2 asks again and again after a refusal);
            refused references of a push are remembered."""

            def __init__(self) -> None:
                super().__init__()
                self.asked = 0
                self.refused: list[str] = []

            def credentials(self, url: str, username: str | None, allowed: Any) -> Any:
                self.asked += 1
                if self.asked > 1 or not allowed & pygit2.enums.CredentialType.SSH_KEY:
                    raise pygit2.GitError(f"no credentials for {url}")
                return pygit2.KeypairFromAgent(username or "git")

            def push_update_reference(self, refname: str, message: str | None) -> None:
                if message:
                    self.refused.append(f"{refname}: {message}")

        return Callbacks()

    def fetch(self, remote: str) -> None:
        import pygit2

        try:
            self.repo.remotes[remote].fetch(callbacks=self._callbacks())
        except (pygit2.GitError, OSError, KeyError) as exc:
            raise _Offline(f"{remote}: {exc}") from None

    def commit_all(self, message: Callable[[list[str]], str]) -> tuple[list[str], str | None]:
        import pygit2
        from pygit2.enums import FileStatus

        index = self.repo.index
        changed = FileStatus.WT_NEW | FileStatus.WT_MODIFIED | FileStatus.WT_TYPECHANGE
        for path, flags in self.repo.status().items():  # ignored files are not listed
            if flags & FileStatus.WT_DELETED:
                index.remove(path)
            elif flags & changed:
                index.add(path)
        index.write()
        tree = index.write_tree()
        head = None if self.repo.head_is_unborn else self.repo.head.peel(pygit2.Commit)
        if head is None:
            files = sorted(entry.path for entry in index)
        else:
            if tree == head.tree.id:
                return [], None
            files = _paths(head.tree.diff_to_tree(self._tree(str(tree))))
        if not files:
            return [], None
        sig = self._signature()
        parents = [] if head is None else [head.id]
        oid = self.repo.create_commit("HEAD", sig, sig, message(files), tree, parents)
        return files, str(oid)

    def ref(self, name: str) -> str | None:
        import pygit2

        try:
            return str(self.repo.revparse_single(name).peel(pygit2.Commit).id)
        except (KeyError, ValueError, pygit2.GitError):
            return None

    def is_ancestor(self, a: str, b: str) -> bool:
        return a == b or bool(self.repo.descendant_of(b, a))

    def count(self, head: str | None, upstream: str) -> int:
        walker = self.repo.walk(upstream)
        if head is not None:
            walker.hide(head)
        return sum(1 for _ in walker)

    def changed(self, head: str | None, upstream: str) -> list[str]:

        theirs = self._commit(upstream).tree
        base = self.repo.merge_base(head, upstream) if head else None
        if base is None:
            return sorted(e.path for e in self._index_of(theirs))
        return _paths(self._commit(str(base)).tree.diff_to_tree(theirs))

    def _commit(self, oid: str) -> pygit2.Commit:
        import pygit2

        return self.repo[oid].peel(pygit2.Commit)

    def _tree(self, oid: str) -> pygit2.Tree:
        import pygit2

        tree = self.repo[oid]
        assert isinstance(tree, pygit2.Tree)
        return tree

    def _index_of(self, tree: pygit2.Tree) -> pygit2.Index:
        import pygit2

        index = pygit2.Index()
        index.read_tree(tree)
        return index

    def merge(
        self, upstream: str, decide: Callable[[_Stages], str | None], message: str
    ) -> list[_Stages]:
        import pygit2
        from pygit2.enums import CheckoutStrategy, MergeAnalysis

        repo = self.repo
        theirs = self._commit(upstream)
        refname = str(repo.references["HEAD"].target)
        if repo.head_is_unborn:
            repo.checkout_tree(theirs.tree, strategy=CheckoutStrategy.SAFE)  # type: ignore[no-untyped-call]
            repo.references.create(refname, theirs.id, force=True)
            return []
        analysis, _pref = repo.merge_analysis(theirs.id)
        if analysis & MergeAnalysis.UP_TO_DATE:
            return []
        head = repo.head.peel(pygit2.Commit)
        if analysis & MergeAnalysis.FASTFORWARD:
            repo.checkout_tree(theirs.tree, strategy=CheckoutStrategy.SAFE)  # type: ignore[no-untyped-call]
            repo.references[refname].set_target(theirs.id)
            return []
        try:
            repo.merge(theirs.id)
        except pygit2.GitError as exc:
            repo.state_cleanup()
            raise UserError(
                f"the merge failed in {self.top}: {exc}",
                hint=f"look at `git -C {self.top} status`, then run brainmap sync again",
            ) from exc
        index = repo.index
        real: list[_Stages] = []
        settled: list[tuple[_Stages, pygit2.IndexEntry | None]] = []
        for ancestor, ours, their in list(index.conflicts or ()):
            path = (ours or their or ancestor).path
            stages = _Stages(path, ours and str(ours.id), their and str(their.id))
            side = decide(stages)
            if side is None:
                real.append(stages)
            else:
                settled.append((stages, ours if side == "ours" else their))
        if real:
            self._abort(head, theirs)
            return real
        for stages, entry in settled:
            del index.conflicts[stages.path]
            target = self.top / stages.path
            if entry is None:
                with suppress(FileNotFoundError):
                    target.unlink()
            else:
                atomic_write(self.top, target, self.blob(str(entry.id)))
                index.add(pygit2.IndexEntry(stages.path, entry.id, entry.mode))
        index.write()
        sig = self._signature()
        repo.create_commit("HEAD", sig, sig, message, index.write_tree(), [head.id, theirs.id])
        repo.state_cleanup()
        return []

    def _abort(self, head: pygit2.Commit, theirs: pygit2.Commit) -> None:
        """Put the work tree and the index back as HEAD has them, like ``git merge --abort``
        (the library was committed just before: what differs now, the merge wrote)."""
        from pygit2.enums import FileStatus

        repo = self.repo
        ours, added = self._index_of(head.tree), self._index_of(theirs.tree)
        repo.index.read_tree(head.tree)
        repo.index.write()
        changed = FileStatus.WT_MODIFIED | FileStatus.WT_DELETED | FileStatus.WT_TYPECHANGE
        for path, flags in repo.status().items():
            target = self.top / path
            if path in ours and flags & changed:
                atomic_write(self.top, target, self.blob(str(ours[path].id)))
            elif path not in ours and path in added and flags & FileStatus.WT_NEW:
                with suppress(FileNotFoundError):
                    target.unlink()  # the merge brought it in
        repo.state_cleanup()

    def blob(self, oid: str) -> bytes:
        import pygit2

        obj = self.repo[oid]
        assert isinstance(obj, pygit2.Blob)
        return bytes(obj.data)

    def push(self, remote: str, branch: str, merge_branch: str, *, set_upstream: bool) -> None:
        import pygit2

        callbacks = self._callbacks()
        try:
            self.repo.remotes[remote].push(
                [f"refs/heads/{branch}:refs/heads/{merge_branch}"], callbacks=callbacks
            )
        except (pygit2.GitError, OSError) as exc:
            text = str(exc)
            raise (_Rejected if _REJECTED.search(text) else _Offline)(f"{remote}: {text}") from None
        if callbacks.refused:
            raise _Rejected(f"{remote}: {'; '.join(callbacks.refused)}")
        if set_upstream:
            self.repo.config[f"branch.{branch}.remote"] = remote
            self.repo.config[f"branch.{branch}.merge"] = f"refs/heads/{merge_branch}"
