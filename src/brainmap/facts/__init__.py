"""The facts root (DESIGN.md, Facts): assertions paired from observations.

One module per concept, each imported from where it is defined (nothing is re-exported,
so importing one module stays cheap): :mod:`~brainmap.facts.pairing` (observations ->
assertions with confidence and conflicts), :mod:`~brainmap.facts.text` (display text of
keys and assertions), :mod:`~brainmap.facts.models` (the read models: facts, evidence,
conflicts) and :mod:`~brainmap.facts.answer` (the assertions that answer a question).
"""
