"""How brainmap starts a Python helper process of its own (the read worker, the passage worker)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def python_module(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``python -m module args`` with this process's
    interpreter and this very brainmap (wherever it was imported from), and without the
    working directory on the module path (``-P``), where a stray ``numpy.py`` would win."""
    import brainmap

    env = dict(os.environ)
    here = str(Path(brainmap.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-P", "-m", module, *args], env
