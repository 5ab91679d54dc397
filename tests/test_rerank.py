"""The optional rerank: its protocol against a stand-in server, its failures, the rank blend
and the ``[rerank]`` settings.

The stand-in is real HTTP on 127.0.0.1 in a thread, in place of a remote rerank service that
cannot run here; it speaks the request and answer shapes of llama.cpp server, Jina and TEI,
and answers best-first (as they do), so that scores must be put back by index.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brainmap import config
from brainmap.config import RerankSettings
from brainmap.errors import UserError
from brainmap.rerank import MAX_RERANK_CHARS, Reranker, RerankError, blend, endpoint

QUERY = "how do I rotate the api token"
TEXTS = [
    "the weather in march",  # 0 query words
    "rotate the api token with `tok rotate`",  # 5
    "an api token",  # 2
    "the token",  # 2 (with "the")
]


def relevance(query: str, text: str) -> float:
    """The stand-in model: how many query words the text holds (ties broken by length)."""
    words = set(query.split())
    return sum(w in words for w in text.replace("`", "").split()) - len(text) / 1000


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class StandIn:
    """What the stand-in answers: ``flavour`` (llama, jina or tei) or a fixed ``reply``."""

    port: int
    flavour: str = "llama"
    reply: Callable[[Request], tuple[int, bytes]] | None = None
    delay_s: float = 0.0
    requests: list[Request] = field(default_factory=list)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def answer(flavour: str, request: Request) -> tuple[int, Any]:
    """The three protocols, as their servers implement them."""
    body, path = request.body, request.path
    if flavour == "tei":  # POST /rerank {query, texts} -> [{index, score}]
        if path != "/rerank" or "texts" not in body:
            return 422, {"error": "Json deserialize error: missing field `texts`"}
        scored = [{"index": i, "score": relevance(body["query"], t)}
                  for i, t in enumerate(body["texts"])]  # fmt: skip
        return 200, sorted(scored, key=lambda r: -r["score"])
    if flavour == "jina":  # POST /v1/rerank {model, query, documents, top_n} -> {results}
        if path != "/v1/rerank" or "documents" not in body or not body.get("model"):
            return 400, {"detail": "model and documents are required"}
        docs = body["documents"]
        results = []
        for i, text in enumerate(docs):
            row: dict[str, Any] = {"index": i, "relevance_score": relevance(body["query"], text)}
            if body.get("return_documents", True):
                row["document"] = {"text": text}
            results.append(row)
        results.sort(key=lambda r: -r["relevance_score"])
        top = body.get("top_n", len(docs))
        return 200, {"model": body["model"], "usage": {"total_tokens": 9}, "results": results[:top]}
    # llama.cpp server: /rerank, /reranking, /v1/rerank, /v1/reranking; TEI answer for texts
    if path not in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking"):
        return 404, {"error": {"code": 404, "message": "File Not Found"}}
    tei = "texts" in body
    docs = body["texts"] if tei else body["documents"]
    label = "score" if tei else "relevance_score"
    rows = [{"index": i, label: relevance(body["query"], t)} for i, t in enumerate(docs)]
    rows.sort(key=lambda r: -r[label])
    rows = rows[: body.get("top_n", len(docs))]
    if tei:
        return 200, rows
    return 200, {"model": body.get("model", "reranker.gguf"), "object": "list", "results": rows}


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    state: StandIn

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            request = Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                              json.loads(raw))  # fmt: skip
            state.requests.append(request)
            if state.delay_s:
                time.sleep(state.delay_s)
            if state.reply is not None:
                status, payload = state.reply(request)
            else:
                status, data = answer(state.flavour, request)
                payload = json.dumps(data).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up waiting
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = StandIn(port=server.server_port)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def settings(url: str, **kw: Any) -> RerankSettings:
    return RerankSettings(url=url, **kw)


def expected() -> list[float]:
    return [relevance(QUERY, t) for t in TEXTS]


# the three protocols


@pytest.mark.parametrize(
    ("flavour", "path", "sent_path", "shape"),
    [
        ("llama", "/v1/rerank", "/v1/rerank", "documents"),
        ("llama", "/v1/reranking", "/v1/reranking", "documents"),
        ("llama", "/v1", "/v1/rerank", "documents"),
        ("llama", "/rerank", "/rerank", "texts"),  # llama.cpp answers a TEI body the TEI way
        ("llama", "", "/rerank", "texts"),
        ("jina", "/v1/rerank", "/v1/rerank", "documents"),
        ("jina", "/v1/", "/v1/rerank", "documents"),
        ("tei", "/rerank", "/rerank", "texts"),
        ("tei", "", "/rerank", "texts"),
        ("tei", "/", "/rerank", "texts"),
    ],
)
def test_scores_reach_their_texts_in_each_protocol(
    stand_in: StandIn, flavour: str, path: str, sent_path: str, shape: str
) -> None:
    stand_in.flavour = flavour
    model = "jina-reranker-v2-base-multilingual" if flavour == "jina" else ""
    reranker = Reranker(settings(stand_in.url(path), model=model))
    assert reranker.scores(QUERY, TEXTS) == pytest.approx(expected())
    (request,) = stand_in.requests
    assert request.path == sent_path
    assert request.body["query"] == QUERY
    assert request.body[shape] == TEXTS
    if shape == "documents":
        assert request.body["top_n"] == len(TEXTS)  # every text is scored, not the best few
        assert ("model" in request.body) == bool(model)  # an empty model is not sent
    assert "authorization" not in request.headers
    assert endpoint(stand_in.url(path)) == (stand_in.url(sent_path), shape)


def test_rerank_blends_the_first_top_n(stand_in: StandIn) -> None:
    texts = ["nothing here", "nor here", *TEXTS]
    reranker = Reranker(settings(stand_in.url("/rerank"), top_n=4, weight=1.0))
    result = reranker.rerank(QUERY, texts)
    assert stand_in.requests[0].body["texts"] == texts[:4]  # only the first top_n are sent
    assert result.scores == pytest.approx([relevance(QUERY, t) for t in texts[:4]])
    # weight 1: the reranker's order of the first four, then the rest as they were
    assert result.order == [3, 2, 1, 0, 4, 5]
    assert Reranker(settings(stand_in.url(), weight=0.0)).rerank(QUERY, texts).order == [
        0, 1, 2, 3, 4, 5,
    ]  # fmt: skip


def test_nothing_to_rerank_sends_nothing(stand_in: StandIn) -> None:
    reranker = Reranker(settings(stand_in.url()))
    assert reranker.scores(QUERY, []) == []
    assert reranker.rerank(QUERY, ["one hit"]).order == [0]
    assert reranker.rerank(QUERY, []).order == []
    assert stand_in.requests == []


def test_texts_and_query_are_capped(stand_in: StandIn) -> None:
    long = "token " * 1000
    Reranker(settings(stand_in.url())).scores(long, [long, "short"])
    body = stand_in.requests[0].body
    assert len(body["query"]) == MAX_RERANK_CHARS
    assert [len(t) for t in body["texts"]] == [MAX_RERANK_CHARS, 5]


def test_the_bearer_token_comes_from_the_named_variable(
    stand_in: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BRAINMAP_TEST_RERANK_KEY", "s3cret-token")
    reranker = Reranker(
        settings(stand_in.url("/v1/rerank"), api_key_env="BRAINMAP_TEST_RERANK_KEY")
    )
    reranker.scores(QUERY, TEXTS)
    assert stand_in.requests[0].headers["authorization"] == "Bearer s3cret-token"
    assert "s3cret-token" not in json.dumps(stand_in.requests[0].body)

    monkeypatch.delenv("BRAINMAP_TEST_RERANK_KEY")
    with pytest.raises(RerankError, match=r"\$BRAINMAP_TEST_RERANK_KEY is not set"):
        reranker.scores(QUERY, TEXTS)
    assert len(stand_in.requests) == 1  # not sent without its token


# failures


def test_a_slow_endpoint_times_out_quickly(stand_in: StandIn) -> None:
    stand_in.delay_s = 3.0
    reranker = Reranker(settings(stand_in.url(), timeout_s=0.3))
    started = time.monotonic()
    with pytest.raises(RerankError, match=r"no answer within 0\.3 s"):
        reranker.scores(QUERY, TEXTS)
    assert time.monotonic() - started < 2.0


def test_a_failed_endpoint_is_not_asked_again_at_once(stand_in: StandIn) -> None:
    stand_in.reply = lambda _: (503, b"loading model")
    reranker = Reranker(settings(stand_in.url()))
    with pytest.raises(RerankError, match="HTTP 503 loading model"):
        reranker.scores(QUERY, TEXTS)
    with pytest.raises(RerankError, match=r"HTTP 503 .*not asked again for \d+ s"):
        reranker.scores(QUERY, TEXTS)
    assert len(stand_in.requests) == 1

    stand_in.reply = None  # back up: a reranker with no pause asks again and gets scores
    quick = Reranker(settings(stand_in.url()), retry_after_s=0.0)
    stand_in.reply = lambda _: (500, b"")
    with pytest.raises(RerankError):
        quick.scores(QUERY, TEXTS)
    stand_in.reply = None
    assert quick.scores(QUERY, TEXTS) == pytest.approx(expected())


def test_a_refused_connection_is_a_rerank_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RerankError, match=f"rerank endpoint http://127.0.0.1:{port}/rerank: "):
        Reranker(settings(f"http://127.0.0.1:{port}")).scores(QUERY, TEXTS)


def _json(data: Any) -> Callable[[Request], tuple[int, bytes]]:
    return lambda _: (200, data if isinstance(data, bytes) else json.dumps(data).encode())


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (_json(b"<html>not json</html>"), "not JSON"),
        (_json({"error": "no"}), "has no results"),
        (_json({"results": "many"}), "has no results"),
        (_json([{"index": i, "score": 1.0} for i in range(3)]), "3 scores for 4 texts"),
        (_json({"results": [{"index": i, "relevance_score": 1} for i in range(5)]}),
         "5 scores for 4 texts"),
        (_json([{"index": i + 1, "score": 1.0} for i in range(4)]), "index 4 is not one of"),
        (_json([{"index": -1, "score": 1.0}, *({"index": i, "score": 1} for i in (1, 2, 3))]),
         "index -1 is not one of"),
        (_json([{"index": i // 2, "score": 1.0} for i in range(4)]), "text 0 is scored twice"),
        (_json([{"index": str(i), "score": 1.0} for i in range(4)]), "index '0'"),
        (_json([{"index": True, "score": 1.0}, *({"index": i, "score": 1} for i in (1, 2, 3))]),
         "index True"),
        (_json([{"index": i, "score": "high"} for i in range(4)]), "is not a number"),
        (_json([{"index": i} for i in range(4)]), "is not a number"),
        (_json([1.0, 2.0, 3.0, 4.0]), "a result is not an object"),
        (_json(b'[{"index": 0, "score": NaN}, {"index": 1, "score": 1}, '
               b'{"index": 2, "score": 1}, {"index": 3, "score": 1}]'), "score of text 0 is nan"),
        (_json(b'{"results": [{"index": 0, "relevance_score": Infinity}, '
               b'{"index": 1, "relevance_score": 1}, {"index": 2, "relevance_score": 1}, '
               b'{"index": 3, "relevance_score": 1}]}'), "score of text 0 is inf"),
        (lambda _: (500, b'{"error": "CUDA out of memory"}'), 'HTTP 500 {"error": "CUDA out'),
        (lambda _: (404, b""), r"HTTP 404$"),
    ],
)  # fmt: skip
def test_bad_answers_are_rerank_errors(
    stand_in: StandIn, reply: Callable[[Request], tuple[int, bytes]], message: str
) -> None:
    stand_in.reply = reply
    with pytest.raises(RerankError, match=message):
        Reranker(settings(stand_in.url("/rerank"))).scores(QUERY, TEXTS)


def test_a_wrong_protocol_is_a_rerank_error(stand_in: StandIn) -> None:
    stand_in.flavour = "tei"  # TEI has no /v1/rerank and does not read documents
    with pytest.raises(RerankError, match="HTTP 422"):
        Reranker(settings(stand_in.url("/v1/rerank"))).scores(QUERY, TEXTS)


def test_an_http_reranker_without_url_says_so() -> None:
    with pytest.raises(RerankError, match="no rerank endpoint") as info:
        Reranker(RerankSettings()).scores(QUERY, TEXTS)
    assert info.value.hint and "[rerank] url" in info.value.hint
    assert isinstance(info.value, UserError)  # interfaces show it as a message


def test_fastembed_missing_or_unloadable_is_a_clear_error() -> None:
    # fastembed is an optional extra and no model can download here: either message is right
    reranker = Reranker(RerankSettings(kind="fastembed"))
    with pytest.raises(RerankError, match="fastembed") as info:
        reranker.scores(QUERY, TEXTS)
    message = info.value.message
    assert "not installed" in message or "cannot load the cross-encoder" in message
    assert info.value.hint and ("pip install" in info.value.hint or "download" in info.value.hint)
    with pytest.raises(RerankError, match="fastembed"):  # the second call fails the same way
        reranker.scores(QUERY, TEXTS)


def test_importing_the_module_stays_light() -> None:
    code = "import sys, brainmap.rerank; print('httpx' in sys.modules, 'fastembed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# the blend


def test_weight_zero_keeps_the_first_stage_order() -> None:
    assert blend(5, [0.1, 0.9, 0.5, 0.7, 0.3], 0.0) == [0, 1, 2, 3, 4]


def test_weight_one_takes_the_reranker_order() -> None:
    assert blend(5, [0.1, 0.9, 0.5, 0.7, 0.3], 1.0) == [1, 3, 2, 4, 0]


def test_strong_disagreement_moves_items_part_way() -> None:
    # the reranker puts the last of 20 first and shifts the others down by one
    scores = [float(20 - i) for i in range(19)] + [100.0]
    order = blend(20, scores, 0.5)
    assert order.index(19) not in (0, 19)
    assert 8 <= order.index(19) <= 11  # about the mean of its two ranks (20 and 1)
    assert order[0] == 0  # the first-stage top stays when the reranker ranks it second
    assert blend(20, scores, 0.9).index(19) < order.index(19) < blend(20, scores, 0.1).index(19)


def test_equal_blends_keep_the_first_stage_order() -> None:
    # (1st, 3rd) and (3rd, 1st) blend the same at 0.5: the first stage decides; (2nd, 2nd)
    # blends a little lower (reciprocal ranks favour one strong vote over two middling ones)
    assert blend(3, [0.0, 0.5, 1.0], 0.5) == [0, 2, 1]
    assert blend(3, [1.0, 1.0, 1.0], 1.0) == [0, 1, 2]  # reranker ties: first-stage order


def test_unscored_items_keep_their_places_after() -> None:
    assert blend(5, [0.0, 1.0], 1.0) == [1, 0, 2, 3, 4]
    assert blend(0, [], 0.5) == []


@pytest.mark.parametrize(
    ("n", "scores", "weight"),
    [(1, [1.0, 2.0], 0.5), (2, [1.0, 2.0], 1.5), (2, [1.0, 2.0], -0.1), (2, [math.nan, 1.0], 0.5),
     (2, [math.inf, 1.0], 0.5)],
)  # fmt: skip
def test_blend_refuses_bad_input(n: int, scores: list[float], weight: float) -> None:
    with pytest.raises(ValueError):
        blend(n, scores, weight)


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


@given(
    scores=st.lists(finite, max_size=30),
    extra=st.integers(0, 5),
    weight=st.floats(0, 1),
)
def test_blend_is_a_permutation_between_the_two_orders(
    scores: list[float], extra: int, weight: float
) -> None:
    n = len(scores) + extra
    order = blend(n, scores, weight)
    assert sorted(order) == list(range(n))
    assert order[len(scores) :] == list(range(len(scores), n))
    assert blend(n, scores, 0.0) == list(range(n))
    by_score = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    assert blend(n, scores, 1.0)[: len(scores)] == by_score


@given(scores=st.lists(finite, min_size=2, max_size=20), weight=st.floats(0, 1), data=st.data())
def test_a_higher_score_never_moves_an_item_down(
    scores: list[float], weight: float, data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(scores) - 1))
    before = blend(len(scores), scores, weight).index(i)
    raised = [*scores]
    raised[i] = max(scores) + 1.0
    assert blend(len(scores), raised, weight).index(i) <= before


# the [rerank] settings


def test_rerank_is_off_by_default(tmp_path: Path) -> None:
    cfg = config.load(tmp_path)
    assert cfg.rerank == RerankSettings()
    assert not cfg.rerank.enabled
    assert (cfg.rerank.top_n, cfg.rerank.weight, cfg.rerank.timeout_s) == (20, 0.5, 3.0)
    assert RerankSettings(url="http://127.0.0.1:8012/v1/rerank").enabled
    assert RerankSettings(kind="fastembed").enabled


def test_rerank_settings_round_trip(tmp_path: Path) -> None:
    cfg = config.load(tmp_path)
    cfg.rerank = RerankSettings(
        url="http://127.0.0.1:8012/v1/rerank",
        model="bge-reranker-v2-m3",
        api_key_env="RERANK_TOKEN",
        top_n=30,
        weight=0.7,
        timeout_s=1.5,
        kind="http",
    )
    config.save(cfg)
    assert "[rerank]" in cfg.config_path.read_text()
    assert config.load(tmp_path).rerank == cfg.rerank
    (tmp_path / "config.toml").write_text("[rerank]\nkind = 'fastembed'\ntop_n = 10\n")
    again = config.load(tmp_path).rerank
    assert (again.kind, again.top_n, again.url, again.weight) == ("fastembed", 10, "", 0.5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[rerank]\nkind = 'onnx'\n", r"kind = 'onnx': use http or fastembed"),
        ("[rerank]\ntop_n = -1\n", r"top_n = -1 is out of range \[1, 1000\]"),
        ("[rerank]\ntop_n = 0\n", r"top_n = 0 is out of range"),
        ("[rerank]\ntop_n = 2.5\n", r"top_n = 2.5 is out of range"),
        ("[rerank]\nweight = 1.5\n", r"weight = 1.5 is out of range \[0, 1\]"),
        ("[rerank]\ntimeout_s = 0\n", r"timeout_s = 0 is out of range"),
        ("[rerank]\nurl = 'localhost:8012'\n", r"must start with http:// or https://"),
        ("[rerank]\napi_key_env = 'sk-live-1234'\n", r"name of an environment variable"),
        ("[rerank]\nmodel = 3\n", r"model must be a string"),
        ("[rerank]\ntop = 3\n", r"unknown setting\(s\) \['top'\]"),
        ("rerank = 'on'\n", r"must be a table"),
    ],
)
def test_bad_rerank_settings_are_user_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "config.toml").write_text(text)
    with pytest.raises(UserError, match=message) as info:
        config.load(tmp_path)
    assert "bad setting" in info.value.message and info.value.hint


# the stage inside a search: the real index and model, the stand-in as the remote reranker


def test_search_reranks_its_first_hits_and_degrades_with_a_warning(
    stand_in: StandIn, tmp_path: Path
) -> None:
    from brainmap import ops

    library = tmp_path / "lib"
    library.mkdir()
    for i, text in enumerate(TEXTS):
        (library / f"n{i}.md").write_text(f"# Note {i}\n\n{text} (api token notes)\n")
    brain = ops.Brain(tmp_path / "home")
    ops.library_add(brain, ops.LibraryAddInput(name="lib", path=str(library)))
    ops.reindex(brain, ops.ReindexInput(embed=False))
    plain = brain.searcher.search(QUERY, mode="bm25", floor=False)
    assert not plain.warnings
    # a reranker that likes the fused order's last hit best, and so on up
    stand_in.reply = lambda request: (200, json.dumps({"results": [
        {"index": i, "relevance_score": float(i)} for i in range(len(request.body["documents"]))
    ]}).encode())  # fmt: skip
    brain.cfg.rerank = settings(stand_in.url("/v1/rerank"), weight=1.0)
    reranked = brain.searcher.search(QUERY, mode="bm25", floor=False)
    assert stand_in.requests and stand_in.requests[0].body["query"] == QUERY
    sent = stand_in.requests[0].body["documents"]
    assert len(sent) == len(plain.hits) and sent[0].startswith(plain.hits[0].title)
    assert [h.chunk_id for h in reranked.hits] == [h.chunk_id for h in reversed(plain.hits)]
    brain.searcher._reranker = None
    brain.cfg.rerank = settings(f"http://127.0.0.1:{_closed_port()}/v1/rerank", weight=1.0)
    degraded = brain.searcher.search(QUERY, mode="bm25", floor=False)
    assert [h.chunk_id for h in degraded.hits] == [h.chunk_id for h in plain.hits]
    assert any(w.startswith("rerank unavailable:") for w in degraded.warnings)
    brain.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
