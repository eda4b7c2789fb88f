"""The generated model: script rules that carry out a plan and survive any crash point.

Every reply is decided from the conversation alone. Progress is read from per-call result keys
(each call has a file of its own), so a restarted agent that resends a history gets the same
reply, and a call whose result says "outcome unknown" is handled as a careful model would:

1. reactions, first: told an append's outcome is unknown, read the file; a failed check is
   read again; a check that lacks the line appends it (a fresh read decides every second append);
2. then, turn by turn: a turn whose calls have no result yet is issued whole; a call of it that
   is not done is repeated alone (reads, writes and bash are simply re-issued; a checking append
   whose check is missing or stale is checked; a blind append counts as done);
3. the calls an input asked for, once a user message holds the input's token;
4. a final answer, when nothing above matched.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from crashmatrix.harness.explore.plan import INPUT_TOKEN, Action, ActionKind, Care, Plan
from crashmatrix.scenarios.model import CallSpec, Condition, Reply, ResultKey, ResultStatus, Rule, ToolName

NOT_OK = frozenset({ResultStatus.UNKNOWN, ResultStatus.ERROR})
MISSING = frozenset({ResultStatus.NONE})
OK = frozenset({ResultStatus.OK})

Statuses = Mapping[ResultKey, frozenset[ResultStatus]]


def key(action: Action) -> ResultKey:
    """The result key of the call itself; bash has no path, so a plan holds one bash at most."""
    if action.kind is ActionKind.BASH:
        return ResultKey(ToolName.BASH)
    return ResultKey(action.tool, action.path)


def check_key(action: Action) -> ResultKey:
    """The key of the reads that check an append's file."""
    return ResultKey(ToolName.READ, action.path)


def _call(action: Action) -> CallSpec:
    return CallSpec(action.tool, MappingProxyType(dict(action.args)))


def _check(action: Action) -> CallSpec:
    return CallSpec(ToolName.READ, MappingProxyType({"path": action.path}))


def _when(results: Statuses | None = None, last_turn: Statuses | None = None,
          lacks: Mapping[ResultKey, str] | None = None, user: str | None = None) -> Condition:
    return Condition(results=MappingProxyType(dict(results or {})),
                     last_turn=MappingProxyType(dict(last_turn or {})),
                     lacks=MappingProxyType(dict(lacks or {})), user_contains=user)


def _rule(name: str, when: Condition, *calls: CallSpec) -> Rule:
    return Rule(name, when, Reply(None, tuple(calls)))


def _checks_first(action: Action) -> bool:
    return action.kind is ActionKind.APPEND and action.care is Care.CHECK


def reactions(action: Action) -> list[Rule]:
    """What the model does right after an unknown append, a failed check, or a check."""
    if not _checks_first(action):
        return []
    tag, a, r = f"s{action.slot}", key(action), check_key(action)
    return [
        _rule(f"{tag}-check-after-unknown", _when(last_turn={a: frozenset({ResultStatus.UNKNOWN})}),
              _check(action)),
        _rule(f"{tag}-check-again", _when(last_turn={r: NOT_OK}), _check(action)),
        _rule(f"{tag}-append-if-missing", _when(last_turn={r: OK}, lacks={r: action.text}),
              _call(action)),
    ]


def unfinished(action: Action, user: str | None = None) -> list[Rule]:
    """One rule per way the call can be issued but not done, each with the call that mends it."""
    tag, k = f"s{action.slot}", key(action)
    if action.kind is ActionKind.APPEND:
        if action.care is Care.BLIND:
            return []  # an unknown outcome is taken as it is: the model goes on
        r = check_key(action)
        # A sibling in the same turn may have taken the reaction's place: check now. A stale
        # check (older than the latest attempt) is never trusted for a second append.
        return [
            _rule(f"{tag}-check-pending", _when({k: NOT_OK, r: MISSING | NOT_OK}, user=user),
                  _check(action)),
            _rule(f"{tag}-check-stale", _when({k: NOT_OK, r: OK}, lacks={r: action.text}, user=user),
                  _check(action)),
        ]
    return [_rule(f"{tag}-again", _when({k: NOT_OK}, user=user), _call(action))]


def turn_rules(index: int, turn: tuple[Action, ...]) -> list[Rule]:
    start = _rule(f"turn{index}", _when({key(a): MISSING for a in turn}), *(_call(a) for a in turn))
    return [start, *(r for a in turn for r in unfinished(a))]


def input_rules(action: Action) -> list[Rule]:
    start = _rule(f"s{action.slot}-asked", _when({key(action): MISSING}, user=INPUT_TOKEN),
                  _call(action))
    return [start, *unfinished(action, user=INPUT_TOKEN)]


def final_text(plan: Plan) -> str:
    """The answer quotes every read's last line and the command's output."""
    parts = ["Done."]
    for a in plan.actions():
        if a.kind is ActionKind.READ:
            parts.append(f"{{last_line.read:{a.path}}}")
        elif a.kind is ActionKind.BASH:
            parts.append("{last_line.bash}")
    return " ".join(parts)


def script(plan: Plan) -> tuple[Rule, ...]:
    rules = [r for a in plan.all_actions() for r in reactions(a)]
    for index, turn in enumerate(plan.turns, 1):
        rules += turn_rules(index, turn)
    extra = plan.input_action()
    if extra is not None:
        rules += input_rules(extra)
    rules.append(Rule("finish", Condition(), Reply(final_text(plan))))
    return tuple(rules)
