"""Errors that are the user's to fix: every interface shows them as a message, never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem with input, configuration or state, with a hint of how to fix it."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.status = status  # the HTTP status an interface should answer with


class LibraryHeldElsewhere(UserError):
    """A library of a shared (PostgreSQL) index is another machine's folder: this machine
    indexes nothing into it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, status=409)
