"""Helpers shared by the benchmarks: data folders, a persistent vector cache, timing."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brainmap import ops

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("BRAINMAP_DATA", ROOT.parent / "shared" / "data"))
# Embedding 40k chunks takes minutes; the cache keeps vectors between benchmark runs.
CACHE = Path(os.environ.get("BRAINMAP_BENCH_CACHE", Path.home() / ".cache" / "brainmap-bench"))


def unpack(archive: str) -> Path:
    """Unpack ``../shared/data/<archive>`` once into the benchmark cache; return the folder."""
    target = CACHE / "data" / archive.removesuffix(".tar.gz")
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with tarfile.open(DATA / archive) as tar:
            tar.extractall(target, filter="data")
        (target / ".complete").touch()
    return target


def example_brain(folder: Path) -> ops.Brain:
    """A brain in ``folder`` over a copy of the example library, indexed with vectors."""
    from brainmap import ops

    library = folder / "library"
    shutil.copytree(ROOT / "examples" / "library", library)
    brain = ops.Brain(folder / "home")
    ops.library_add(brain, ops.LibraryAddInput(name="example", path=str(library)))
    ops.reindex(brain, ops.ReindexInput())
    return brain


def seed_cache(home: Path) -> None:
    """Give a fresh home the persistent vector cache (so rebuilds re-embed nothing)."""
    home.mkdir(parents=True, exist_ok=True)
    saved = CACHE / "vectors.db"
    if saved.exists():
        shutil.copyfile(saved, home / "vectors.db")


def keep_cache(home: Path) -> None:
    """Save a home's vector cache for the next benchmark run."""
    import apsw

    source = home / "vectors.db"
    if source.exists():
        conn = apsw.Connection(str(source))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.close()
        CACHE.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, CACHE / "vectors.db")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _median_run_seconds(command: list[str], runs: int) -> float:
    # Python's default is to cache bytecode; some sandboxes turn that off for everything
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm-up, fills caches
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cold_process_seconds(home: Path, args: list[str], runs: int = 7) -> float:
    """Median wall time of a new ``brainmap`` process (warm disk, bytecode cached)."""
    return _median_run_seconds([sys.executable, "-m", "brainmap", "--home", str(home), *args], runs)


def python_startup_seconds(runs: int = 7) -> float:
    """Median wall time of ``python -c pass`` here: the floor under every cold start."""
    return _median_run_seconds([sys.executable, "-c", "pass"], runs)
