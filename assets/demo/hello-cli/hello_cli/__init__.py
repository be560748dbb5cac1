"""hello-cli: a tiny command line the demo plan extends."""

__version__ = "1.0.0"
