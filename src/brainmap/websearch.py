"""The optional web search of ``ask``: a SearXNG-compatible JSON endpoint (``[web] url``).

Its results are a *possible second source*, never evidence by themselves. A throttled (HTTP
429) or unreachable engine says so: silence from the web is never evidence of absence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

WebStatus = Literal["ok", "throttled", "unavailable", "disabled", "skipped"]


@dataclass
class WebHit:
    title: str
    url: str
    snippet: str
    engine: str | None = None


@dataclass
class WebResult:
    """``ok`` (results, maybe none), ``throttled`` (429), ``unavailable`` (timeout, network,
    bad answer), ``disabled`` (no endpoint configured) or ``skipped`` (not needed or not
    wanted)."""

    status: WebStatus
    results: list[WebHit] = field(default_factory=list)
    detail: str = ""


def search(url: str, query: str, *, timeout_s: float, limit: int = 5) -> WebResult:
    """Ask the engine at ``url`` (``?q=...&format=json``)."""
    import httpx

    try:
        response = httpx.get(
            url,
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json", "User-Agent": "brainmap"},
            timeout=timeout_s,
            follow_redirects=True,
        )
    except httpx.TimeoutException:
        return WebResult("unavailable", detail=f"no answer within {timeout_s:g} s")
    except httpx.HTTPError as exc:
        return WebResult("unavailable", detail=f"{type(exc).__name__}: {exc}"[:300])
    if response.status_code == 429:
        retry = response.headers.get("Retry-After")
        return WebResult(
            "throttled", detail="HTTP 429" + (f", retry after {retry}" if retry else "")
        )
    if response.status_code != 200:
        return WebResult("unavailable", detail=f"HTTP {response.status_code}")
    try:
        data = response.json()
        rows = data["results"]
        hits = [
            WebHit(
                str(r.get("title", "")),
                str(r.get("url", "")),
                str(r.get("content", ""))[:500],
                r.get("engine"),
            )
            for r in rows[:limit]
            if isinstance(r, dict) and r.get("url")
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return WebResult("unavailable", detail="the answer is not SearXNG JSON")
    return WebResult("ok", hits)
