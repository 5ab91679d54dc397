"""settle_heap: what a long-lived process holds after start-up leaves the collector's passes."""

from __future__ import annotations

import gc

from brainmap.longlived import settle_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_settle_heap_freezes_what_is_alive_and_later_garbage_is_still_collected() -> None:
    kept = [Node() for _ in range(1000)]
    before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() >= before + len(kept)
        for _ in range(100):
            Node()  # unreachable at once, cycle and all
        assert gc.collect() >= 100  # what came after the freeze is collected as before
        del kept
        assert gc.collect() < 1000  # the frozen cycles are left alone
    finally:
        gc.unfreeze()
    assert gc.collect() >= 1000  # once unfrozen, they are garbage like any other
