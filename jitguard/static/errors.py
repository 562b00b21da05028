"""Errors about an input file (not about jitguard): the runner turns them into ``FileError``."""
from __future__ import annotations


class SourceError(Exception):
    """The file can't be analyzed: syntax error, undecodable bytes. ``line`` is 1-based or None."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return self.message if self.line is None else f"{self.message} (line {self.line})"
