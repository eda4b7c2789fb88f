"""How a lane says an incarnation ended: killed, frozen, timed out, or failed by an injected call."""

from __future__ import annotations

from crashmatrix.reports.html_lanes import end_of


def test_an_incarnation_failed_by_strace_says_so_and_how_it_ended() -> None:
    text = end_of({"index": 1, "injected": "fsync(session.jsonl) = -1 EIO <x>", "must_stop": True,
                   "exit_code": 4})
    assert "failed by strace: fsync(session.jsonl) = -1 EIO &lt;x&gt;" in text  # escaped
    assert "it must stop on its own" in text
    assert text.endswith("exit code 4")
    short = end_of({"index": 1, "injected": "write 1 of session.jsonl: retval=16", "must_stop": False,
                    "exit_code": 0})
    assert "must stop" not in short
    assert "cut short by strace: write 1 of session.jsonl" in short


def test_a_plain_exit_and_a_kill_are_unchanged() -> None:
    assert end_of({"index": 2, "exit_code": 0}) == "exit code 0"
    assert "killed (SIGKILL) at event 7" in end_of({"index": 1, "crashed_at": 7})


def test_a_black_box_kill_names_the_call_it_was_killed_entering() -> None:
    shown = end_of({"killed_at_call": "fsync 3 of session.jsonl", "crashed_at": None, "exit_code": -9})
    assert shown == '<span class="kill">killed (SIGKILL) entering fsync 3 of session.jsonl</span>'
    assert "&lt;" in end_of({"killed_at_call": "write 1 of <x>", "crashed_at": None})
