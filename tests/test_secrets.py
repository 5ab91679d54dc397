"""The scrubber the diary writes through: secrets in free text, in every shape seen."""

from __future__ import annotations

import time

import pytest

from brainmap.collectors.secrets import redact
from brainmap.diary import Activity, command_words, render_section

SECRETS = {
    "export GITHUB_TOKEN=ghp_" + "a" * 36: "ghp_",
    "error: password=x1y2z3w4": "x1y2z3w4",  # after another `word:`
    "curl: API_TOKEN=abcdef123456 was rejected": "abcdef123456",
    "url=https://x.io/?token=abcdef123456": "abcdef123456",
    '{\\"password\\": \\"hunter2secret\\"}': "hunter2secret",  # JSON-escaped
    "machine h login bob password hunter2secret": "hunter2secret",  # .netrc
    "PASSWORD hunter2secret": "hunter2secret",
    "HTTPS://bob:hunter2@h": "hunter2",
    "https://bob:hun/ter2@h/path": "hun/ter2",
    "https://bob:hun@ter2@h": "ter2",
    "password=-abc123": "-abc123",
    "API_TOKEN=$'abc123xyz'": "abc123xyz",
    "ASIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPLE": "IOSFODNN7",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG": "wJalrXUtnFEMI",
    "mysql --password s3cr3t -u root": "s3cr3t",
    "Authorization: Bearer abc.def.ghijklmnop": "ghijklmnop",
    "Cookie: session=abcdef123456": "abcdef123456",
    "AccountKey=Zm9vYmFyYmF6cXV4": "Zm9vYmFy",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n": "b3BlbnNzaC1rZXk",  # no END line
    "the db password is hunter2": "hunter2",
}


@pytest.mark.parametrize("text", list(SECRETS))
def test_every_shape_of_secret_is_redacted(text: str) -> None:
    out = redact(text)
    assert SECRETS[text] not in out and out != text, out


@pytest.mark.parametrize(
    "text",
    ["the token expired yesterday", "fix the password reset flow", "x --token $TOKEN",
     "psql -p 5432", "see src/secret_store.py line 3", "gh auth --with-token < f"],
)  # fmt: skip
def test_prose_and_references_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_huge_line_is_scrubbed_within_a_hooks_budget() -> None:
    act = Activity(asked=["x" * 1_000_000, "eyJ-" * 250_000], errors=["a" * 1_000_000])
    act.agent = "f" * 10_000_000
    started = time.monotonic()
    text = render_section("s", act, continued=False, zone=None)
    assert time.monotonic() - started < 5  # the old scrubber took 12 s on one such line
    assert max(len(line) for line in text.splitlines()) < 600


def test_commands_never_leak_their_arguments() -> None:
    heredoc = "cat > key.pem <<'EOF'\n-----BEGIN OPENSSH\nb3BlbnNzaC1rZXktdjEAAAA\nEOF\ngit add ."
    assert command_words(heredoc) == ["cat", "git add"]
    assert command_words('psql -c "select 1; CorrectHorseBattery now"') == ["psql"]
    assert command_words('git commit -m "fix\nhunter2hunter2 was leaked"') == ["git commit"]
    assert command_words("echo hi > out.txt 2>&1 && ls") == ["echo", "ls"]
