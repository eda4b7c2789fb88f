"""The agent's environment is allow-listed; printed text shows control characters instead of obeying them."""

from __future__ import annotations

from crashmatrix.harness.records.agent_env import PASS_ENV, agent_environment, withheld
from crashmatrix.harness.records.terminal_text import terminal_safe

HARNESS = {"PATH": "/bin", "HOME": "/root", "LC_ALL": "C.UTF-8", "CRASHMATRIX_X": "1",
           "OPENAI_API_KEY": "sk-1", "GITHUB_TOKEN": "gh", "AWS_REGION": "eu", "MYAPP_URL": "http://x",
           "CRASHMATRIX_SECRET_TOKEN": "t", "PYTHONPATH": "/p"}


def test_only_the_allow_list_passes_and_no_secret_by_prefix() -> None:
    assert agent_environment(HARNESS) == {"PATH": "/bin", "HOME": "/root", "LC_ALL": "C.UTF-8",
                                          "CRASHMATRIX_X": "1", "PYTHONPATH": "/p"}
    assert withheld(HARNESS) == ["AWS_REGION", "CRASHMATRIX_SECRET_TOKEN", "GITHUB_TOKEN", "MYAPP_URL",
                                 "OPENAI_API_KEY"]


def test_an_adapter_or_the_user_names_what_else_passes_secrets_only_by_exact_name() -> None:
    assert agent_environment(HARNESS, ("MYAPP_URL", "OPENAI_API_KEY"))["OPENAI_API_KEY"] == "sk-1"
    env = {**HARNESS, PASS_ENV: " MYAPP_URL , GITHUB_TOKEN,"}
    kept = agent_environment(env)
    assert kept["MYAPP_URL"] == "http://x"
    assert kept["GITHUB_TOKEN"] == "gh"
    assert "OPENAI_API_KEY" not in kept


def test_control_characters_are_shown_not_obeyed() -> None:
    text = "a\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\x00b\tc\nd é"
    assert terminal_safe(text) == "a\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\x9b31m\\x00b\tc\nd é"
