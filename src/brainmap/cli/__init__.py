"""The ``brainmap`` command: a thin click layer over the operations in :mod:`brainmap.ops`.

Heavy modules (numpy, pydantic, the model, Rich) load inside commands, so that ``--help`` and
light commands start fast. (Typer, the first choice, builds a pydantic TypeAdapter for every
parameter on every run: 150 ms of a 500 ms cold-start budget. click needs 25 ms.)
"""
