"""The last lines an agent printed, made fit for a record: decoded, terminal codes out, redacted, capped.

An agent that fails to start (an import error, a missing key) says why on its stderr and nowhere
else. The runner keeps the raw end of each incarnation's output (`RawOutput`, a cheap read), and a
case that did not pass gets it here as text a report can show: the bytes decoded whatever they
are, colours and cursor moves taken out, secret values redacted (records/redact.py), scratch paths
and durations made stable (records/evidence.py), and only the last lines kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from crashmatrix.harness.records.clip import clip
from crashmatrix.harness.records.evidence import stable
from crashmatrix.harness.records.observation import Observation, RawOutput
from crashmatrix.harness.records.redact import redact, secrets

# What a record keeps of one incarnation's output: its last lines, and of those at most this many
# characters (the notes saying what was cut come on top). The end says why a process stopped;
# twenty lines hold a Python traceback's last frames and its error.
MAX_LINES = 20
MAX_CHARS = 4000
# The bytes the runner reads from the end of an incarnation's output: room for MAX_CHARS
# characters of up to four UTF-8 bytes each, colour codes included. A bound, so that a chatty
# agent costs no more per incarnation than a quiet one.
WINDOW = 16 * 1024

# Terminal control sequences: a terminal acts on them and shows nothing, so a record drops them
# whole (a report would show them as garbage, and XML refuses the ESC character).
_ESCAPE = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks; ended by BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM and APC strings
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b[ -/]*[0-~]"  # the two- and three-byte escapes: charsets, keypad modes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI as one 8-bit character
)
# A character and the backspace after it: a terminal moves back over it (man pages overstrike
# this way, `_\bx` for an underlined x), so what shows is what comes after.
_BACKSPACED = re.compile(r"[^\x08\n]\x08")
# Control characters left once the sequences above are gone (tab and newline are kept): a
# terminal shows nothing for them, and a report must not hold them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _overwritten(line: str) -> str:
    """A line as a terminal shows it after carriage returns: each part written over the start of
    what was there (a progress bar shows its last state, not every state run together)."""
    shown = ""
    for part in line.split("\r"):
        shown = part + shown[len(part):]
    return shown


def strip_terminal(text: str) -> str:
    """`text` as a terminal would show it, in plain characters: escape sequences removed,
    carriage returns and backspaces applied, other control characters dropped."""
    text = _ESCAPE.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        text = "\n".join(_overwritten(line) for line in text.split("\n"))
    # Each pass undoes one backspace per character; a run of n needs n passes.
    while "\x08" in text:
        fewer = _BACKSPACED.sub("", text)
        if fewer == text:
            break  # backspaces with nothing left to move over
        text = fewer
    return _CONTROL.sub("", text)


def last_lines(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> str:
    """The last `max_lines` lines of `text` (trailing blanks and blank lines left out), at most
    `max_chars` characters of them; what was cut is said, first, in brackets."""
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    before = max(0, len(lines) - max_lines)
    kept = clip("\n".join(lines[before:]), max_chars, keep_end=True)
    return f"[{before} lines before]\n{kept}" if before else kept


def readable(raw: RawOutput, env: Mapping[str, str] = os.environ) -> str:
    """What a record keeps of one incarnation's output (`env`: the environment whose secrets are
    redacted; the agent inherited the harness's)."""
    text = raw.data.decode("utf-8", errors="replace")
    if raw.skipped:
        # The read began inside a line, maybe inside a secret, whose start (not in the window)
        # no redaction could match: that line goes. A window with no line break is all one line:
        # its start goes, as much as the longest secret could have left of itself.
        cut = text.find("\n")
        longest = max((len(value) for _, value in secrets(env)), default=1)
        text = text[cut + 1:] if cut >= 0 else text[longest - 1:]
    return last_lines(stable(redact(strip_terminal(text), env)))


def last_line(raw: RawOutput, env: Mapping[str, str] = os.environ) -> str:
    """The last non-blank line an incarnation printed, as a record keeps it (an error's message
    ends a Python traceback), clipped to one line's worth."""
    lines = [line for line in readable(raw, env).splitlines() if line.strip()]
    return clip(lines[-1].strip(), 300, keep_end=False) if lines else ""


def agent_output(obs: Observation, env: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """Per incarnation that printed anything, in order: {"incarnation": index, "tail": text}."""
    out: list[dict[str, Any]] = []
    for inc in obs.incarnations:
        if inc.output is None:
            continue
        tail = readable(inc.output, env)
        if tail:
            out.append({"incarnation": inc.index, "tail": tail})
    return out
