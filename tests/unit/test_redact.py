"""Secret values of the environment are taken out of text: which names count, which values, in what order."""

from __future__ import annotations

import pytest

from crashmatrix.harness.records.redact import MIN_LENGTH, marker, redact, secret_names, secrets

ENV = {
    "OPENAI_API_KEY": "sk-test-1234567890",
    "ANTHROPIC_API_KEY": "sk-ant-abcdefghij",
    "GITHUB_TOKEN": "ghp_0123456789abcdef",
    "db_password": "hunter2hunter2",  # any case
    "MYAPP_SESSION_ID": "sess-42-xyz",
    "HTTP_COOKIE": "id=a3fWa; Expires=never",
    "AWS_REGION": "eu-west-1",  # every AWS_ name, not only those with a secret word
    "SERVICE_CREDENTIALS": "user:pa55word",
    "PATH": "/usr/local/bin:/usr/bin",
    "HOME": "/home/someone",
    "XDG_SESSION_TYPE": "wayland",  # a session word by accident, a public value
    "GIT_AUTHOR_NAME": "Ada Lovelace",  # AUTH of AUTHOR
    "SHORT_TOKEN": "12345",  # below MIN_LENGTH: looks secret, not redacted
}


def test_secret_looking_names_are_found_whatever_their_case_and_public_lookalikes_are_not() -> None:
    assert secret_names(ENV) == sorted([
        "ANTHROPIC_API_KEY", "AWS_REGION", "GITHUB_TOKEN", "HTTP_COOKIE", "MYAPP_SESSION_ID",
        "OPENAI_API_KEY", "SERVICE_CREDENTIALS", "SHORT_TOKEN", "db_password"])


def test_every_occurrence_of_each_value_becomes_its_marker() -> None:
    text = ("boot with key sk-test-1234567890\nretrying with sk-test-1234567890 and ghp_0123456789abcdef "
            "as Ada Lovelace on wayland in /home/someone (pin 12345, region eu-west-1)")
    out = redact(text, ENV)
    assert "sk-test-1234567890" not in out
    assert "ghp_0123456789abcdef" not in out
    assert out.count(marker("OPENAI_API_KEY")) == 2
    assert "[redacted $GITHUB_TOKEN]" in out
    assert "[redacted $AWS_REGION]" in out
    # Not secrets, or too short to tell from ordinary text: left as they were.
    for kept in ("Ada Lovelace", "wayland", "/home/someone", "pin 12345"):
        assert kept in out


def test_short_values_are_not_redacted() -> None:
    env = {"API_KEY": "x" * (MIN_LENGTH - 1), "OTHER_KEY": "y" * MIN_LENGTH}
    assert secrets(env) == [("OTHER_KEY", "y" * MIN_LENGTH)]
    assert redact("xxxxx yyyyyy", env) == "xxxxx [redacted $OTHER_KEY]"


def test_a_value_holding_another_is_replaced_whole_and_markers_are_never_rewritten() -> None:
    env = {"OUTER_TOKEN": "abcdef-secret-ghijkl", "INNER_TOKEN": "secret-ghijkl",
           "WORD_SECRET": "redacted"}  # a value that occurs in every marker
    out = redact("a abcdef-secret-ghijkl b secret-ghijkl c redacted d", env)
    assert out == ("a [redacted $OUTER_TOKEN] b [redacted $INNER_TOKEN] c [redacted $WORD_SECRET] d")


def test_one_value_under_two_names_is_named_alike_every_time() -> None:
    env = {"B_TOKEN": "same-value-123", "A_TOKEN": "same-value-123"}
    assert redact("same-value-123", env) == "[redacted $A_TOKEN]"


def test_a_text_without_secrets_is_returned_as_it_was() -> None:
    text = "nothing to see here"
    assert redact(text, ENV) is text


def test_the_default_environment_is_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRASHMATRIX_TEST_API_KEY", "sk-from-the-env-987")
    assert redact("key=sk-from-the-env-987") == "key=[redacted $CRASHMATRIX_TEST_API_KEY]"
    assert "CRASHMATRIX_TEST_API_KEY" in secret_names()
