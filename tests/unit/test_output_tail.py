"""What an agent printed reaches a failing case's result: read cheaply, decoded, stripped, redacted."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.output_cap import output_end
from crashmatrix.harness.records.evidence import SCRATCH
from crashmatrix.harness.records.observation import Observation, RawOutput
from crashmatrix.harness.records.output_tail import (
    MAX_CHARS,
    MAX_LINES,
    WINDOW,
    last_lines,
    readable,
    strip_terminal,
)
from crashmatrix.harness.records.results import CaseResult, Verdict, differences
from tests.support.observations import K, changelog_baseline, changelog_scenario, rerun_builder

SECRET = "sk-test-1234567890"
ENV = {"OPENAI_API_KEY": SECRET, "PATH": "/usr/bin"}
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/tmp/crashmatrix-4242-abcd1234/changelog-0123456789ab/app.py", line 1, in <module>\n'
    "    import nosuchmod\n"
    "ModuleNotFoundError: No module named 'nosuchmod'\n")


def judged(obs: Observation) -> CaseResult:
    return evaluate(obs, changelog_scenario(), fsync=False, agent="durable-agent", scenario_dirs=[],
                    duration_ms=0.0, env=ENV)


# --- terminal codes ---------------------------------------------------------------------------

def test_colours_titles_and_links_are_removed_and_the_text_between_them_kept() -> None:
    coloured = "\x1b[1;31mError:\x1b[0m bad \x1b]0;window title\x07thing \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
    assert strip_terminal(coloured) == "Error: bad thing link"
    assert strip_terminal("\x1b(Bcharset \x9b32mcsi8\x9b0m") == "charset csi8"


def test_carriage_returns_and_backspaces_show_what_a_terminal_would() -> None:
    assert strip_terminal("10%\r50%\r100%\n") == "100%\n"
    assert strip_terminal("downloading...\rok\n") == "okwnloading...\n"
    assert strip_terminal("line\r\nnext\r\n") == "line\nnext\n"
    assert strip_terminal("_\bu_\bn_\bd_\be_\br line") == "under line"  # man's underlining
    assert strip_terminal("ab\b\bcd") == "cd"


def test_other_control_characters_go_and_tabs_and_newlines_stay() -> None:
    assert strip_terminal("a\x00b\x07c\x7fd\te\nf\x1b") == "abcd\te\nf"


# --- capping ----------------------------------------------------------------------------------

def test_the_last_lines_are_kept_and_the_cut_is_said() -> None:
    text = "".join(f"line {i}\n" for i in range(1, 51)) + "\n\n"
    kept = last_lines(text)
    lines = kept.split("\n")
    assert lines[0] == f"[{50 - MAX_LINES} lines before]"
    assert lines[1:] == [f"line {i}" for i in range(51 - MAX_LINES, 51)]
    assert last_lines("one\ntwo\n") == "one\ntwo"  # short: whole, no note


def test_long_lines_are_cut_to_their_last_characters() -> None:
    text = "a" * 10_000 + "\n" + "b" * 10_000 + "END"
    kept = last_lines(text)
    assert kept.endswith("b" * 100 + "END")
    note, _, body = kept.partition("] …")
    assert note.startswith("[")
    assert len(body) == MAX_CHARS
    assert len(kept) < MAX_CHARS + 40


# --- readable ---------------------------------------------------------------------------------

def test_readable_decodes_anything_strips_redacts_and_makes_scratch_paths_stable() -> None:
    raw = RawOutput(b"\xff\xfe bad bytes\n\x1b[31mkey=" + SECRET.encode() + b"\x1b[0m\n" + TRACEBACK.encode())
    text = readable(raw, ENV)
    assert SECRET not in text
    assert "key=[redacted $OPENAI_API_KEY]" in text
    assert "\ufffd" in text.split("\n")[0], "undecodable bytes are replaced, never an error"
    assert "\x1b" not in text
    assert f'"{SCRATCH}/changelog-0123456789ab/app.py"' in text
    assert text.endswith("ModuleNotFoundError: No module named 'nosuchmod'")


def test_a_window_starting_inside_a_line_drops_that_line_with_any_part_of_a_secret_in_it() -> None:
    # The read began inside the secret: its start is not in the window, so no redaction matches it.
    raw = RawOutput(b"1234567890 leaked?\nnext line\n", skipped=100)
    assert readable(raw, ENV) == "next line"
    # No line break at all: its start goes, as much as the longest secret could leave of itself.
    one_line = RawOutput(b"567890" + b"x" * 50, skipped=100)
    assert readable(one_line, ENV) == "x" * (56 - (len(SECRET) - 1))


# --- the runner's read ------------------------------------------------------------------------

def test_the_runner_keeps_the_last_window_of_the_output_file(tmp_path: Path) -> None:
    log = tmp_path / "inc1.log"
    assert output_end(log) is None  # nothing spawned, no file
    log.write_bytes(b"")
    assert output_end(log) == RawOutput(b"", 0)
    body = b"".join(b"line %d\n" % i for i in range(10_000))
    log.write_bytes(body)
    raw = output_end(log)
    assert raw is not None
    assert raw.skipped == len(body) - WINDOW
    assert raw.data == body[-WINDOW:]


# --- the result -------------------------------------------------------------------------------

def test_a_failing_case_carries_each_incarnations_tail_and_a_pass_carries_none() -> None:
    passing = changelog_baseline()
    for inc in passing.incarnations:
        inc.output = RawOutput(b"durable-agent: finished\n")
    passed = judged(passing)
    assert passed.verdict is Verdict.PASS
    assert passed.agent_output is None

    failing = rerun_builder(kill_at=K.EFFECT_AFTER).build()
    assert len(failing.incarnations) >= 2
    failing.incarnations[0].output = RawOutput(b"")  # printed nothing: left out
    failing.incarnations[1].output = RawOutput(f"using {SECRET}\n{TRACEBACK}".encode())
    failed = judged(failing)
    assert failed.verdict is Verdict.FAIL
    assert failed.agent_output is not None
    (only,) = failed.agent_output
    assert only["incarnation"] == failing.incarnations[1].index
    assert only["tail"].startswith("using [redacted $OPENAI_API_KEY]\nTraceback")
    assert SECRET not in json.dumps(failed.to_json())


def test_old_records_without_the_field_still_load_and_new_ones_round_trip() -> None:
    failed = judged(rerun_builder(kill_at=K.EFFECT_AFTER).build())
    data = failed.to_json()
    data["agent_output"] = [{"incarnation": 2, "tail": "boom"}]
    assert CaseResult.from_json(json.loads(json.dumps(data))).agent_output == data["agent_output"]
    del data["agent_output"]
    assert CaseResult.from_json(data).agent_output is None


def test_two_records_differing_only_in_what_the_agent_printed_are_one_record() -> None:
    a = judged(rerun_builder(kill_at=K.EFFECT_AFTER).build())
    b = CaseResult.from_json({**a.to_json(), "agent_output": [{"incarnation": 1, "tail": "at 12:00:01"}]})
    assert differences(a, b) == []
    c = CaseResult.from_json({**a.to_json(), "requests": a.requests + 1})
    assert differences(a, c) == ["requests"]
