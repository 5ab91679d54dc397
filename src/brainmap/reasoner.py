"""The optional reasoner: any OpenAI-compatible chat endpoint (``[reasoner]`` in config.toml).

A local llama.cpp or Ollama server, or a hosted API. brainmap works without one: every use
(tags on save, query expansion, diary prose, written answers) has a deterministic path, and the
caller takes it whenever :class:`ReasonerUnavailable` is raised, saying why.

Every call is bounded and counted:

- one call has ``timeout_s`` in all, retries included; 429 and 5xx answers and refused
  connections are retried ``retries`` times with backoff, honouring ``Retry-After``;
- before a call, its prompt (estimated) and ``max_tokens`` are reserved against
  ``daily_token_budget`` in a ledger shared by all processes (``reasoner-usage.json`` beside
  config.toml, under a lock); afterwards the reservation is replaced by the tokens the server
  reports. A call that could take the day past the budget is not made, so the budget is never
  exceeded, even by calls running at once;
- structured answers are requested with a JSON schema (``response_format`` of type
  ``json_schema``) and validated with pydantic; an invalid one gets one repair attempt, then
  the caller's deterministic path.

The key is read from the environment variable that ``api_key_env`` names, at each call; it is
never written to a log, an error message or the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from brainmap.config import Config, ReasonerSettings
from brainmap.errors import UserError
from brainmap.safefile import atomic_write

if TYPE_CHECKING:
    import httpx
    from pydantic import BaseModel

T = TypeVar("T", bound="BaseModel")
R = TypeVar("R")

USES = ("tags", "expand", "diary", "answer")
BACKOFF_S = 0.5  # the first wait after a 429 / 5xx without Retry-After; doubled each time
MAX_WAIT_S = 20.0  # a longer Retry-After ends the call (the deadline would pass anyway)
MAX_ANSWER_BYTES = 1_000_000  # an answer is a few kB; a bigger one is not read to its end
# endpoints whose strict JSON-schema mode refused a schema (asked non-strict from then on)
_STRICT: dict[str, bool] = {}
_SCHEMA_REFUSED = re.compile(r"schema|strict|response_format", re.IGNORECASE)
_CHARS_PER_TOKEN = 3  # tokens of an answer whose server reports no usage


class ReasonerUnavailable(UserError):
    """The reasoner gave no usable answer (not configured, off, down, over budget, invalid):
    the caller takes its deterministic path and reports the message."""


class _Unanswered(ReasonerUnavailable):
    """A request sent but not answered in time: the server may have spent tokens on it."""


@dataclass
class Spent:
    """What one operation asked of the reasoner."""

    model: str = ""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    skipped: list[str] = field(default_factory=list)  # why a use fell back, one line each
    repairs: int = 0  # structured answers that did not validate at first (a repair was asked)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "calls": self.calls, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "skipped": list(self.skipped),
            "repairs": self.repairs,
        }  # fmt: skip


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


class Ledger:
    """Tokens used per day by every process of one home (a JSON file under a lock)."""

    def __init__(self, path: Path, budget: int) -> None:
        self.path = path
        self.budget = budget

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = os.open(
                self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600
            )
        except OSError as exc:
            raise self._broken(exc) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = self._read()
            before = dict(state)
            yield state
            if state != before:
                data = json.dumps(state, sort_keys=True).encode()
                try:
                    atomic_write(self.path.parent, self.path, data)
                except OSError as exc:
                    raise self._broken(exc) from None
        finally:
            os.close(lock)  # closing releases the lock

    def _broken(self, exc: OSError) -> ReasonerUnavailable:
        # without its ledger the budget cannot be kept: no call is made
        return ReasonerUnavailable(
            f"the reasoner's token ledger {self.path} cannot be written ({exc.strerror or exc})",
            hint=f"check the permissions and free space of {self.path.parent}",
        )

    def _read(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("day") != _today():
                raise ValueError("another day")
            return {
                "day": state["day"],
                "tokens": int(state["tokens"]),
                "calls": int(state["calls"]),
            }
        except (OSError, ValueError, KeyError, TypeError):
            return {"day": _today(), "tokens": 0, "calls": 0}

    def reserve(self, tokens: int) -> str:
        """Count ``tokens`` now, or raise :class:`ReasonerUnavailable` if they do not fit.
        Returns the day they were counted in, for :meth:`settle`."""
        with self._locked() as state:
            if state["tokens"] + tokens > self.budget:
                raise ReasonerUnavailable(
                    f"the reasoner's daily token budget is spent ({state['tokens']:,} of "
                    f"{self.budget:,} used today; this call could take {tokens:,})",
                    hint="raise [reasoner] daily_token_budget in config.toml, or wait for tomorrow (UTC)",
                )
            state["tokens"] += tokens
            return str(state["day"])

    def settle(self, day: str, reserved: int, used: int, *, answered: bool) -> None:
        """Replace a reservation by the tokens the call really took (never more than reserved:
        a server that under-reports cannot make room it did not give back). A call reserved
        before midnight (UTC) stays counted in the day that reserved it: the new day's count
        holds only the new day's reservations."""
        with self._locked() as state:
            if state["day"] != day:
                return
            state["tokens"] = max(0, state["tokens"] - reserved + min(used, reserved))
            state["calls"] += answered

    def today(self) -> dict[str, int]:
        with self._locked() as state:
            used = int(state["tokens"])
            return {"tokens": used, "calls": int(state["calls"]), "budget": self.budget,
                    "left": max(0, self.budget - used)}  # fmt: skip


def attempt(cfg: Config, use: str, ask: Callable[[Reasoner], R]) -> tuple[R | None, Spent | None]:
    """Run one use of the reasoner: ``(answer, spent)``. ``(None, None)`` when no reasoner is
    configured or the use is off (the deterministic path is the normal one, nothing to say);
    ``(None, spent)`` with ``spent.skipped`` saying why when it is configured but gave no
    usable answer (down, over budget, invalid twice)."""
    if not cfg.reasoner.enabled or not getattr(cfg.reasoner, use):
        return None, None
    with Reasoner.of(cfg) as reasoner:
        try:
            return ask(reasoner), reasoner.spent
        except ReasonerUnavailable as exc:
            reasoner.spent.skipped.append(f"{use}: {exc.message}")
            return None, reasoner.spent


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import email.utils  # only for a date: a cold search imports this module

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Reasoner:
    """A client of one OpenAI-compatible endpoint. ``spent`` adds up what it was asked."""

    def __init__(self, settings: ReasonerSettings, ledger: Ledger, *, model: str | None = None):
        self.settings = settings
        self.model = settings.model if model is None else model
        self.ledger = ledger
        self.spent = Spent(model=self.model)
        self._client: httpx.Client | None = None

    @classmethod
    def of(cls, cfg: Config, *, model: str | None = None) -> Reasoner:
        """The configured reasoner; raises :class:`ReasonerUnavailable` when there is none."""
        if not cfg.reasoner.enabled:
            raise ReasonerUnavailable(
                "no reasoner configured",
                hint="set [reasoner] url (and model) in config.toml; see README.md#reasoner",
            )
        return cls(cfg.reasoner, Ledger(cfg.reasoner_usage_path, cfg.reasoner.daily_token_budget),
                   model=model)  # fmt: skip

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Reasoner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # asking

    def text(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """A free-text answer."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self._complete(messages, None, max_tokens)

    def json(
        self,
        system: str,
        user: str,
        schema: type[T],
        *,
        max_tokens: int | None = None,
        repair: bool = True,
    ) -> T:
        """An answer in the shape of ``schema`` (a pydantic model), asked for with its JSON
        schema; one repair attempt when it does not validate (none with ``repair=False``, for
        a use that promises one call)."""
        from pydantic import ValidationError

        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        fmt = self._format(schema)
        content = self._complete(messages, fmt, max_tokens)
        try:
            return schema.model_validate_json(content)
        except ValidationError as exc:
            problem = "; ".join(e["msg"] for e in exc.errors()[:3])
            if not repair:
                raise ReasonerUnavailable(
                    f"the reasoner's answer did not match the schema ({problem})",
                    hint="a larger model follows schemas better; `brainmap reasoner bakeoff` compares models",
                ) from None
        self.spent.repairs += 1
        messages += [
            {"role": "assistant", "content": content[:2000]},
            {"role": "user", "content": f"That answer is not valid ({problem}). Answer again with only "
                                        "the JSON object the schema asks for, shorter."},
        ]  # fmt: skip
        content = self._complete(messages, fmt, max_tokens)
        try:
            return schema.model_validate_json(content)
        except ValidationError as exc:
            raise ReasonerUnavailable(
                f"the reasoner's answer did not match the schema twice ({exc.errors()[0]['msg']})",
                hint="a larger model follows schemas better; `brainmap reasoner bakeoff` compares models",
            ) from None

    def _format(self, schema: type[BaseModel]) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema.__name__, "schema": schema.model_json_schema(),
                # strict: llama.cpp and Ollama make a grammar of it either way; a hosted API
                # whose strict mode refuses some of the schema's keywords gets it non-strict
                # (pydantic validates the answer in both cases)
                "strict": _STRICT.get(self.settings.url, True),
            },
        }  # fmt: skip

    def status(self) -> dict[str, Any]:
        """Whether the endpoint answers (``GET /models``), its models, today's tokens."""
        out: dict[str, Any] = {"url": self.shown_url, "model": self.model}
        try:
            out.update(self.ledger.today())
        except ReasonerUnavailable as exc:
            out.update(tokens=0, calls=0, budget=self.ledger.budget, left=0, answers=False,
                       error=exc.message)  # fmt: skip
            return out
        started = time.monotonic()
        try:
            headers = self._headers()
            response = self._http().get(
                self._url("/models"), headers=headers, timeout=min(5.0, self.settings.timeout_s)
            )
            out["latency_ms"] = round((time.monotonic() - started) * 1000, 1)
            if response.status_code != 200:
                raise ReasonerUnavailable(f"GET /models answered HTTP {response.status_code}")
            data = response.json().get("data", [])
            models = [str(m.get("id")) for m in data if isinstance(m, dict)]
            out.update(answers=True, models=models)
        except ReasonerUnavailable as exc:
            out.update(answers=False, error=exc.message)
        except Exception as exc:
            # the exception's text may quote a request header: only its kind is said
            out.update(answers=False, error=f"cannot reach it ({type(exc).__name__})")
        return out

    # the HTTP part

    @property
    def shown_url(self) -> str:
        """The endpoint as messages show it: no credentials, no query string."""
        parts = urlsplit(self.settings.url)
        host = parts.hostname or ""
        try:
            netloc = f"{host}:{parts.port}" if parts.port else host
        except ValueError:  # a port that is no number: the call fails and says so
            netloc = host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            # trust_env=False: HTTP(S)_PROXY and .netrc are not read (a local model server
            # must not be sent through a proxy); see README.md#reasoner
            self._client = httpx.Client(trust_env=False)
        return self._client

    def _url(self, path: str) -> str:
        return self.settings.url.rstrip("/") + path

    def _key(self) -> str:
        if not self.settings.api_key_env:
            return ""
        key = os.environ.get(self.settings.api_key_env, "").strip()
        if key and not (key.isascii() and key.isprintable()):
            # never quoted: it is the secret
            raise ReasonerUnavailable(
                f"${self.settings.api_key_env} holds characters an HTTP header cannot carry",
                hint=f"set ${self.settings.api_key_env} to the key alone (no quotes, spaces or newlines)",
            )
        return key

    def _headers(self) -> dict[str, str]:
        key = self._key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _scrub(self, text: str) -> str:
        try:
            key = self._key()
        except ReasonerUnavailable:
            return "(not shown)"
        return text.replace(key, "***") if key else text

    def _complete(
        self, messages: list[dict[str, str]], fmt: dict[str, Any] | None, max_tokens: int | None
    ) -> str:
        limit = min(max_tokens or self.settings.max_tokens, self.settings.max_tokens)
        headers = self._headers()  # a bad key fails before anything is reserved
        # a token is at least one byte: the prompt's bytes bound its tokens from above, so the
        # reservation never falls short of what the server will count
        estimate = sum(len(m["content"].encode()) for m in messages) + 16 * len(messages)
        reserved = estimate + limit
        day = self.ledger.reserve(reserved)
        used, answered = 0, False  # a call refused or failed before an answer took nothing
        try:
            payload: dict[str, Any] = {
                "model": self.model, "messages": messages, "max_tokens": limit, "temperature": 0,
                "stream": False,
            }  # fmt: skip
            if fmt is not None:
                payload["response_format"] = fmt
            try:
                body = self._post(payload, headers)
            except _Unanswered:
                used = reserved  # it may have worked on it (and billed it): keep the reservation
                raise
            used, answered = reserved, True  # an answer that does not parse still took tokens
            content, prompt, completion = _read_completion(body)
            if prompt + completion <= 0:  # a server that does not report usage
                prompt, completion = estimate, len(content) // _CHARS_PER_TOKEN + 1
            used = prompt + completion
            self.spent.calls += 1
            self.spent.prompt_tokens += prompt
            self.spent.completion_tokens += completion
            return content
        finally:
            with contextlib.suppress(ReasonerUnavailable):
                self.ledger.settle(day, reserved, used, answered=answered)

    def _post(self, payload: dict[str, Any], headers: dict[str, str]) -> Any:
        import httpx

        deadline = time.monotonic() + self.settings.timeout_s
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late()
            try:
                status, retry_after, data = self._send(payload, headers, deadline)
            except httpx.TimeoutException:
                raise self._late() from None
            except httpx.ConnectError:
                # nothing listens: fail at once (a retry would add seconds to every save)
                raise self._down("cannot reach it (connection refused or no route)") from None
            except (httpx.HTTPError, OSError) as exc:
                # dropped mid-way: try again; the exception's text is not said (it may
                # quote a request header)
                if attempt < self.settings.retries and self._wait(BACKOFF_S * 2**attempt, deadline):
                    attempt += 1
                    continue
                raise self._down(f"cannot reach it ({type(exc).__name__})") from None
            if status == 429 or status >= 500:
                wait = BACKOFF_S * 2**attempt if retry_after is None else retry_after
                if (
                    attempt < self.settings.retries
                    and wait <= MAX_WAIT_S
                    and self._wait(wait, deadline)
                ):
                    attempt += 1
                    continue
                raise self._down(f"HTTP {status} after {attempt + 1} attempt(s)")
            if status in (401, 403):
                raise self._down(
                    f"HTTP {status}: the endpoint refused the key",
                    hint=f"check the variable [reasoner] api_key_env names "
                    f"({self.settings.api_key_env or 'none set'})",
                )
            if (
                status == 400
                and payload.get("response_format", {}).get("json_schema", {}).get("strict")
                and _SCHEMA_REFUSED.search(data[:2000].decode(errors="replace"))
            ):
                _STRICT[self.settings.url] = False  # this endpoint's strict mode refused the schema
                payload["response_format"]["json_schema"]["strict"] = False
                continue
            if status != 200:
                detail = self._scrub(data[:200].decode(errors="replace").replace("\n", " "))
                raise self._down(f"HTTP {status}: {detail}")
            try:
                return json.loads(data)
            except ValueError:
                raise self._down("the answer is not JSON") from None

    def _send(
        self, payload: dict[str, Any], headers: dict[str, str], deadline: float
    ) -> tuple[int, float | None, bytes]:
        """One request, read within ``deadline`` whole (a server that trickles its answer is
        cut off like one that sends nothing) and at most :data:`MAX_ANSWER_BYTES`."""
        import httpx

        left = max(0.01, deadline - time.monotonic())
        with self._http().stream(
            "POST", self._url("/chat/completions"), json=payload, headers=headers, timeout=left
        ) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise self._down(f"the answer is over {MAX_ANSWER_BYTES // 1_000_000} MB")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the answer took too long")
                chunks.append(chunk)
            return response.status_code, _retry_after(response), b"".join(chunks)

    @staticmethod
    def _wait(seconds: float, deadline: float) -> bool:
        """Sleep ``seconds`` if that leaves time before ``deadline``."""
        if time.monotonic() + seconds >= deadline:
            return False
        time.sleep(seconds)
        return True

    def _late(self) -> _Unanswered:
        down = self._down(f"no answer within {self.settings.timeout_s:g} s", unanswered=True)
        assert isinstance(down, _Unanswered)
        return down

    def _down(
        self, why: str, hint: str | None = None, *, unanswered: bool = False
    ) -> ReasonerUnavailable:
        kind = _Unanswered if unanswered else ReasonerUnavailable
        return kind(
            f"the reasoner at {self.shown_url} gave no answer: {why}",
            hint=hint
            or "check that the server runs (`brainmap doctor`), or leave [reasoner] url empty",
        )


def _read_completion(body: Any) -> tuple[str, int, int]:
    """The text and token counts of an OpenAI chat completion."""
    try:
        content = body["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError("content is not text")
    except (KeyError, IndexError, TypeError):
        raise ReasonerUnavailable(
            "the reasoner's answer is not a chat completion (no choices[0].message.content)",
            hint="[reasoner] url must be the OpenAI-compatible base, ending in /v1",
        ) from None
    usage = body.get("usage") if isinstance(body, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    prompt = usage.get("prompt_tokens", 0)
    completion = usage.get("completion_tokens", 0)
    prompt = prompt if isinstance(prompt, int) and prompt >= 0 else 0
    completion = completion if isinstance(completion, int) and completion >= 0 else 0
    return content, prompt, completion
