"""Text made safe to print on a terminal: control characters shown, never obeyed.

What the harness prints quotes what agents and their tools printed, and a tool's output may hold
terminal escapes: OSC 52 writes the user's clipboard, OSC 0 retitles the window, CSI sequences
clear the screen or move the cursor over what was printed before. Every C0 and C1 control
character but the newline and the tab is shown as a visible escape (`\\x1b`), so the text reads
the same and the terminal does nothing it says.
"""

from __future__ import annotations

import re

# C0 controls but \t and \n, DEL, and the C1 controls (U+0080-U+009F: 8-bit CSI, OSC, ...).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with each control character other than newline and tab written as `\\xNN`."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
