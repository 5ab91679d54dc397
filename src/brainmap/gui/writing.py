"""The writing and history pages: the save form, the diary by day and by week, and the most
and least used entries."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from brainmap import ops
from brainmap.errors import UserError
from brainmap.gui.render import entry_url
from brainmap.gui.site import Form, Route, Site, redirect

if TYPE_CHECKING:
    from brainmap.notes import Candidate

TYPES = ("note", "gotcha", "decision", "pattern", "guide", "bug")  # offered; any type may be typed
USAGE_SHOWN = 20
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# the frontmatter the diary writes atop each day and rollup (the page shows it as a title)
_FRONTMATTER = re.compile(r"(?:\A|(?<=\n))---\ntitle: [^\n]*\n(?:[a-z_]+: [^\n]*\n)*---\n")
_DAY_LINK = re.compile(r"([0-9]{4})/([0-9]{2})/([0-9]{2})\.md")  # as a rollup links its days


# --- the save form ----------------------------------------------------------------------------


@dataclass
class SaveForm:
    """What the save form holds, as typed (shown back when the save did not happen)."""

    title: str = ""
    body: str = ""
    library: str = ""
    type: str = ""
    tags: str = ""
    force: bool = False
    merge_into: str = ""

    @classmethod
    def of(cls, form: Form) -> SaveForm:
        text = {k: form.get(k, "") for k in ("title", "body", "library", "type", "tags")}
        return cls(**text, force=form.get("force") == "1", merge_into=form.get("merge_into", ""))

    def op_input(self) -> ops.SaveInput:
        """The save op's input (ValidationError when a field is not valid)."""
        tags = [t.strip() for t in self.tags.split(",") if t.strip()]
        return ops.SaveInput.model_validate({
            "title": self.title, "body": self.body.replace("\r\n", "\n"),
            "library": self.library or None, "type": self.type.strip() or None,
            "tags": tags or None, "force": self.force, "merge_into": self.merge_into or None,
        })  # fmt: skip


def save_page(
    site: Site,
    form: SaveForm,
    *,
    errors: list[str] | None = None,
    candidates: list[Candidate] | None = None,
    status: int = 200,
) -> Response:
    """The save form, with what was typed and what was wrong."""
    return site.render.page(
        "save.html", title="Save an entry", current="save", status=status, form=form,
        names=site.libraries_for("write"), types=TYPES, errors=errors or [],
        candidates=candidates or [],
        default_library=site.brain.cfg.save.library,
    )  # fmt: skip


def save(site: Site, fields_: Form) -> Response:
    """POST /ui/save: save the entry and show it; or the form again with what was wrong
    (the input kept), or with the near-duplicates that stopped the save."""
    form = SaveForm.of(fields_)
    try:
        result = site.op("save", form.op_input())
    except ValidationError as exc:
        return save_page(site, form, errors=_field_errors(exc), status=400)
    except UserError as exc:
        message = exc.message + (f" ({exc.hint})" if exc.hint else "")
        return save_page(site, form, errors=[message], status=exc.status)
    if result.status == "duplicate":  # an answer, not an error: nothing written, the choices
        form.force, form.merge_into = False, ""
        # (the op's message speaks of merge_into and force: the form has its own words)
        similar = "A very similar entry exists: add this to it, or save a new entry anyway."
        return save_page(site, form, errors=[similar], candidates=result.candidates)
    done = "merged" if result.status == "merged" else "saved"
    return redirect(entry_url(result.id or "") + f"?done={done}")


def _field_errors(exc: ValidationError) -> list[str]:
    """One line per wrong field, named as the form labels it."""
    labels = {"title": "Title", "body": "Text", "library": "Library", "type": "Type",
              "tags": "Tags", "merge_into": "Add to"}  # fmt: skip
    out = []
    for error in exc.errors():
        where = error["loc"][0] if error["loc"] else ""
        out.append(f"{labels.get(str(where), str(where) or 'Form')}: {error['msg']}")
    return out


# --- the diary --------------------------------------------------------------------------------


def diary(site: Site, request: Request) -> Response:
    """The diary's projects, and one project's weeks with their days (newest first)."""
    project = request.query_params.get("project", "").strip() or None
    index = site.op("diary_index", ops.DiaryIndexInput(project=project))
    weeks: dict[str, list[str]] = {week: [] for week in index.weeks}
    for day in index.days:
        weeks[day.week].append(day.day)
    return site.render.page("diary.html", title="Diary", current="diary", index=index,
                            weeks=weeks, diary_url=diary_url)  # fmt: skip


def diary_period(site: Site, request: Request) -> Response:
    """One day of a project's diary (``YYYY-MM-DD``) or one week (``YYYY-Www``)."""
    project = str(request.path_params["project"])
    label = str(request.path_params["label"])
    period = {"day": label} if _DAY.fullmatch(label) else {"week": label}
    shown = site.op("diary_text", ops.DiaryTextInput.model_validate({"project": project, **period}))
    kind = "week" if shown.kind == "week" else "day"
    return site.render.page(
        "diary_period.html", title=f"{shown.project}, {kind} {shown.label}", current="diary",
        shown=shown, text=_FRONTMATTER.sub("", shown.text), diary_url=diary_url,
        day_link=_day_link(shown.project),
    )  # fmt: skip


def diary_url(project: str, label: str = "") -> str:
    """The diary page of a project, or of one of its days or weeks."""
    if not label:
        return "/ui/diary?" + urllib.parse.urlencode({"project": project})
    return f"/ui/diary/{urllib.parse.quote(project, safe='')}/{urllib.parse.quote(label)}"


def _day_link(project: str) -> Callable[[str], str | None]:
    """A rollup's links to its days (``2026/01/05.md``) -> those days' pages."""

    def href(target: str) -> str | None:
        found = _DAY_LINK.fullmatch(target)
        return diary_url(project, "-".join(found.groups())) if found else None

    return href


# --- usage ------------------------------------------------------------------------------------


def usage(site: Site, request: Request) -> Response:
    """The most and least used entries, from usage telemetry (or how to turn it on)."""
    report = site.op("usage_report", ops.UsageReportInput(limit=USAGE_SHOWN))
    return site.render.page("usage.html", title="Usage", current="usage", report=report,
                            config_path=str(site.brain.cfg.config_path))  # fmt: skip


def routes(site: Site) -> list[Route]:
    """The save form, the diary and usage."""

    def form(request: Request) -> Response:
        return save_page(site, SaveForm(library=request.query_params.get("library", "")))

    async def save_post(request: Request) -> Response:
        return await site.post(request, request.url.path, lambda fields_: save(site, fields_))

    return [
        ("/ui/save", site.safely(form), ["GET"]),
        ("/ui/save", save_post, ["POST"]),
        ("/ui/diary", site.safely(lambda r: diary(site, r)), ["GET"]),
        ("/ui/diary/{project}/{label}", site.safely(lambda r: diary_period(site, r)), ["GET"]),
        ("/ui/usage", site.safely(lambda r: usage(site, r)), ["GET"]),
    ]
