"""brainmap: a local knowledge brain for coding agents and the people who work with them."""

__version__ = "0.1.0"
