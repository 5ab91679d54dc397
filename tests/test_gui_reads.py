"""The reads the GUI's core pages make through ops: search results in pages (offset), the
diary by day and by week, and the most and least used entries."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pydantic import ValidationError

from brainmap import ops, usage
from brainmap.errors import UserError
from conftest import write


def test_offset_pages_through_the_same_ranking(brain: ops.Brain) -> None:
    query = {"query": "database backup cron", "mode": "bm25", "route": False}
    whole = ops.search(brain, ops.SearchInput.model_validate({**query, "limit": 6})).hits
    assert len(whole) == 6
    first = ops.search(brain, ops.SearchInput.model_validate({**query, "limit": 3})).hits
    second = ops.search(
        brain, ops.SearchInput.model_validate({**query, "limit": 3, "offset": 3})
    ).hits
    assert [h.chunk_id for h in first + second] == [h.chunk_id for h in whole]
    far = ops.search(brain, ops.SearchInput.model_validate({**query, "offset": 900})).hits
    assert far == []
    with pytest.raises(ValidationError):
        ops.SearchInput.model_validate({**query, "offset": -1})
    with pytest.raises(ValidationError):  # offset + limit stays within what a search ranks
        ops.SearchInput.model_validate({**query, "offset": 901})


def test_offset_is_in_the_search_schema() -> None:
    schema = ops.SearchInput.model_json_schema()["properties"]["offset"]
    assert (schema["default"], schema["minimum"], schema["maximum"]) == (0, 0, 900)


def _day(home: Path, project: str, day: str, text: str) -> Path:
    root = home / "brain" / "diary" / project / day[:4] / day[5:7]
    return write(root / f"{day[8:]}.md", f"# {project}, {day}\n\n{text}\n")


def test_the_diary_by_day_and_by_week(home: Path) -> None:
    with ops.Brain(home) as brain:
        empty = ops.diary_index(brain, ops.DiaryIndexInput())
        assert (empty.projects, empty.project, empty.days) == ([], None, [])
        _day(home, "shop", "2026-01-05", "Monday in the shop")
        _day(home, "shop", "2026-01-07", "Wednesday in the shop")
        _day(home, "shop", "2026-01-13", "a Tuesday, a week later")
        _day(home, "blog", "2026-02-01", "the newest day of all")
        # the project with the newest day comes first; days and weeks newest first
        assert ops.diary_index(brain, ops.DiaryIndexInput()).project == "blog"
        index = ops.diary_index(brain, ops.DiaryIndexInput(project="shop"))
        assert index.library == "brain" and index.projects == ["blog", "shop"]
        assert [d.day for d in index.days] == ["2026-01-13", "2026-01-07", "2026-01-05"]
        assert index.weeks == ["2026-W03", "2026-W02"]
        assert index.days[0].path == "diary/shop/2026/01/13.md"

        day = ops.diary_text(brain, ops.DiaryTextInput(project="shop", day=dt.date(2026, 1, 7)))
        assert (day.kind, day.label, day.first, day.last) == ("day", "2026-01-07", "2026-01-07",
                                                             "2026-01-07")  # fmt: skip
        assert "Wednesday in the shop" in day.text and day.path == "diary/shop/2026/01/07.md"
        assert (day.previous, day.next, day.truncated) == ("2026-01-05", "2026-01-13", False)

        week = ops.diary_text(brain, ops.DiaryTextInput(project="shop", week="2026-W02"))
        assert (week.first, week.last, week.path) == ("2026-01-05", "2026-01-11", None)
        assert "Monday" in week.text and "Wednesday" in week.text  # no rollup yet: the days
        assert [d.day for d in week.days] == ["2026-01-05", "2026-01-07"]
        assert (week.previous, week.next) == (None, "2026-W03")
        ops.diary_rollup(brain, ops.DiaryRollupInput(project="shop", period="week"))
        rolled = ops.diary_text(brain, ops.DiaryTextInput(project="shop", week="2026-W02"))
        assert rolled.path == "diary/shop/2026-W02.md"
        assert "(2026/01/05.md)" in rolled.text and "Monday" not in rolled.text

        for wrong in ({"project": "nobody", "day": "2026-01-05"},
                      {"project": "shop", "day": "2026-01-06"},
                      {"project": "shop", "week": "2026-W09"}):  # fmt: skip
            with pytest.raises(UserError) as missing:
                ops.diary_text(brain, ops.DiaryTextInput.model_validate(wrong))
            assert missing.value.status == 404, wrong
        with pytest.raises(UserError):
            ops.diary_index(brain, ops.DiaryIndexInput(project="nobody"))
        for invalid in ({"project": "shop"}, {"project": "shop", "week": "W2"},
                        {"project": "shop", "day": "2026-01-05", "week": "2026-W02"}):  # fmt: skip
            with pytest.raises(ValidationError):
                ops.DiaryTextInput.model_validate(invalid)


def test_a_long_day_is_cut(home: Path) -> None:
    from brainmap.ops.agent import MAX_DIARY_SHOWN

    with ops.Brain(home) as brain:
        _day(home, "big", "2026-03-02", "x" * (MAX_DIARY_SHOWN + 10))
        shown = ops.diary_text(brain, ops.DiaryTextInput(project="big", day=dt.date(2026, 3, 2)))
        assert shown.truncated and len(shown.text.encode()) == MAX_DIARY_SHOWN


def test_a_symlinked_rollup_is_not_followed(home: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside.md", "a secret from outside the library\n")
    with ops.Brain(home) as brain:
        _day(home, "shop", "2026-02-03", "a day of the week")
        (home / "brain" / "diary" / "shop" / "2026-W06.md").symlink_to(outside)
        week = ops.diary_text(brain, ops.DiaryTextInput(project="shop", week="2026-W06"))
        assert week.path is None and "a day of the week" in week.text  # its days, not the link
        assert "secret" not in week.text


def test_only_the_diarys_own_project_folders_are_listed(home: Path) -> None:
    with ops.Brain(home) as brain:
        _day(home, "shop", "2026-02-03", "the diary's own project")
        _day(home, "My Proj", "2026-02-03", "a folder made by hand")
        assert ops.diary_index(brain, ops.DiaryIndexInput()).projects == ["shop"]


def test_usage_report_most_and_least_used(brain: ops.Brain) -> None:
    hit = ops.search(brain, ops.SearchInput(query="database is locked")).hits[0]
    ops.get(brain, ops.GetInput(ref=hit.id))
    usage.flush()
    report = ops.usage_report(brain, ops.UsageReportInput(limit=3))
    assert report.enabled and report.events >= 2
    assert report.most_used[0].id == hit.id and report.most_used[0].gets == 1
    assert len(report.most_used) <= 3 and len(report.least_used) == 3
    assert hit.id not in {u.id for u in report.least_used}
    # the diary is a log: served, it still is no entry of the most used
    diary = ops.get(brain, ops.GetInput(ref="example:diary/2026-11-01.md"))
    for _ in range(3):
        ops.get(brain, ops.GetInput(ref=diary.id))
    usage.flush()
    top = ops.usage_report(brain, ops.UsageReportInput(limit=3)).most_used
    assert diary.id not in {u.id for u in top} and top[0].id == hit.id
    assert all(u.title is not None for u in top)
    wide = ops.usage_report(brain, ops.UsageReportInput())
    assert len(wide.least_used) > 3  # 20 by default: every entry of the example here
    with pytest.raises(ValidationError):
        ops.UsageReportInput(limit=0)


def test_the_core_reads_are_not_served() -> None:
    served = {o.name for o in ops.served()}
    reads = {"diary_index", "diary_text", "usage_report"}
    assert reads <= set(ops.OPS) and not reads & served
