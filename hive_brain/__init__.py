"""hive-brain: a local-first memory engine for AI coding agents over a Markdown vault."""

__version__ = "0.1.0"
