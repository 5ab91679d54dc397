"""ssh client config (``~/.ssh/config`` and files like it): each concrete ``Host`` alias with
the HostName, User, Port, IdentityFile (the path, never the key) and ProxyJump that ssh would
use for it, following ``Include`` and applying wildcard blocks the way ssh does (the first value
obtained for an option wins)."""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from brainmap.collectors import (
    HOSTNAME,
    IDENTITY_FILE,
    PORT,
    USER,
    Observation,
    clean,
    only_safe,
    parse_port,
    port_key,
)

MAX_INCLUDE_DEPTH = 16  # as ssh itself
# option (lower case) -> (predicate, object kind); only these are read: nothing secret
_OPTIONS = {
    "hostname": (HOSTNAME, "host"),
    "user": (USER, "user"),
    "port": (PORT, "port"),
    "identityfile": (IDENTITY_FILE, "keyfile"),
    "proxyjump": ("proxy_jump", "host"),
}
_MULTI = {"identityfile"}  # options ssh accumulates instead of first-wins


@dataclass
class _Block:
    patterns: list[str]
    line: int
    options: list[tuple[str, str, int, str]] = field(default_factory=list)  # key, value, line, file


def collect(
    path: Path, text: str, rel: str | None = None, include_roots: list[Path] | None = None
) -> list[Observation]:
    """Observations for every concrete alias of the config at ``path`` (``text`` is its
    content; included files are read from disk, relative to ``path``'s folder, and only from
    that folder, ``~/.ssh`` or ``/etc/ssh``, or only from ``include_roots`` when given). ``rel``
    is the config's path in its library, to cite included files beside it by library path too."""
    blocks = [_Block(["*"], 0)]  # options before the first Host apply to every host
    roots = (
        [root.resolve() for root in include_roots]
        if include_roots is not None
        else [path.parent.resolve(), Path("~/.ssh").expanduser().resolve(), Path("/etc/ssh")]
    )
    _read(path, text, blocks, 0, set(), roots)
    aliases: dict[str, int] = {}
    for block in blocks[1:]:
        for pattern in block.patterns:
            if not any(c in pattern for c in "*?!") and pattern not in aliases:
                aliases[pattern] = block.line
    out: list[Observation] = []
    for alias, line in aliases.items():
        subject = f"host:{alias}"
        seen: set[str] = set()
        for block in blocks:
            if not _matches(alias, block.patterns):
                continue
            for key, value, opt_line, source in block.options:
                if key in seen and key not in _MULTI:
                    continue
                seen.add(key)
                predicate, kind = _OPTIONS[key]
                if kind == "port":
                    port = parse_port(value)
                    if port is None:
                        continue
                    obj = port_key(port)
                else:
                    obj = f"{kind}:{value.replace('%h', alias)}"
                props = {"file": _cite(source, path, rel)} if source != str(path) else {}
                out.append(Observation(subject, predicate, obj, opt_line, "ssh-config", props))
        if HOSTNAME not in seen:  # ssh connects to the alias itself
            out.append(Observation(subject, HOSTNAME, f"host:{alias}", line, "ssh-config"))
    return only_safe(out)


def _matches(alias: str, patterns: list[str]) -> bool:
    hit = False
    for pattern in patterns:
        if pattern.startswith("!"):
            if fnmatch.fnmatchcase(alias, pattern[1:]):
                return False
        elif fnmatch.fnmatchcase(alias, pattern):
            hit = True
    return hit


_LINE = re.compile(r"^\s*([A-Za-z]+)(?:\s*=\s*|\s+)(.*)$")


def _split(line: str) -> tuple[str, list[str]] | None:
    """``Keyword value``, ``Keyword=value`` or ``Keyword = value`` (spaces or tabs)."""
    m = _LINE.match(line)
    if m is None or line.lstrip().startswith("#"):
        return None
    try:
        args = shlex.split(m.group(2), comments=True)
    except ValueError:
        args = m.group(2).split()
    return m.group(1).lower(), args


def _cite(source: str, config: Path, rel: str | None) -> str:
    """An included file as the config's library path would name it, else its full path."""
    try:
        inner = Path(source).resolve().relative_to(config.parent.resolve())
    except ValueError:
        return source
    folder = rel.rpartition("/")[0] if rel else ""
    return f"{folder}/{inner.as_posix()}" if folder else inner.as_posix()


def _within(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except OSError:
        return False


def _allowed(path: Path, roots: list[Path]) -> bool:
    """Includes are read from the config's folder, ``~/.ssh`` and ``/etc/ssh`` only: a
    hostile config must not make brainmap read (and store) ``/proc/self/environ``."""
    try:
        real = path.resolve()
    except OSError:
        return False
    return real.is_file() and any(real.is_relative_to(root) for root in roots)


def _read(
    path: Path,
    text: str,
    blocks: list[_Block],
    depth: int,
    seen: set[str],
    roots: list[Path],
) -> None:
    seen.add(str(path))
    for n, raw in enumerate(text.splitlines(), 1):
        parsed = _split(raw)
        if parsed is None:
            continue
        key, args = parsed
        if key == "host":
            blocks.append(_Block(args, n))
        elif key == "match":
            blocks.append(_Block([], n))  # conditions ssh evaluates at connect time: skipped
        elif key == "include" and depth < MAX_INCLUDE_DEPTH:
            context = blocks[-1]
            for pattern in args:
                full = os.path.expanduser(pattern)
                if not os.path.isabs(full):
                    full = str(path.parent / full)
                fixed = Path(re.split(r"[*?\[]", full, maxsplit=1)[0]).parent
                if not any(_within(fixed, root) or _within(root, fixed) for root in roots):
                    continue  # outside the allowed folders: not even listed
                for name in sorted(glob.glob(full))[:256]:
                    included = Path(name)
                    if str(included) in seen or not _allowed(included, roots):
                        continue
                    try:
                        body = included.read_text(encoding="utf-8", errors="replace")
                    except OSError:
                        continue
                    _read(included, body, blocks, depth + 1, seen, roots)
            if blocks[-1] is not context:  # what follows still belongs to the enclosing Host
                blocks.append(_Block(context.patterns, context.line))
        elif key in _OPTIONS and args:
            blocks[-1].options.append((key, clean(args[0]), n, str(path)))
