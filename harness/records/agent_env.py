"""The environment an agent under test starts with: the harness's, allow-listed, never its secrets.

An agent runs with the harness's uid, and whatever it is given it can print, log or send: the
harness's own environment holds API keys (`OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`, a CI's
tokens), and an agent that inherits them all can leak them into every report, or spend on them.
So an agent gets only what a program needs to start and find its tools (the names and prefixes
below), what its adapter names (`pass_env`, and the values its `env()` sets, such as a placeholder
key), and what the user names in `CRASHMATRIX_PASS_ENV` (comma-separated names). A name that looks
secret (`redact.is_secret_name`) passes only when named exactly, never by a prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from crashmatrix.harness.records.redact import is_secret_name

# What programs and interpreters read to start, find their files and print: no credentials.
ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
    "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8",
    "PYTHONIOENCODING", "PYTHONUNBUFFERED", "PYTHONWARNINGS", "NODE_PATH", "NODE_OPTIONS",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
})
# Locale categories, the harness's own channel and settings, and coverage's start-up hook
# (`--line-coverage` measures through it).
ALLOWED_PREFIXES = ("LC_", "CRASHMATRIX_", "COVERAGE_")
PASS_ENV = "CRASHMATRIX_PASS_ENV"  # the user's additions: "NAME,NAME"


def passed_names(env: Mapping[str, str]) -> frozenset[str]:
    """The names the user adds in CRASHMATRIX_PASS_ENV."""
    return frozenset(n.strip() for n in env.get(PASS_ENV, "").split(",") if n.strip())


def agent_environment(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """`env` (the harness's) cut down to what an agent may inherit; `extra`: names its adapter
    passes. A secret-looking name needs to be named exactly (in `extra` or CRASHMATRIX_PASS_ENV)."""
    named = passed_names(env) | frozenset(extra)
    kept = {}
    for name, value in env.items():
        if name in named or (not is_secret_name(name) and (
                name in ALLOWED or name.startswith(ALLOWED_PREFIXES))):
            kept[name] = value
    return kept


def withheld(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The names of `env` an agent does not get, sorted (for the docs and a start-up line)."""
    kept = agent_environment(env, extra)
    return sorted(name for name in env if name not in kept)
