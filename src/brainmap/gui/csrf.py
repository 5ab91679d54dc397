"""CSRF tokens for the GUI's forms: an HMAC of the form's action with a per-app secret."""

from __future__ import annotations

import hmac
import secrets

FIELD = "csrf_token"


class Csrf:
    """Tokens bound to one form action each; a new app (a restart) invalidates old forms."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)

    def token(self, action: str) -> str:
        """The token a form posting to ``action`` carries."""
        return hmac.new(self._secret, b"csrf:" + action.encode("utf-8"), "sha256").hexdigest()

    def valid(self, action: str, given: str | None) -> bool:
        """Whether ``given`` is this app's token for ``action`` (constant-time compare)."""
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token(action).encode("ascii"))
