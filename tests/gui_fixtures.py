"""What the GUI's browser tests share: the two window sizes, screenshots (to tmp_path, or to
$BRAINMAP_SCREENSHOTS to look at them), and the console errors a page logs. The browser itself
is conftest's ``browser`` fixture."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
from playwright.sync_api import ConsoleMessage, Error, Page

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PNG = b"\x89PNG\r\n\x1a\n"


def shots_folder(tmp_path: Path, name: str) -> Path:
    """Where a test's screenshots go: $BRAINMAP_SCREENSHOTS/<name> when set, else tmp_path."""
    base = os.environ.get("BRAINMAP_SCREENSHOTS")
    folder = Path(base) / name if base else tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shot(page: Page, folder: Path, name: str) -> Path:
    """A full-page screenshot: a non-empty PNG, of a page with one h1 that needs no
    horizontal scrolling (at a phone's width too)."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data.startswith(PNG) and len(data) > 1000, f"{name}: no screenshot"
    assert page.locator("h1").count() == 1, f"{name}: one h1 per page"
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, f"{name}: horizontal scrolling at {page.viewport_size}"
    assert not unlabelled(page), f"{name}: controls without a label: {unlabelled(page)}"
    return path


_UNLABELLED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button')].filter(el =>
    !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
    && !el.getAttribute('aria-labelledby') && !(el.tagName === 'BUTTON' && el.textContent.trim())
).map(el => el.outerHTML.slice(0, 120))"""

_FOCUS_RING = """() => { const el = document.activeElement, s = getComputedStyle(el);
    return [el.outerHTML.slice(0, 80),
            s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2]; }"""


def unlabelled(page: Page) -> list[str]:
    """The form controls of the page that have no accessible name (no label, no aria-label,
    a button without text)."""
    found: list[str] = page.evaluate(_UNLABELLED)
    return found


def tab_without_focus_ring(page: Page, steps: int = 12) -> list[str]:
    """Press Tab ``steps`` times from the top: the elements that took keyboard focus without a
    visible focus ring."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    missing = []
    for _ in range(steps):
        page.keyboard.press("Tab")
        element, ringed = page.evaluate(_FOCUS_RING)
        if not element.startswith("<body") and not ringed:
            missing.append(element)
    return missing


def console_errors(page: Page) -> list[str]:
    """The errors the page logs from now on (console errors, uncaught exceptions, and what
    the Content Security Policy refuses): the list fills as the page runs."""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"console: {message.text}")

    def on_error(error: Error) -> None:
        errors.append(f"page: {error}")

    page.on("console", on_console)
    page.on("pageerror", on_error)
    return errors


def commit_all(repo_path: Path, message: str) -> str:
    """Commit everything in the folder as Ada (pygit2: no git binary needed)."""
    repo = pygit2.Repository(str(repo_path))
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    who = pygit2.Signature("Ada Lovelace", "ada@example.org")
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", who, who, message, tree, parents))
