"""post_json's protocol: a POST to a declared downstream service that stays right across crashes."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import quote, urlsplit

from crashmatrix.agent.records import Replay

# Per HTTP request; read at call time, so tests can lower it. A reply that takes longer is an
# unknown outcome, handled like a dropped connection (the key and the status query cover both).
# Not shorter: a loopback reply takes milliseconds even in a loaded matrix, and a spurious timeout
# adds a request, which shifts the downstream crash points of a re-run (a nondeterministic case).
# Each `timeout` fault case pays it once.
DOWNSTREAM_TIMEOUT_S = 2.0
# Every result is committed to the session log and sent to the model: a response body is cut here.
RESPONSE_CAP_BYTES = 64 * 1024

DESCRIPTION = (
    "POST a JSON body to a downstream service (its base URL is in CRASHMATRIX_SERVICE_<SERVICE>_URL), "
    "with an idempotency key the agent derives from the call, so a re-send after a crash is "
    "recognised; `status` names a GET path ({key} filled in) to ask whether an earlier attempt "
    "applied."
)

# Written by hand: `key` and `status` are optional, which `_schema` in tools.py cannot say.
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "description": "the service's name (lowercase letters, "
                    "digits, '_'); its base URL is in CRASHMATRIX_SERVICE_<SERVICE>_URL"},
        "path": {"type": "string", "description": "the path under the base URL (a leading / is optional)"},
        "body": {"type": "object", "description": "the JSON object to send"},
        "key": {"type": "string", "description": "where the idempotency key goes: "
                "\"header:NAME\" (e.g. header:Idempotency-Key) or \"body:FIELD\" (a top-level "
                "field of the body, e.g. body:client_ref)"},
        "status": {"type": "string", "description": "a GET path with {key} that answers 200 when "
                   "the operation with that key applied and 404 when it did not, e.g. "
                   "/messages/by-ref/{key}; needs `key`"},
    },
    "required": ["service", "path", "body"],
    "additionalProperties": False,
}

_SERVICE = re.compile(r"^[a-z][a-z0-9_]*$")  # the scenario model's service names
_PATH = re.compile(r"^/[!-~]*$")  # printable ASCII, no spaces: what a request line can carry
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# What `exchange` says when the connection was closed or reset without a reply.
NO_REPLY_RESET = "no reply (the connection was closed or reset)"


class SpecError(Exception):
    """Arguments or configuration that make the call impossible: nothing was sent."""


def idempotency_key(result_id: str, call_id: str) -> str:
    """The call's key, from the ids its tool_started entry reserved before anything was sent.

    So every send of the call, on the first run and on each recovery re-run, carries the same key;
    never time, randomness or the attempt: a new key makes a re-send a new operation.
    """
    return _KEY_UNSAFE.sub("_", f"cm-{result_id}-{call_id}")


def replay_of(args: Any) -> Replay:
    """The replay a call records: safe only when a key or a status query makes a re-send
    recognisable; a bare POST re-run after a crash could apply twice, so it is never re-run."""
    if isinstance(args, dict) and ("key" in args or "status" in args):
        return Replay.SAFE
    return Replay.NEVER


@dataclass(frozen=True)
class Target:
    """A post_json call resolved against its service; the key itself is derived at each send."""

    base: str  # the service's base URL, without a trailing /
    path: str
    body: Mapping[str, Any]
    key_at: tuple[str, str] | None  # ("header", NAME) or ("body", FIELD); None: no key is sent
    status: str | None  # the status query's path, "{key}" still in it
    result_id: str
    call_id: str

    def key(self) -> str:
        # Looked up on the module at call time, so the derivation has one place to change.
        return idempotency_key(self.result_id, self.call_id)

    def status_path(self, key: str) -> str:
        assert self.status is not None
        return self.status.replace("{key}", quote(key, safe=""))


def resolve(args: Mapping[str, Any], environ: Mapping[str, str], result_id: str,
            call_id: str) -> Target:
    """Check the call's arguments and find its service's base URL; SpecError when either fails."""
    service, path = args["service"], args["path"]
    if not _SERVICE.match(service):
        raise SpecError(f"{service!r} is not a service name (lowercase letters, digits and '_')")
    env = f"CRASHMATRIX_SERVICE_{service.upper()}_URL"
    base = environ.get(env, "")
    if not base:
        raise SpecError(f"no base URL for service {service!r}: {env} is not set")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(f"{env} is not an http(s) URL: {base!r}")
    # A path without its leading "/" is taken as under the base URL too: scenario scripts key a
    # call's result on its `path`, which they read as relative ("messages").
    path = path if path.startswith("/") else "/" + path
    if not _PATH.match(path):
        raise SpecError(f"path {path!r} must hold no spaces or control characters")
    key_at: tuple[str, str] | None = None
    if "key" in args:
        where, _, name = str(args["key"]).partition(":")
        if not ((where == "header" and _TOKEN.match(name)) or (where == "body" and name)):
            raise SpecError(f"key {args['key']!r} must be \"header:NAME\" (an HTTP header name) or "
                            "\"body:FIELD\" (a top-level field of the body)")
        key_at = (where, name)
    status: str | None = None
    if "status" in args:
        if key_at is None:
            raise SpecError("'status' needs 'key': the query asks by the idempotency key, which is "
                            "sent only where 'key' says")
        if "{key}" not in args["status"] or not _PATH.match(args["status"]):
            raise SpecError(f"status {args['status']!r} must be a path starting with / that "
                            "holds {key}")
        status = args["status"]
    return Target(base.rstrip("/"), path, args["body"], key_at, status, result_id, call_id)


class Kind(StrEnum):
    DONE = "done"  # 2xx: applied now, or a replay of an earlier attempt that applied
    REFUSED = "refused"  # a 4xx other than 408 and 429: the service applied nothing
    UNKNOWN = "unknown"  # no reply, a timeout, 408, 429, 5xx, anything else


@dataclass(frozen=True)
class Reply:
    """What one request got, classified."""

    step: str  # "POST" or "status query"
    key: str  # the key the request carried (or asked for)
    kind: Kind
    status: int | None  # None: no reply at all
    text: str  # the response body (capped), or why there was no reply
    confirmed: bool = False  # a status query found the operation


def classify(status: int | None) -> Kind:
    if status is None or status in (408, 429) or not 200 <= status < 500:
        # A 3xx is unknown too: after a POST it can mean "done, look there", so never "refused".
        return Kind.UNKNOWN
    return Kind.DONE if status < 300 else Kind.REFUSED


def exchange(method: str, url: str, headers: Mapping[str, str], body: bytes | None
             ) -> tuple[int | None, str]:
    """One request on a fresh connection: (status, body text), or (None, why no reply came)."""
    timeout = DOWNSTREAM_TIMEOUT_S
    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "", parts.port, timeout=timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=dict(headers))
        response = conn.getresponse()
        try:
            data = response.read(RESPONSE_CAP_BYTES + 1)
        except http.client.IncompleteRead as exc:
            data = exc.partial
        except (OSError, http.client.HTTPException):
            data = b""  # the status line arrived: the outcome is what it says; the body is lost
        status = response.status
    except TimeoutError:
        return None, f"no reply within {timeout:g}s"
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        # RemoteDisconnected is a ConnectionResetError; which of these a dropped connection
        # raises depends on timing, so they share one text (results stay deterministic).
        return None, NO_REPLY_RESET
    except (OSError, http.client.HTTPException) as exc:
        return None, f"no reply ({type(exc).__name__})"
    finally:
        conn.close()
    text = data[:RESPONSE_CAP_BYTES].decode("utf-8", errors="replace")
    if len(data) > RESPONSE_CAP_BYTES:
        text += f"\n[response truncated at {RESPONSE_CAP_BYTES} bytes]"
    return status, text


def send(target: Target) -> Reply:
    """POST the body once, the key placed where the call said."""
    key = target.key()
    headers = {"Content-Type": "application/json"}
    body = dict(target.body)  # a copy: the call's arguments are committed, never altered
    if target.key_at is not None:
        where, name = target.key_at
        if where == "header":
            headers[name] = key
        else:
            body[name] = key
    data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    status, text = exchange("POST", target.base + target.path, headers, data)
    return Reply("POST", key, classify(status), status, text)


def query_status(target: Target) -> Reply:
    """GET the status path for the call's key (its kind is the plain HTTP classification). A
    query changes nothing, so one whose answer was lost (no reply, a 5xx) is asked once more."""
    key = target.key()
    for _ in range(2):
        status, text = exchange("GET", target.base + target.status_path(key), {}, None)
        reply = Reply("status query", key, classify(status), status, text)
        if reply.kind is not Kind.UNKNOWN:
            break
    return reply


def confirm_or_send(target: Target) -> Reply:
    """Ask whether an earlier attempt applied before sending again: found, it is done and nothing
    is sent; not found, send (once); anything else, the outcome stays unknown and nothing is sent."""
    asked = query_status(target)
    if asked.status == 200:
        return replace(asked, kind=Kind.DONE, confirmed=True)
    if asked.status == 404:
        return send(target)
    return replace(asked, kind=Kind.UNKNOWN)


def post(target: Target, *, rerun: bool) -> tuple[str, bool]:
    """The whole call: (result text, is_error). `rerun`: a recovery run, after a crash that may
    have come after an earlier attempt applied. With a status query, ask before any re-send;
    with a key only, re-send under the same key; with neither, never re-send. At most 2 POSTs."""
    if target.status is not None:
        reply = confirm_or_send(target) if rerun else send(target)
        if reply.kind is Kind.UNKNOWN and reply.step == "POST":
            # The send's outcome is unknown: ask again before anything is sent again.
            reply = confirm_or_send(target)
    else:
        reply = send(target)
        if reply.kind is Kind.UNKNOWN and target.key_at is not None:
            reply = send(target)
    return result(target, reply)


def result(target: Target, reply: Reply) -> tuple[str, bool]:
    """The text the model sees for the last reply of a call."""
    if reply.kind is Kind.DONE:
        if reply.confirmed:
            return f"applied (confirmed by status query): {reply.text}", False
        return f"HTTP {reply.status}: {reply.text}", False
    if reply.kind is Kind.REFUSED:
        return (f"ERROR: post_json: the service refused the request with HTTP {reply.status}; "
                f"nothing was applied: {reply.text}"), True
    what = reply.text if reply.status is None else f"HTTP {reply.status}: {reply.text}"
    if target.key_at is None:
        sent = "It carried no idempotency key, so it was not sent again"
    else:
        sent = f"It was sent with idempotency key {reply.key!r}"
        if target.status is not None:
            # The path, not the URL: a result must not depend on the port the service got.
            sent += f" (GET {target.status_path(reply.key)} answers whether it applied)"
    return (f"ERROR: post_json: the outcome is unknown ({reply.step}: {what}): the service may "
            f"or may not have applied the request. {sent}; check the current state before "
            "repeating it."), True
