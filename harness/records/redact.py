"""Redacting secrets: the values of secret-looking environment variables, taken out of any text.

Whatever the harness writes or prints may quote what an agent printed, and an agent that fails
to start often prints its configuration, API keys included. Those values come from the
environment the agent inherited, so the environment says what to look for: every variable whose
name looks secret, its value replaced by `[redacted $NAME]` wherever it occurs. The text keeps
its shape (a reader sees which variable stood there), and the secret is never written.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping

# A name holding any of these words (in any case) looks secret: API keys, tokens, passwords,
# credentials, auth headers, session ids and cookies. Matched anywhere in the name, so
# `OPENAI_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD` and `MYAPP_APIKEY` all count: a false hit
# costs a word in a log, a miss leaks a key.
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "SESSION",
                "COOKIE")
# Every AWS_ variable: the region and profile are harmless, but AWS_ACCESS_KEY_ID's partner
# names vary (AWS_SESSION_TOKEN, AWS_SECURITY_TOKEN) and none is worth printing.
SECRET_PREFIXES = ("AWS_",)
# Names that match a word above by accident and hold well-known public values that programs
# print all the time (a desktop's `ubuntu` or `wayland`, a committer's name): redacting them would
# scatter markers through every log without protecting anything.
NOT_SECRET_PREFIXES = ("XDG_SESSION_", "DESKTOP_SESSION", "GDMSESSION", "GIT_AUTHOR_", "GIT_COMMITTER_")
# Shorter values are not redacted: a 1-5 character value (`1`, `true`, `dev`) occurs in
# ordinary text everywhere, and replacing it would garble the text while hiding nothing a
# guess would not find.
MIN_LENGTH = 6


@functools.cache
def is_secret_name(name: str) -> bool:
    """Whether a variable of this name is taken to hold a secret. Cached by name: every evidence
    string of every failing case is redacted, each time against the whole environment."""
    upper = name.upper()
    if upper.startswith(NOT_SECRET_PREFIXES):
        return False
    return upper.startswith(SECRET_PREFIXES) or any(word in upper for word in SECRET_WORDS)


def secret_names(env: Mapping[str, str] = os.environ) -> list[str]:
    """The names in `env` that look secret, sorted, whatever their values."""
    return sorted(name for name in env if is_secret_name(name))


def secrets(env: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    """(name, value) of each secret worth redacting from `env`: long enough, longest value first
    (where one value holds another, the whole is replaced, not the part), then by name, so two
    runs redact alike."""
    found = [(name, env[name]) for name in secret_names(env) if len(env[name]) >= MIN_LENGTH]
    return sorted(found, key=lambda item: (-len(item[1]), item[0]))


def marker(name: str) -> str:
    """What stands in a text where the value of variable `name` was."""
    return f"[redacted ${name}]"


def redact(text: str, env: Mapping[str, str] = os.environ) -> str:
    """`text` with every occurrence of every secret value of `env` replaced by `[redacted $NAME]`
    (`env`: this process's environment unless given; an agent inherits it)."""
    # Most texts hold no secret: a substring test per value is cheaper than building a pattern.
    present = [(name, value) for name, value in secrets(env) if value in text]
    if not present:
        return text
    # One value may be set under several names: the first name (by the order above) stands for it.
    names: dict[str, str] = {}
    for name, value in present:
        names.setdefault(value, name)
    # One pass over the text, the alternatives longest first: a marker already put in is never
    # searched again, so a value that happens to occur in one cannot garble it.
    pattern = re.compile("|".join(re.escape(value) for value in names))
    return pattern.sub(lambda m: marker(names[m.group()]), text)
