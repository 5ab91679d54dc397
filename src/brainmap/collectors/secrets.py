"""Secrets in free text: found and replaced before anything an agent did is written.

The facts collectors never read a secret's value; the diary, which writes what a session
did, has free text to clean instead: credential-shaped tokens (by their published shapes),
private keys, ``Authorization`` values, passwords in URLs, and the values of secret-named
variables, keys and options (``API_TOKEN=...``, ``"password": "..."``, ``--token x``,
``password hunter2``). Every pattern is bounded, and the text is scanned once from left to
right, so the time is linear in its length.
"""

from __future__ import annotations

import re

from brainmap.collectors import drop_userinfo, is_secret_name

REDACTED = "[redacted]"
# GitHub, GitLab, Slack, OpenAI/Anthropic-style "sk-", Stripe, AWS access keys (long-lived and
# temporary), Google API keys, npm, Hugging Face, JWTs
_TOKEN = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255}"
    r"|glpat-[A-Za-z0-9_-]{20,255}|xox[abposr]-[A-Za-z0-9-]{10,255}"
    r"|sk-[A-Za-z0-9_-]{20,255}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,255}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36}|hf_[A-Za-z0-9]{30,255}"
    r"|eyJ[A-Za-z0-9_-]{8,2048}\.eyJ[A-Za-z0-9_-]{5,4096}\.[A-Za-z0-9_-]{8,2048})"
)
_PEM = re.compile(
    r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----(?:.{0,20000}?-----END [A-Z ]{0,40}-----|.{0,20000})",
    re.DOTALL,
)
_AUTH = re.compile(
    r"\b(Bearer|Basic|Token|Digest)(\s{1,8})[A-Za-z0-9._~+/=-]{8,4096}", re.IGNORECASE
)
# a name and what assigns it: NAME=, NAME:, "name":, --name=, --name (then the value)
_KEY = re.compile(
    r"""(?<![\w.-])(?P<dash>--?)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,80})["']?"""
    r"""(?P<sep>\s{0,4}[=:]\s{0,4}|\s{1,4}(?:(?:is|was|are|were)\s{1,4})?)"""
)
_VALUE = re.compile(r"""\$?'[^'\n]{1,4096}'|"[^"\n]{1,4096}"|[^\s"',;&|)<>]{1,4096}""")
_URL_USER = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]{0,20}://[^\s/@]{0,512}[^\s@]{0,512}@[^\s]{0,2048}"
)
_SYMBOLS = set("0123456789!@#$%^&*+/=_-.~")


def redact(text: str) -> str:
    """``text`` with every secret it holds replaced by ``[redacted]`` (see the module)."""
    text = text.replace('\\"', '"')  # JSON-escaped quotes, as in a tool's error output
    text = _PEM.sub("[redacted private key]", text)
    text = _TOKEN.sub(REDACTED, text)
    text = _AUTH.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if "@" in text and "://" in text:
        text = _URL_USER.sub(lambda m: drop_userinfo(m.group(0)), text)
    return _assignments(text)


def _assignments(text: str) -> str:
    out: list[str] = []
    pos = 0
    while (key := _KEY.search(text, pos)) is not None:
        end = key.end()
        value = _VALUE.match(text, end)
        if value is not None and _holds_secret(key, value.group(0)):
            quote = value.group(0)[-1] if value.group(0)[-1] in "\"'" else ""
            out.append(text[pos:end] + quote + REDACTED + quote)
            pos = value.end()
            continue
        out.append(text[pos:end])  # a name that says nothing: its value is scanned as well
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _holds_secret(key: re.Match[str], value: str) -> bool:
    if not is_secret_name(key.group("name")):
        return False
    bare = value.strip("$\"'")
    if not bare or bare == REDACTED or (value.startswith("$") and not value.startswith("$'")):
        return False  # empty, done, or a reference ($TOKEN) that names the secret only
    if key.group("sep").strip() in ("=", ":"):
        return True  # NAME=value, NAME: value
    if value.startswith("-"):
        return False  # the next option, not a value
    if key.group("dash"):
        return True  # --password value
    # "password hunter2", "the password is hunter2": a word after the name counts when it
    # looks like a credential, not when it is prose ("the token expired")
    return len(bare) >= 6 and (any(c in _SYMBOLS for c in bare) or not bare.islower())
