"""Errors the toolkit raises for bad input: caught by the CLI and printed without a traceback."""

from __future__ import annotations

__all__ = ["LtrError", "DataFormatError", "FeatureCountError"]


class LtrError(Exception):
    """A problem with the user's input or configuration (not a bug in the toolkit)."""


class FeatureCountError(LtrError, ValueError):
    """Features whose column count is not the model's (never zero-padded, never cut: the scores would be
    silently wrong); the message names both counts."""


class DataFormatError(LtrError, ValueError):
    """A malformed data file; the message names the file, the line and what was wrong."""

    def __init__(self, path, line: int | None, message: str):
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
