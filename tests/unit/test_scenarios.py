"""Scenario loading: the built-ins, and errors naming the file, the field and what was expected."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from crashmatrix.fakes import Case as FakeCase
from crashmatrix.scenarios import (
    Boundary,
    BoundaryKind,
    LineRule,
    Outcome,
    Policy,
    ScenarioError,
    ToolName,
    count_lines,
    load_builtin,
    load_dir,
    load_file,
    resolve,
)
from crashmatrix.scenarios.model import DEFAULT_POLICIES, TOOL_ARGS, ResultKey

REQUIRED_BUILTINS = {
    "changelog", "changelog-fast", "changelog-blind", "safe-read-rerun", "policy-changed",
    "parallel-calls", "multi-turn", "queued-input", "retry", "cancel", "tool-stop", "finished",
    "budget",
}

MINIMAL = """
task = "do it"
[[script]]
reply.final = "done"
"""


def write(tmp_path: Path, text: str, name: str = "x") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> ScenarioError:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_file(path)
    assert info.value.path == str(path)
    return info.value


# -- built-ins ------------------------------------------------------------------------------

def test_every_builtin_loads_and_the_required_ones_exist() -> None:
    found = load_builtin()
    assert set(found) >= REQUIRED_BUILTINS
    for name, s in found.items():
        assert s.name == name
        assert s.task
        assert s.script
        assert s.description


@pytest.mark.parametrize("name", sorted(REQUIRED_BUILTINS))
def test_every_builtin_answers_its_first_request(name: str) -> None:
    s = load_builtin()[name]
    case = FakeCase("k", s)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": s.task}]
    decision = case.handle({"messages": messages})
    # A first request may meet a scheduled fault; the next identical one must get a reply.
    while decision.fault is not None:
        decision = case.handle({"messages": messages})
    assert decision.status == 200, decision.body


def test_builtins_model_the_brief() -> None:
    b = load_builtin()
    assert b["policy-changed"].tools.policies_at(restart=False)[ToolName.READ] is Policy.SAFE
    assert b["policy-changed"].tools.policies_at(restart=True)[ToolName.READ] is Policy.NEVER
    assert b["cancel"].expect.outcome == (Outcome.CANCELLED,)
    assert b["tool-stop"].expect.outcome == (Outcome.STOPPED,)
    assert set(b["budget"].expect.outcome) == {Outcome.COMPLETED, Outcome.ABORTED}
    assert b["budget"].agent.resume_budget == 1
    (item,) = b["queued-input"].inputs
    assert item.at == Boundary(BoundaryKind.EFFECT_AFTER, "append_note")
    blind = b["changelog-blind"].expect.lines[0]
    assert blind.missing_ok_if_crash_before == Boundary(BoundaryKind.EFFECT_AFTER, "append_note")
    assert [f.kind.value for f in b["retry"].faults] == ["http_500", "http_429"]


# -- schema errors --------------------------------------------------------------------------

def test_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL.replace('task = "do it"', "task = 3"))
    assert err.field == "task"
    assert "expected a string, got an integer" in err.message
    # The line of the offending key comes first, as for TOML syntax errors.
    assert str(err) == f"{err.path}:2: field 'task': expected a string, got an integer"


def test_missing_field(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL.replace('task = "do it"', ""))
    assert (err.field, err.message) == (
        "task", "missing required field; expected a non-empty string (the prompt the first "
        "incarnation runs)")
    assert err.line is None, "a missing top-level key has no line"


def test_any_tool_name_loads_and_a_malformed_one_is_refused(tmp_path: Path) -> None:
    # A scenario names the agent under test's tools, whatever they are called (checked against
    # the tools the agent declares when the matrix starts, not here).
    ok = tmp_path / "ok.toml"
    ok.write_text('task = "t"\n[tools]\nenabled = ["send_email"]\npolicies = { send_email = "idempotent" }\n'
                  '[[script]]\nwhen.results = { send_email = "none" }\n'
                  'reply.tool_calls = [{ tool = "send_email", args = { to = "a@b.c", n = 2 } }]\n'
                  '[[script]]\nreply.final = "done"\n'
                  '[[expect.records]]\npath = "outbox.jsonl"\ntool = "send_email"\ncount = 1\n',
                  encoding="utf-8")
    s = load_file(ok)
    assert s.script[0].reply.tool_calls[0].args == {"to": "a@b.c", "n": 2}
    assert s.tools.policies_at(restart=False) == {"send_email": Policy.IDEMPOTENT}
    err = error_of(tmp_path, 'task = "t"\n[tools]\nenabled = ["read", "rm -rf"]\n'
                             '[[script]]\nreply.final = "done"\n')
    assert (err.field, err.line) == ("tools.enabled[1]", 3)
    assert "does not match" in err.message or "tool name" in err.message, err.message


def test_tool_call_args_are_checked_against_the_agents_schema_with_file_line_and_field(
        tmp_path: Path) -> None:
    # Loading knows no agent: the reference agent's schema is applied when the matrix starts.
    from crashmatrix.harness.adapters.tools import reference_tools, tool_misfit  # noqa: PLC0415

    text = MINIMAL.replace('reply.final = "done"', 'reply.final = "done"\n[[script]]\nname = "a"\n'
                           'reply.tool_calls = [{ tool = "append_note", args = { path = "C" } }]')
    path = tmp_path / "x.toml"
    path.write_text(text, encoding="utf-8")
    s = load_file(path)
    assert tool_misfit(s, reference_tools(), "durable-agent") == (
        f"{path}:7: field 'script[1].reply.tool_calls[0].args': scenario 'x': missing argument(s) "
        "'line' (it takes path, line) for agent 'durable-agent''s tool 'append_note'")
    err = error_of(tmp_path, text.replace('path = "C"', "path = 2024-01-01"))
    assert err.field == "script[1].reply.tool_calls[0].args.path"
    assert "has no JSON form" in err.message


def test_unknown_field_is_refused(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL.replace("[[script]]", "[[script]]\nwhen = { turn = 0 }"))
    assert err.field == "script[0].when.turn"
    assert err.message.startswith("unknown field; expected one of results, last_turn")


def test_bad_boundary_and_bad_result_key(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + '[[inputs]]\nid = "i"\ntext = "t"\nat = "effect.later:x"\n')
    assert err.field == "inputs[0].at"
    assert "unknown probe kind 'effect.later'" in err.message
    when = '[[script]]\nwhen = { results = { "bash:x" = "ok" } }'
    err = error_of(tmp_path, MINIMAL.replace("[[script]]", when))
    assert err.field == 'script[0].when.results."bash:x"'
    assert "no reply of the script calls bash on 'x'" in err.message


def test_bad_toml_gives_line_and_column(tmp_path: Path) -> None:
    err = error_of(tmp_path, 'task = "ok"\nname = = 3\n')
    assert (err.line, err.column) == (2, 8)
    assert str(err).startswith(f"{err.path}:2:8: invalid TOML: ")


def test_malformed_template_placeholder(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL.replace('"done"', '"tests: {last_line:bash}"'))
    assert err.field == "script[0].reply.final"
    assert "malformed placeholder" in err.message


def test_line_rule_needs_count_or_bounds(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + '[[expect.lines]]\npath = "a"\nline = "x"\n')
    assert err.field == "expect.lines[0]"


def test_resolve_unknown_name_lists_known_ones() -> None:
    with pytest.raises(ScenarioError) as info:
        resolve(["nope"])
    assert info.value.path is None
    assert "unknown scenario 'nope'; known: budget, cancel, changelog" in str(info.value)


def test_load_dir_and_resolve_with_extra_dirs(tmp_path: Path) -> None:
    write(tmp_path, MINIMAL, "mine")
    assert list(load_dir(tmp_path)) == ["mine"]
    assert [s.name for s in resolve(["mine", "changelog", "mine"], [tmp_path])] == [
        "mine", "changelog"]
    write(tmp_path, MINIMAL, "changelog")
    with pytest.raises(ScenarioError, match="already taken"):
        resolve([], [tmp_path])


# -- expectations ---------------------------------------------------------------------------

def test_line_rule_semantics() -> None:
    exact = LineRule("C", "x", min=1, max=1)
    assert exact.accepts(1, crashes=0, boundary_reached=True)
    assert not exact.accepts(0, crashes=1, boundary_reached=False)
    blind = LineRule("C", "x", min=1, max=1,
                     missing_ok_if_crash_before=Boundary(BoundaryKind.EFFECT_AFTER, "append_note"))
    assert blind.accepts(0, crashes=1, boundary_reached=False)
    assert not blind.accepts(0, crashes=1, boundary_reached=True)
    assert not blind.accepts(0, crashes=0, boundary_reached=False)
    assert not blind.accepts(2, crashes=1, boundary_reached=True)
    witness = LineRule("w", "ran", min=1, max=1, extra_per_crash=1)
    assert witness.accepts(3, crashes=2, boundary_reached=True)
    assert not witness.accepts(2, crashes=0, boundary_reached=True)
    assert count_lines("a\nx\nxx\nx\n", "x") == 2
    assert count_lines(None, "x") == 0


def test_the_readme_example_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    example = readme.split("## A complete example", 1)[1].split("```toml\n", 1)[1]
    s = load_file(write(tmp_path, example.split("```", 1)[0], "example"))
    assert s.name == "example"
    assert len(s.script) == 7
    assert [f.kind.value for f in s.faults] == ["http_500"]


def test_unknown_call_id_scheme_names_the_field_and_the_choices(tmp_path: Path) -> None:
    err = error_of(tmp_path, MINIMAL + '\n[provider]\ncall_ids = "random"\n')
    assert err.field == "provider.call_ids"
    assert "unknown call id scheme 'random'; expected one of history, per-response" in err.message


def test_max_depth_is_read_and_checked(tmp_path: Path) -> None:
    capped = load_file(write(tmp_path, MINIMAL + "\n[matrix]\nmax_depth = 1\n", name="capped"))
    assert capped.matrix.max_depth == 1
    assert load_file(write(tmp_path, MINIMAL, name="free")).matrix.max_depth is None
    err = error_of(tmp_path, MINIMAL + "\n[matrix]\nmax_depth = 0\n")
    assert err.field == "matrix.max_depth"


# -- error locations derived from the model -------------------------------------------------

LOCATED = '''task = """
a multi-line task;
name = "not a key"
"""
[tools]
enabled = ["read", "bash"]

[[script]]
name = "a"
reply.final = "done"

[[script]]
name = "b"
reply.tool_calls = [{ tool = "append_note", args = { path = "C", line = "x" } }]
'''


def test_a_cross_field_error_gives_the_dotted_path_and_the_line(tmp_path: Path) -> None:
    err = error_of(tmp_path, LOCATED)
    assert err.field == "script[1].reply.tool_calls[0].tool"
    assert err.message == "tool 'append_note' is not enabled; enabled: read, bash"
    assert err.line == 14, "the line holding the inline table, past a multi-line string"


@pytest.mark.parametrize(("extra", "field", "says", "line"), [
    ('[workspace]\n"notes/a.md" = 3\n', 'workspace."notes/a.md"',
     "expected a string, got an integer", 6),
    ('[workspace]\n"../a.md" = "x"\n', 'workspace."../a.md"',
     "'../a.md' must be a relative path inside the workspace", 6),
    ('[tools]\nenabled = ["read"]\npolicies = { bash = "safe" }\n', "tools.policies.bash",
     "tool 'bash' is not enabled; enabled: read", 7),
    ('[agent]\nresume_budget = 1\nmax_retries = -1\n', "agent.max_retries",
     "expected an integer >= 0, got -1", 7),
    ('[[faults]]\nkind = "http_500"\nhold_s = 2\n', "faults[0].hold_s",
     "only a 'timeout' fault holds the response", 7),
    ('[[inputs]]\nid = "x"\ntext = "t"\nat = "inbox.poll"\n[[cancels]]\nid = "x"\nat = "inbox.poll"\n',
     "cancels[0].id", "duplicate id 'x'", 10),
    ('[[expect.lines]]\npath = "a"\nline = "x"\nmin = 1\ncount = 1\n', "expect.lines[0].count",
     "use either 'count' or 'min'/'max', not both", 9),
    ('[expect]\noutcome = ["completed", "done"]\n', "expect.outcome[1]",
     "unknown outcome 'done'; expected one of completed, cancelled", 6),
    ('[matrix]\ncrash_loop = true\n', "matrix.crash_loop", "expected an integer, got a boolean", 6),
])
def test_errors_name_the_field_and_its_line(tmp_path: Path, extra: str, field: str, says: str,
                                             line: int) -> None:
    err = error_of(tmp_path, MINIMAL + extra)
    assert (err.field, err.line) == (field, line)
    assert says in err.message


@pytest.mark.parametrize(("when", "field", "says"), [
    ('{ last_turn = { bash = ["ok", "fine"] } }', "script[0].when.last_turn.bash[1]",
     "unknown result status 'fine'; expected one of none, ok, error, unknown, any"),
    ('{ results = { rm = "ok" } }', "script[0].when.results.rm", "no reply of the script calls rm"),
    ('{ contains = { "read:a.md" = 1 } }', 'script[0].when.contains."read:a.md"',
     "expected a string, got an integer"),
    ("{ min_turns = 2, max_turns = 1 }", "script[0].when.max_turns", "must be >= min_turns (2)"),
])
def test_data_keys_are_quoted_as_toml_spells_them(tmp_path: Path, when: str, field: str,
                                                   says: str) -> None:
    err = error_of(tmp_path, MINIMAL.replace("[[script]]", f"[[script]]\nwhen = {when}"))
    assert (err.field, err.line) == (field, 4)
    assert says in err.message


def test_a_missing_reply_and_a_missing_tool_say_what_was_expected(tmp_path: Path) -> None:
    err = error_of(tmp_path, 'task = "t"\n[[script]]\nname = "a"\n')
    assert (err.field, err.line) == ("script[0].reply", 2)
    assert err.message == "missing required field; expected a table (what the fake model answers)"
    err = error_of(tmp_path, MINIMAL.replace('reply.final = "done"',
                                             'reply.tool_calls = [{ args = { path = "a" } }]'))
    assert err.field == "script[0].reply.tool_calls[0].tool"
    assert err.message.startswith("missing required field; expected a string (the tool to call")


def test_the_docs_reference_is_the_model() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text(encoding="utf-8")
    from crashmatrix.scenarios.reference import reference  # noqa: PLC0415 - only this test needs it
    assert f"<!-- reference:start -->\n{reference()}\n<!-- reference:end -->" in docs


@pytest.mark.parametrize("value", [
    Boundary.parse("effect.after:append_note"), Boundary.parse("inbox.poll"),
    ResultKey.parse("read:CHANGELOG.md"), ResultKey.parse("bash")])
def test_string_values_survive_copy_and_pickle(value: object) -> None:
    for again in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
        assert again == value
        assert repr(again) == repr(value)
        assert hash(again) == hash(value)


def test_the_scenario_vocabularies_mirror_the_agent() -> None:
    # scenarios never import the agent (they are data), so the copies are compared here.
    from crashmatrix.agent.probe import ProbeKind  # noqa: PLC0415
    from crashmatrix.agent.tools import BUILTINS  # noqa: PLC0415

    assert {k.value for k in BoundaryKind} == {k.value for k in ProbeKind}
    # post_json is the agent's but no default tool: a scenario enables it by name beside its
    # downstream services, and its arguments are checked against the schema the agent declares.
    assert {t.value for t in ToolName} == set(BUILTINS) - {"post_json"}
    for tool in ToolName:
        agent_tool = BUILTINS[tool.value]
        assert set(TOOL_ARGS[tool]) == set(agent_tool.parameters["required"]), tool
        assert DEFAULT_POLICIES[tool].value == agent_tool.replay.value, tool


# -- tests on calls the script never makes --------------------------------------------------

REACTS = """
task = "t"
[[script]]
name = "start"
when = { turns = 0 }
reply.tool_calls = [{ tool = "read", args = { path = "./docs/README.md" } }]
[[script]]
name = "react"
when = WHEN
reply.final = "done"
"""


@pytest.mark.parametrize(("when", "field", "says"), [
    # A typo in the path: the rule waits for a result that never comes.
    ('{ results = { "read:docs/REDME.md" = "ok" } }', 'script[1].when.results."read:docs/REDME.md"',
     "no reply of the script calls read on 'docs/REDME.md', so there is never a result for "
     "'read:docs/REDME.md' and this rule can never fire"),
    ('{ last_turn = { bash = ["ok", "error"] } }', "script[1].when.last_turn.bash",
     "no reply of the script calls bash, so there is never a result for 'bash' and this rule "
     "can never fire"),
    ('{ last_turn = { "read:README.md" = "any" } }', 'script[1].when.last_turn."read:README.md"',
     "this rule can never fire"),
    ('{ contains = { write = "x" } }', "script[1].when.contains.write", "this rule can never fire"),
    # Decided the other way: the test always holds, which hides the typo as well.
    ('{ results = { "read:docs/REDME.md" = ["none", "error"] } }',
     'script[1].when.results."read:docs/REDME.md"', "this test always holds"),
    ('{ lacks = { bash = "x" } }', "script[1].when.lacks.bash", "this test always holds"),
])
def test_a_rule_on_a_call_the_script_never_makes_is_refused(tmp_path: Path, when: str, field: str,
                                                            says: str) -> None:
    err = error_of(tmp_path, REACTS.replace("WHEN", when))
    assert (err.field, err.line) == (field, 9)
    assert says in err.message
    assert str(err).startswith(f"{err.path}:9: field '{field}': no reply of the script calls ")


def test_a_fault_on_a_call_the_script_never_makes_is_refused(tmp_path: Path) -> None:
    text = REACTS.replace("WHEN", "{ min_turns = 1 }") + (
        '[[faults]]\nkind = "http_500"\nwhen = { last_turn = { edit = "unknown" } }\n')
    err = error_of(tmp_path, text)
    assert (err.field, err.line) == ("faults[0].when.last_turn.edit", 13)
    assert err.message.endswith("and this fault can never fire")


@pytest.mark.parametrize("when", [
    '{ results = { "read:docs/README.md" = "ok" } }',  # the call's path, normalised as the key's
    '{ last_turn = { "read:./docs//README.md" = ["unknown", "error"] } }',
    '{ contains = { read = "x" }, lacks = { read = "y" } }',  # any read call
    '{ results = { "read:docs/README.md" = "none" } }',
])
def test_a_rule_on_a_call_the_script_makes_is_accepted(tmp_path: Path, when: str) -> None:
    scenario = load_file(write(tmp_path, REACTS.replace("WHEN", when)))
    assert [r.name for r in scenario.script] == ["start", "react"]
