"""The reasoner's client against a real local model (SmolLM2-135M on llama.cpp) and, for what a
real server cannot be made to do on demand (429 with Retry-After, 500, a hang, malformed
answers), a stand-in HTTP server speaking the same protocol on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from brainmap import config
from brainmap.config import ReasonerSettings
from brainmap.errors import UserError
from brainmap.reasoner import Ledger, Reasoner, ReasonerUnavailable, attempt


class Topic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tags: list[str] = Field(max_length=3)
    kind: Literal["note", "howto", "decision"]


def client(url: str, tmp_path: Path, **kw: Any) -> Reasoner:
    settings = ReasonerSettings(url=url, model="smollm2", **kw)
    return Reasoner(settings, Ledger(tmp_path / "usage.json", settings.daily_token_budget))


# the real model


def test_a_real_model_answers_in_the_schema_and_is_counted(llm_url: str, tmp_path: Path) -> None:
    with client(llm_url, tmp_path, max_tokens=96) as r:
        got = r.json("Classify the note. Answer in JSON.", "How to rotate nginx logs", Topic)
        assert isinstance(got, Topic) and got.kind in ("note", "howto", "decision")
        assert len(got.tags) <= 3
        text = r.text("Answer in one short sentence.", "What is a log file?", max_tokens=32)
        assert text.strip()
        assert r.spent.calls in (2, 3)  # a repair attempt is allowed
        assert r.spent.prompt_tokens > 0 and 0 < r.spent.completion_tokens <= 96 * 2 + 32
        today = r.ledger.today()
        # the ledger holds what the server counted, not the reservations
        assert today["tokens"] == r.spent.tokens
        assert today["left"] == r.settings.daily_token_budget - r.spent.tokens


def test_status_lists_the_served_models(llm_url: str, tmp_path: Path) -> None:
    with client(llm_url, tmp_path) as r:
        status = r.status()
    assert status["answers"] is True and "smollm2" in status["models"]
    assert status["tokens"] == 0 and status["left"] == status["budget"]


def test_a_closed_port_is_unavailable_quickly(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with client(f"http://127.0.0.1:{port}/v1", tmp_path, retries=1, timeout_s=5) as r:
        started = time.monotonic()
        with pytest.raises(ReasonerUnavailable, match="cannot reach"):
            r.text("s", "u")
        assert time.monotonic() - started < 3
        assert r.status()["answers"] is False
        # nothing was spent, and the reservation was given back
        assert r.spent.calls == 0 and r.ledger.today()["tokens"] == 0


# the stand-in


@dataclass
class StandIn:
    url: str
    answers: list[Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]]]
    seen: list[tuple[float, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    trickle: float = 0.0  # seconds between the bytes of an answer


def completion(
    content: str, prompt: int = 10, completion: int = 5
) -> tuple[int, dict[str, str], bytes]:
    body = {
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }
    return 200, {}, json.dumps(body).encode()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    server_box: list[StandIn] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            box = server_box[0]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            box.seen.append((time.monotonic(), body, dict(self.headers)))
            answer = box.answers.pop(0) if box.answers else (lambda _: completion("{}"))
            status, headers, data = answer(body)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not box.trickle:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                try:
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(box.trickle)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server_box.append(StandIn(f"http://127.0.0.1:{server.server_address[1]}/v1", []))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server_box[0]
    server.shutdown()
    server.server_close()


def status(code: int, headers: dict[str, str] | None = None, body: bytes = b"{}") -> Any:
    return lambda _: (code, headers or {}, body)


def test_429_waits_as_long_as_retry_after_says(stand_in: StandIn, tmp_path: Path) -> None:
    stand_in.answers = [status(429, {"Retry-After": "1"}), lambda _: completion("hello")]
    with client(stand_in.url, tmp_path) as r:
        assert r.text("s", "u") == "hello"
    (first, *_), (second, *_) = stand_in.seen
    assert second - first >= 0.95
    assert r.spent.calls == 1 and r.spent.tokens == 15


def test_5xx_is_retried_then_given_up(stand_in: StandIn, tmp_path: Path) -> None:
    stand_in.answers = [status(500), status(503), lambda _: completion("ok")]
    with client(stand_in.url, tmp_path, retries=2) as r:
        assert r.text("s", "u") == "ok"
    stand_in.answers = [status(500)] * 3
    with client(stand_in.url, tmp_path, retries=1) as r, pytest.raises(ReasonerUnavailable) as err:
        r.text("s", "u")
    assert "HTTP 500 after 2 attempt(s)" in err.value.message
    assert r.ledger.today()["tokens"] == 15  # the failed call took nothing


def test_a_retry_after_past_the_deadline_ends_the_call_at_once(
    stand_in: StandIn, tmp_path: Path
) -> None:
    stand_in.answers = [status(429, {"Retry-After": "3600"})]
    with client(stand_in.url, tmp_path, timeout_s=5) as r:
        started = time.monotonic()
        with pytest.raises(ReasonerUnavailable, match="HTTP 429"):
            r.text("s", "u")
        assert time.monotonic() - started < 1


def test_a_hanging_server_times_out_within_timeout_s(stand_in: StandIn, tmp_path: Path) -> None:
    def hang(_: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(3)
        return completion("late")

    stand_in.answers = [hang]
    with client(stand_in.url, tmp_path, timeout_s=0.5) as r:
        started = time.monotonic()
        with pytest.raises(ReasonerUnavailable, match=r"no answer within 0\.5 s"):
            r.text("s", "u")
        assert time.monotonic() - started < 1.5


def test_an_invalid_answer_gets_one_repair_then_the_caller_falls_back(
    stand_in: StandIn, tmp_path: Path
) -> None:
    good = json.dumps({"tags": ["nginx"], "kind": "howto"})
    stand_in.answers = [
        lambda _: completion('{"tags": ["a", "b", "c", "d"], "ki'),
        lambda _: completion(good),
    ]
    with client(stand_in.url, tmp_path) as r:
        assert r.json("s", "u", Topic) == Topic(tags=["nginx"], kind="howto")
    first, repair = stand_in.seen[0][1], stand_in.seen[1][1]
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["additionalProperties"] is False
    assert [m["role"] for m in repair["messages"]] == ["system", "user", "assistant", "user"]
    stand_in.answers = [lambda _: completion("not json")] * 2
    with (
        client(stand_in.url, tmp_path) as r,
        pytest.raises(ReasonerUnavailable, match="schema twice"),
    ):
        r.json("s", "u", Topic)
    assert r.spent.calls == 2


@pytest.mark.parametrize(
    "body",
    [b"<html>busy</html>", b'{"choices": []}', b'{"choices": [{"message": {"content": null}}]}'],
)
def test_answers_that_are_not_chat_completions_are_unavailable(
    stand_in: StandIn, tmp_path: Path, body: bytes
) -> None:
    stand_in.answers = [status(200, body=body)]
    with client(stand_in.url, tmp_path) as r, pytest.raises(ReasonerUnavailable):
        r.text("s", "u")


def test_the_key_is_sent_but_never_said(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("MY_LLM_KEY", key)
    # a server that echoes the request's headers in its error
    stand_in.answers = [lambda _: (400, {}, f"bad request; Authorization: Bearer {key}".encode())]
    with client(stand_in.url, tmp_path, api_key_env="MY_LLM_KEY") as r:
        with pytest.raises(ReasonerUnavailable) as err:
            r.text("s", "u")
        said = err.value.message + (err.value.hint or "")
        assert key not in said and "***" in said
        assert stand_in.seen[0][2]["Authorization"] == f"Bearer {key}"
        assert key not in json.dumps(r.status()) and key not in json.dumps(r.spent.as_dict())
    stand_in.answers = [status(401)]
    with client(stand_in.url, tmp_path, api_key_env="MY_LLM_KEY") as r:
        with pytest.raises(ReasonerUnavailable, match="refused the key") as err:
            r.text("s", "u")
        assert "MY_LLM_KEY" in (err.value.hint or "")
    assert key not in (tmp_path / "usage.json").read_text()


def test_the_budget_is_never_exceeded_by_concurrent_calls(
    stand_in: StandIn, tmp_path: Path
) -> None:
    # each call reports 60 tokens; its reservation (prompt bytes + max_tokens) is larger, so
    # calls near the end of the budget are refused even if they would have fit
    stand_in.answers = [lambda _: completion("x" * 10, prompt=50, completion=10)] * 200
    budget = 1000
    settings = ReasonerSettings(
        url=stand_in.url, model="m", max_tokens=40, daily_token_budget=budget
    )
    refused: list[str] = []

    def worker() -> None:
        for _ in range(12):
            with Reasoner(settings, Ledger(tmp_path / "usage.json", budget)) as r:
                try:
                    r.text("s", "u")
                except ReasonerUnavailable as exc:
                    refused.append(exc.message)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    served = len(stand_in.seen)
    assert served * 60 <= budget
    assert Ledger(tmp_path / "usage.json", budget).today()["tokens"] == served * 60
    assert refused and all("budget is spent" in m for m in refused)
    assert served + len(refused) == 36


def test_attempt_says_why_a_use_fell_back(tmp_path: Path) -> None:
    cfg = config.Config(home=tmp_path)
    assert attempt(cfg, "tags", lambda r: r.text("s", "u")) == (None, None)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg.reasoner = ReasonerSettings(url=f"http://127.0.0.1:{port}/v1", retries=0)
    answer, spent = attempt(cfg, "tags", lambda r: r.text("s", "u"))
    assert answer is None and spent is not None and spent.calls == 0
    assert (
        spent.skipped[0].startswith("tags: the reasoner at") and "cannot reach" in spent.skipped[0]
    )
    cfg.reasoner.tags = False
    assert attempt(cfg, "tags", lambda r: r.text("s", "u")) == (None, None)


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ('url = "ftp://x"', "must start with http"),
        ('url = "http://x"\napi_key_env = "sk-abc def"', "never the key itself"),
        ("max_tokens = 1", "out of range"),
        ("daily_tokens = 5", "unknown setting"),
    ],
)
def test_bad_reasoner_settings_are_clear_errors(tmp_path: Path, section: str, words: str) -> None:
    (tmp_path / "config.toml").write_text(f"[reasoner]\n{section}\n")
    with pytest.raises(UserError, match=words):
        config.load(tmp_path)


def test_settings_round_trip_through_config_toml(tmp_path: Path) -> None:
    cfg = config.Config(home=tmp_path)
    cfg.reasoner = ReasonerSettings(
        url="http://127.0.0.1:8080/v1", model="qwen", api_key_env="K", expand=True
    )
    config.save(cfg)
    assert config.load(tmp_path).reasoner == cfg.reasoner


def test_doctor_and_stats_say_whether_it_answers_and_what_is_left(
    llm_url: str, tmp_path: Path
) -> None:
    from brainmap import ops
    from brainmap.ops.library import NoInput
    from model_server import reasoner_home

    home = reasoner_home(tmp_path / "home", llm_url, daily_token_budget=5000)
    brain = ops.Brain(home)
    with Reasoner.of(brain.cfg) as r:
        r.text("s", "Say hi.", max_tokens=16)
        spent = r.spent.tokens
    stats = ops.stats(brain, NoInput())
    assert stats.reasoner.configured and stats.reasoner.answers
    assert stats.reasoner.tokens_today == spent and stats.reasoner.budget_left == 5000 - spent
    check = next(c for c in ops.doctor(brain, NoInput()).checks if c.name == "reasoner")
    assert check.ok and f"{spent:,} of 5,000 tokens used today" in check.detail
    brain.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reasoner_home(home, f"http://127.0.0.1:{port}/v1")
    brain = ops.Brain(home)
    report = ops.doctor(brain, NoInput())
    check = next(c for c in report.checks if c.name == "reasoner")
    assert not check.ok and not report.ok and "does not answer" in check.detail and check.fix
    assert ops.stats(brain, NoInput()).reasoner.answers is False
    brain.close()


def test_a_server_that_trickles_its_answer_is_cut_off_at_timeout_s(
    stand_in: StandIn, tmp_path: Path
) -> None:
    # one byte at a time: each read is quick, the whole answer is not
    class Trickle:
        def __call__(self, _: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
            return completion("x" * 50)

    stand_in.answers = [Trickle()]
    stand_in.trickle = 0.2
    with client(stand_in.url, tmp_path, timeout_s=1.0, retries=0) as r:
        started = time.monotonic()
        with pytest.raises(ReasonerUnavailable, match="no answer within 1 s"):
            r.text("s", "u")
        assert time.monotonic() - started < 2.0
    # it may have worked on the call: the reservation stays counted
    assert r.ledger.today()["tokens"] > 0


@pytest.mark.parametrize("key", ["sk-abc\n", "  sk-abc  "])
def test_a_key_with_surrounding_whitespace_is_sent_trimmed(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("MY_LLM_KEY", key)
    stand_in.answers = [lambda _: completion("ok")]
    with client(stand_in.url, tmp_path, api_key_env="MY_LLM_KEY") as r:
        assert r.text("s", "u") == "ok"
    assert stand_in.seen[0][2]["Authorization"] == "Bearer sk-abc"


def test_a_key_no_header_can_carry_is_refused_without_being_quoted(
    stand_in: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-SECRET\u2019123"
    monkeypatch.setenv("MY_LLM_KEY", key)
    with client(stand_in.url, tmp_path, api_key_env="MY_LLM_KEY") as r:
        with pytest.raises(ReasonerUnavailable) as err:
            r.text("s", "u")
        assert "MY_LLM_KEY" in err.value.message and "SECRET" not in err.value.message
        status = r.status()
    assert status["answers"] is False and "SECRET" not in json.dumps(status)
    assert not stand_in.seen and r.ledger.today()["tokens"] == 0


def test_a_call_across_midnight_stays_in_the_day_that_reserved_it(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "usage.json", 1000)
    today = ledger.reserve(900)
    # a call reserved yesterday settles today: today's count is not touched
    ledger.settle("2000-01-01", 600, 100, answered=True)
    assert ledger.today() == {"tokens": 900, "calls": 0, "budget": 1000, "left": 100}
    ledger.settle(today, 900, 300, answered=True)
    assert ledger.today() == {"tokens": 300, "calls": 1, "budget": 1000, "left": 700}


def test_a_ledger_that_cannot_be_written_refuses_the_call(
    stand_in: StandIn, tmp_path: Path
) -> None:
    (tmp_path / "usage.json.lock").mkdir()
    with client(stand_in.url, tmp_path) as r:
        with pytest.raises(ReasonerUnavailable, match="token ledger"):
            r.text("s", "u")
        assert r.status()["answers"] is False
    assert not stand_in.seen


def test_a_strict_schema_the_endpoint_refuses_is_sent_non_strict(
    stand_in: StandIn, tmp_path: Path
) -> None:
    refusal = (
        b'{"error": {"message": "Invalid schema for response_format: minLength is not permitted"}}'
    )
    good = json.dumps({"tags": ["nginx"], "kind": "howto"})
    stand_in.answers = [status(400, body=refusal), lambda _: completion(good)]
    with client(stand_in.url, tmp_path) as r:
        assert r.json("s", "u", Topic).kind == "howto"
    assert [b["response_format"]["json_schema"]["strict"] for _, b, _ in stand_in.seen] == [
        True,
        False,
    ]


def test_no_repair_when_the_use_promises_one_call(stand_in: StandIn, tmp_path: Path) -> None:
    stand_in.answers = [lambda _: completion("not json")]
    with client(stand_in.url, tmp_path) as r:
        with pytest.raises(ReasonerUnavailable, match="did not match the schema"):
            r.json("s", "u", Topic, repair=False)
        assert r.spent.calls == 1 and r.spent.repairs == 0
    assert len(stand_in.seen) == 1


def test_a_url_with_credentials_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[reasoner]\nurl = "https://me:pw@api.example.com/v1"\n')
    with pytest.raises(UserError, match="must not carry a user or password"):
        config.load(tmp_path)
