"""The mutant catalogue: each faulty agent, the real failure class it stands for, and its killers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from crashmatrix.harness.mutants import arrival_faults as A
from crashmatrix.harness.mutants import downstream_faults as D
from crashmatrix.harness.mutants import limit_faults as M
from crashmatrix.harness.mutants import lock_faults as K
from crashmatrix.harness.mutants import log_faults as G
from crashmatrix.harness.mutants import loop_faults as L
from crashmatrix.harness.mutants import recovery_faults as F
from crashmatrix.harness.mutants import step_faults as S
from crashmatrix.harness.mutants.naive import messages_only
from crashmatrix.harness.mutants.patching import Patcher, PatchFn


class MutantName(StrEnum):
    RERUN_NEVER = "rerun-never"
    CURRENT_POLICY_ONLY = "current-policy-only"
    NO_TOOL_STARTED = "no-tool-started"
    RESUME_FINISHED = "resume-finished"
    VOLATILE_INBOX = "volatile-inbox"
    VOLATILE_RESUME_COUNT = "volatile-resume-count"
    SPLIT_RECOVERY_COMMIT = "split-recovery-commit"
    VOLATILE_STOP = "volatile-stop"
    SESSION_CALL_IDS = "session-call-ids"
    RESEND_TASK = "resend-task"
    BARE_CONTINUE = "bare-continue"
    LATE_INTENT = "late-intent"
    FRESH_RESULT_ID = "fresh-result-id"
    REPAIR_DROPS_ONE_MORE = "repair-drops-one-more"
    SPLIT_FINAL = "split-final"
    RETRY_RESET = "retry-reset"
    RECOVER_NO_LOCK = "recover-no-lock"
    NEVER_SYNCS = "never-syncs"
    IGNORES_FAILED_SYNC = "ignores-failed-sync"
    IGNORES_SHORT_WRITE = "ignores-short-write"
    MESSAGES_ONLY = "messages-only"
    FRESH_KEY = "fresh-key"
    ATTEMPT_KEY = "attempt-key"
    RESEND_WITHOUT_STATUS = "resend-without-status"
    NO_CLIENT_TIMEOUT = "no-client-timeout"
    ERROR_MEANS_REFUSED = "error-means-refused"
    ERROR_MEANS_SUCCESS = "error-means-success"
    RESET_MEANS_UNSENT = "reset-means-unsent"
    JOURNAL_AFTER_REPLY = "journal-after-reply"
    MAX_STEPS_ONE_LATE = "max-steps-one-late"
    MAX_STEPS_ONE_EARLY = "max-steps-one-early"
    RETRIES_ONE_EARLY = "retries-one-early"
    RESUME_BUDGET_ONE_EARLY = "resume-budget-one-early"
    INBOX_CLEARS_ALL = "inbox-clears-all"
    CANCEL_AFTER_FIRST_REPLY = "cancel-after-first-reply"
    INPUTS_BEFORE_TASK = "inputs-before-task"
    COMPACTS_LOG_IN_PLACE = "compacts-log-in-place"
    RENAMES_BEFORE_SYNC = "renames-before-sync"
    SETTINGS_RESAVED_UNSYNCED = "settings-resaved-unsynced"
    HOLES_TAKEN_FOR_DAMAGE = "holes-taken-for-damage"
    TIDIES_FINISHED_LOG = "tidies-finished-log"
    GROUP_COMMITS_SKIPS_DAMAGE = "group-commits-skips-damage"


@dataclass(frozen=True)
class Mutant:
    name: MutantName
    failure: str  # one sentence: the real failure class it stands for
    patch: PatchFn
    # Scenarios expected to kill it, the likeliest first (a focused matrix; every built-in is
    # the fallback when they do not).
    scenarios: tuple[str, ...]
    # The fault kinds its hunt enumerates (`--fault`), for a mutant only a fault outside the
    # default set can kill; None: the default set.
    faults: tuple[str, ...] | None = None
    # Its hunt adds system-call points (`run --syscalls`) up to this depth: 1, those of each
    # recording and its settle; 2, then those of each single crash's recovery and settle too
    # (the depth-2 cases `run --syscalls --depth 2` has: each single crash then runs traced).
    syscalls: int = 0


def _m(name: MutantName, failure: str, patch: PatchFn, *scenarios: str,
       faults: tuple[str, ...] | None = None, syscalls: int = 0) -> Mutant:
    return Mutant(name, failure, patch, scenarios, faults, syscalls)


N = MutantName
CATALOGUE: Mapping[MutantName, Mutant] = MappingProxyType({m.name: m for m in (
    _m(N.RERUN_NEVER,
       "Recovery re-executes every interrupted tool call, so a non-idempotent effect (an append, "
       "a payment, a deploy) happens twice after a crash.",
       F.rerun_never, "changelog-fast", "parallel-calls"),
    _m(N.CURRENT_POLICY_ONLY,
       "Recovery trusts only the replay policy registered now, so a call started as never-replay "
       "is re-run once an operator or an upgrade marks its tool safe.",
       F.current_policy_only, "policy-loosened"),
    _m(N.NO_TOOL_STARTED,
       "The agent never records that a call started, so after a crash a call whose effect may "
       "already have happened looks unstarted and runs again.",
       F.no_tool_started, "changelog-fast"),
    _m(N.RESUME_FINISHED,
       "Recovery resumes the latest run whatever its outcome, so a completed, cancelled or "
       "tool-stopped run wakes up and acts again.",
       F.resume_finished, "finished", "tool-stop", "cancel"),
    _m(N.VOLATILE_INBOX,
       "User input is taken off the queue into memory before it is saved, so a crash in between "
       "loses it.",
       L.volatile_inbox, "queued-input"),
    _m(N.VOLATILE_RESUME_COUNT,
       "The resume counter lives in process memory, so a run that dies at the same step on every "
       "restart is resumed forever.",
       F.volatile_resume_count, "budget"),
    _m(N.SPLIT_RECOVERY_COMMIT,
       "Recovery is not atomic: it closes the interrupted run in one write and saves the repair "
       "results in a later one, so results land on a run that already ended, or are lost between.",
       F.split_recovery_commit, "safe-read-rerun", "changelog-fast"),
    _m(N.VOLATILE_STOP,
       "A tool's request to stop is held in memory, not saved with its result, so a crash before "
       "the run is closed resumes a run that was told to stop.",
       L.volatile_stop, "tool-stop"),
    _m(N.SESSION_CALL_IDS,
       "Results are matched to calls by id across the whole session; with a provider that reuses "
       "call ids, an old result answers a new call, which is then never run nor repaired.",
       F.session_call_ids, "reused-call-ids"),
    _m(N.RESEND_TASK,
       "On resume the agent sends the original task again, so the model starts the job over on "
       "top of the work already done.",
       L.resend_task, "safe-read-rerun", "changelog-fast"),
    _m(N.BARE_CONTINUE,
       "On resume the agent adds a bare \"continue\" user message, words the user never said that "
       "the model then acts on.",
       L.bare_continue, "safe-read-rerun", "changelog-fast"),
    _m(N.LATE_INTENT,
       "The agent records that a call started only after the tool ran, just before its result, so "
       "a crash in between leaves an effect no intent announced, which recovery cannot tell from a "
       "call that never ran.",
       L.late_intent, "changelog-fast"),
    _m(N.FRESH_RESULT_ID,
       "Recovery stores the result of an interrupted call under a new message id instead of the "
       "one its intent reserved, so nothing ties the result to its intent and a repeated repair "
       "cannot be recognised as the same result.",
       F.fresh_result_id, "changelog-fast", "safe-read-rerun"),
    _m(N.REPAIR_DROPS_ONE_MORE,
       "The torn-tail repair truncates one good commit too many, so a commit the agent had "
       "acknowledged, and acted on, silently disappears after a crash in the middle of a write.",
       G.repair_drops_one_more, "changelog-fast"),
    _m(N.SPLIT_FINAL,
       "The final answer and the run's end are saved in two writes, and recovery continues a run "
       "whose last message is its final answer, so the model is asked again after it answered "
       "and may act again.",
       S.split_final, "final-ends-run", "finished"),
    _m(N.RETRY_RESET,
       "The committed retry count is not read back after a crash, so the attempts start again "
       "at 1 after every restart and a provider that stays down is retried far past max_retries.",
       S.retry_reset, "retries-exhausted"),
    _m(N.RECOVER_NO_LOCK,
       "Recovery opens the session without taking its lock, since a crashed process holds none; "
       "but a process that is only slow (stopped, swapped out, paused in a debugger) still holds "
       "the session, and the two write it at once.",
       K.recover_no_lock, "changelog-fast"),
    _m(N.NEVER_SYNCS,
       "The session log never calls fsync, so a commit is acknowledged while only in the page "
       "cache: a process crash keeps it, a power loss (or a kernel panic) takes it, and the "
       "agent forgets work it reported saved and effects it recorded.",
       G.never_syncs, "changelog-fast", faults=("power",)),
    _m(N.IGNORES_FAILED_SYNC,
       "The session log takes a failed fsync (EIO) as success and runs on, though the kernel may "
       "have dropped the unsynced pages: it acknowledges a commit the disk never got and acts on "
       "it (PostgreSQL's fsync lesson).",
       G.ignores_failed_sync, "changelog-fast", faults=("eio-fsync",)),
    _m(N.IGNORES_SHORT_WRITE,
       "The session log takes a write that wrote only part of a commit (a nearly full disk, a "
       "file-size limit) for the whole of it, so the commit is acknowledged cut short and the "
       "next one is appended to its half line, which leaves the log unreadable from there on.",
       G.ignores_short_write, "changelog-fast", faults=("short-write",)),
    _m(N.MESSAGES_ONLY,
       "A framework that persists the message history but has no recovery rules re-runs whatever "
       "has no result and resumes whatever is open.",
       messages_only, "changelog-fast"),
    # Killed only with a downstream service in play: no scenario without one calls post_json.
    _m(N.FRESH_KEY,
       "The idempotency key is made fresh at send time (a new UUID per request), so a re-send "
       "after a lost reply or a crash is a new operation to the service.",
       D.fresh_key, "email-keyed", "order-then-email"),
    _m(N.ATTEMPT_KEY,
       "The key is derived from the attempt number (the incarnation or retry count), so the same "
       "operation re-sent by a recovery or a retry carries another key.",
       D.attempt_key, "email-keyed", "order-then-email"),
    _m(N.RESEND_WITHOUT_STATUS,
       "After an unknown outcome the agent re-submits without asking the service's status query "
       "first, so a service with no key applies the operation twice.",
       D.resend_without_status, "email-by-reference"),
    # One per downstream fault kind, each killed by that fault alone (timeout, error-after-apply,
    # error-before-apply, reply-lost, kill-after-apply, in this order).
    _m(N.NO_CLIENT_TIMEOUT,
       "The HTTP client of the agent's downstream calls has no timeout, so a service that takes "
       "the request and never answers hangs the agent for good.",
       D.no_client_timeout, "email-keyed"),
    _m(N.ERROR_MEANS_REFUSED,
       "A 5xx from a service is taken as a refusal that applied nothing, but a gateway can fail "
       "after the service committed, so the operation asked for again happens twice.",
       D.error_means_refused, "email-keyed", "email-by-reference"),
    _m(N.ERROR_MEANS_SUCCESS,
       "A 5xx from a service is reported to the model as success, so an operation the service "
       "never applied is taken as done and never retried.",
       D.error_means_success, "email-keyed", "email-by-reference"),
    _m(N.RESET_MEANS_UNSENT,
       "A connection reset without a reply is taken to mean the request never reached the "
       "service, but the service may have applied it and lost only the reply, so the operation "
       "asked for again happens twice.",
       D.reset_means_unsent, "email-keyed", "email-by-reference"),
    _m(N.JOURNAL_AFTER_REPLY,
       "Recovery trusts a local journal written after the service's reply over the service "
       "itself, so a crash after the service applied a request and before the reply came looks "
       "like a request never sent, which is sent again as a new operation.",
       D.journal_after_reply, "email-keyed", "email-by-reference"),
    # Limits reached one off, each killed at the edge it misses. No older built-in kills the step
    # or budget ones (none reaches a step limit; a resume budget of 1 hides the double count);
    # retries-exhausted kills retries-one-early too, by retry-bound's "gave up one early" alone.
    _m(N.MAX_STEPS_ONE_LATE,
       "The step limit is checked with > where >= belongs, so a run chain gets one model reply "
       "past max_steps, and a model that never stops calling tools gets one request more than "
       "the limit allows.",
       M.max_steps_one_late, "max-steps-over"),
    _m(N.MAX_STEPS_ONE_EARLY,
       "The step limit counts the reply about to be asked for as one already had, so a run that "
       "needs exactly max_steps replies is ended failed one reply before its answer.",
       M.max_steps_one_early, "max-steps-at", "max-steps-over"),
    _m(N.RETRIES_ONE_EARLY,
       "max_retries is read as the attempts in all, the first request included, so a run gives "
       "up one retry early and fails where the provider would have answered its last allowed "
       "retry.",
       M.retries_one_early, "max-retries-at", "retries-exhausted"),
    _m(N.RESUME_BUDGET_ONE_EARLY,
       "Recovery counts a run that is itself a resume twice, by its attempt number and again for "
       "being a resume, so from the second resume on a crash-looping chain is closed one resume "
       "before its budget is spent.",
       M.resume_budget_one_early, "resume-budget-edge"),
    # Killed only by an arrival-timing variant (`run --arrivals`): the built-ins deliver their
    # items where these faults do not show.
    _m(N.INBOX_CLEARS_ALL,
       "The agent empties its inbox after each poll instead of removing the inputs it took, so an "
       "input that lands between the read and the clean-up is lost.",
       A.inbox_clears_all, "queued-input~also-add-retry-log@inbox.poll:inbox"),
    _m(N.CANCEL_AFTER_FIRST_REPLY,
       "The agent skips cancels at the first inbox poll of each run it drives, so a cancel already "
       "waiting when a run starts is honoured only after the model's first answer and its tools.",
       A.cancel_after_first_reply, "cancel~user-cancel@commit.after:run_started.prompt,message.user"),
    _m(N.INPUTS_BEFORE_TASK,
       "A start that finds inputs already waiting (sent while the task was being given, before a "
       "crash kept the task from being saved) runs them first as a run of their own, so the model "
       "is asked about them without the task.",
       A.inputs_before_task, "queued-input~also-add-retry-log@commit.before:run_started.prompt,message.user"),
    # Killed only at a restart's system call, a settle's (`run --syscalls`) or a recovery's
    # (`--depth 2`): no probe event lies between the two calls, and a first incarnation never
    # compacts.
    _m(N.COMPACTS_LOG_IN_PLACE,
       "A restart compacts its log in place, truncating the file and then writing its commits "
       "back, so a crash between the two calls leaves the session with no record at all.",
       G.compacts_log_in_place, "changelog-fast", syscalls=1),
    # Killed only by a power loss at a restart's system call (`run --syscalls --fault power`: a
    # settle's; with `--depth 2`, a recovery's too): a kill keeps the page cache, and by the next
    # commit the file is synced.
    _m(N.RENAMES_BEFORE_SYNC,
       "A restart compacts its log into a new file and renames it over the old one, but syncs the "
       "folder before the file, so a power loss between the two syncs keeps the new name with none "
       "of its bytes.",
       G.compacts_log_unsynced_rename, "changelog-fast", faults=("power",), syscalls=1),
    # Killed only by `power-names`: the strict loss undoes the unsynced rename (the synced
    # settings are back); a kill keeps the page cache.
    _m(N.SETTINGS_RESAVED_UNSYNCED,
       "Each start saves the agent's settings again by renaming a temporary file over them, "
       "syncing neither, so a file system that persists the rename before the bytes leaves, after "
       "a power loss, a settings file with nothing in it, and the session cannot restart.",
       G.settings_resaved_unsynced, "changelog-fast", faults=("power-names",)),
    # Killed only by `power-blocks`: no other loss leaves a complete line with zeros in it.
    _m(N.HOLES_TAKEN_FOR_DAMAGE,
       "The log's recovery takes a last line holding zeros for damage to an acknowledged commit, "
       "so after a power loss that kept the log's new length but not all of its blocks, the "
       "session refuses to open.",
       G.holes_taken_for_damage, "large-result", faults=("power-blocks",)),
    # Killed at depth 1 only by a kill at a system call of the settle (`run --syscalls`): no
    # other start there follows a clean finish, and the rewrite leaves the same bytes behind.
    _m(N.TIDIES_FINISHED_LOG,
       "A restart that finds the session finished tidies its log in place, truncating the file and "
       "writing its commits back, so a crash between the two calls loses the whole finished run.",
       G.tidies_finished_log, "changelog-fast", syscalls=1),
    # Killed only by `power-subsets`, on `large-call`, where the message and the intent of a 6 KiB
    # call span four 4 KiB blocks of the log (with the lock's record, five unsynced blocks): by a
    # subset that drops a block holding the message's head while later blocks stay, so the reader
    # skips the damaged line and reads on (past four blocks, each dropped alone is a subset).
    # Every other loss keeps a prefix of the unsynced writes, or (`power-blocks`) only the last
    # block, which holds no intent's head when the intent is itself longer than a block: no other
    # state leaves a line after a damaged one. On a short log (changelog-fast) both commits share
    # a block, kept or lost together: it holds there. The kill is `log-integrity`: the harness's
    # reader refuses the line the mutant's reader skips.
    _m(N.GROUP_COMMITS_SKIPS_DAMAGE,
       "The log syncs an assistant message only with the intent after it (group commit) and its "
       "reader skips a damaged line up to the next record, so a file system that persists the "
       "intent's write but not the message's leaves an intent whose call is gone, which the agent "
       "reads past, appending to a log no strict reader can open.",
       G.group_commits_skips_damage, "large-call", faults=("power-subsets",)),
)})


class UnknownMutant(KeyError):
    pass


def get(name: str) -> Mutant:
    try:
        return CATALOGUE[MutantName(name)]
    except ValueError:
        raise UnknownMutant(f"unknown mutant {name!r}; known: {', '.join(CATALOGUE)}") from None


def apply(mutant: Mutant, patcher: Patcher | None = None) -> Patcher:
    """Install the mutant's fault on the agent's modules (for good, by default)."""
    p = patcher or Patcher()
    mutant.patch(p)
    return p


@contextmanager
def applied(mutant: Mutant) -> Iterator[None]:
    """The mutant's patch for the duration of a block, in this process (for tests)."""
    p = apply(mutant, Patcher())
    try:
        yield
    finally:
        p.undo()
