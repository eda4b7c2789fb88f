"""The OpenAI-shaped error responses (Chat Completions and Responses), with the service's wording."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiError:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        return str(self.body["error"]["message"])


def _error(status: int, message: str, type_: str, param: str | None = None,
           code: str | None = None) -> ApiError:
    return ApiError(status, {"error": {"message": message, "type": type_, "param": param,
                                       "code": code}})


# Wording and shape as the OpenAI chat completions API returns them (as reported verbatim in
# public bug reports); the misspelling "preceeding" is the service's own.
def missing_tool_responses(index: int, call_ids: list[str]) -> ApiError:
    return _error(
        400,
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(call_ids),
        "invalid_request_error",
        f"messages.[{index}].role",
    )


def orphan_tool_message(index: int) -> ApiError:
    return _error(
        400,
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
        "invalid_request_error",
        f"messages.[{index}].role",
    )


# The Responses API's pairing errors, as the service words them (reported verbatim in public
# bug reports): one call id each, `param` "input" and `code` null.
def no_tool_output(call_id: str) -> ApiError:
    return _error(400, f"No tool output found for function call {call_id}.",
                  "invalid_request_error", "input")


def no_tool_call(call_id: str) -> ApiError:
    return _error(400, f"No tool call found for function call output with call_id {call_id}.",
                  "invalid_request_error", "input")


def previous_response_not_found(response_id: str) -> ApiError:
    return _error(400, f"Previous response with id '{response_id}' not found.",
                  "invalid_request_error", "previous_response_id", "previous_response_not_found")


def missing_parameter(param: str) -> ApiError:
    return _error(400, f"Missing required parameter: '{param}'.", "invalid_request_error", param,
                  "missing_required_parameter")


def invalid_value(param: str, detail: str) -> ApiError:
    return _error(400, f"Invalid value for '{param}': {detail}", "invalid_request_error", param,
                  "invalid_value")


def unsupported_parameter(param: str, detail: str) -> ApiError:
    # Not a refusal the real service gives: a feature the fake does not imitate says so.
    return _error(400, f"crashmatrix fake provider: '{param}' is not supported; {detail}",
                  "invalid_request_error", param, "unsupported_parameter")


def invalid_json() -> ApiError:
    return _error(
        400,
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
        "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
        "sent was not valid JSON.)",
        "invalid_request_error",
    )


def invalid_messages(detail: str, param: str = "messages") -> ApiError:
    return _error(400, detail, "invalid_request_error", param)


def invalid_url(method: str, path: str) -> ApiError:
    return _error(404, f"Invalid URL ({method} {path})", "invalid_request_error")


def unknown_case(key: str) -> ApiError:
    return _error(404, f"crashmatrix fake provider: no case registered under {key!r}",
                  "invalid_request_error")


def server_error() -> ApiError:
    return _error(500, "The server had an error while processing your request. Sorry about that!",
                  "server_error")


def rate_limited() -> ApiError:
    return _error(429, "Rate limit reached for requests. Please try again shortly.", "requests",
                  code="rate_limit_exceeded")


def script_gap(scenario: str) -> ApiError:
    # Not an API error a real service gives: the scenario's script has no rule for this
    # history. A 400 makes the agent fail the run visibly instead of retrying.
    return _error(400, f"crashmatrix fake provider: no rule of scenario {scenario!r} matches "
                  "this conversation", "crashmatrix_script_gap")


# The HTTP layer's refusals. A real service's front end gives these statuses before the API
# sees the request, in its own (often HTML) body; the fake keeps the API's JSON shape so a
# client's one error path reads them, with wording of its own.
def bad_framing(detail: str) -> ApiError:
    return _error(400, f"crashmatrix fake provider: {detail}", "invalid_request_error")


def length_required() -> ApiError:
    return _error(411, "crashmatrix fake provider: a POST needs a Content-Length header (or "
                  "Transfer-Encoding: chunked)", "invalid_request_error")


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n} bytes ({n // scale} {unit})"
    return f"{n} bytes"


def body_too_large(limit: int) -> ApiError:
    return _error(413, f"crashmatrix fake provider: the request body is larger than {_size(limit)}"
                  ", the most this server accepts", "invalid_request_error")


def too_many_values(limit: int) -> ApiError:
    # Small in bytes but costly to parse (millions of tiny arrays): refused as too large, before
    # it is parsed.
    return _error(413, "crashmatrix fake provider: the request body holds more than "
                  f"{limit} JSON arrays and objects, the most this server parses",
                  "invalid_request_error")


def overloaded(limit: int) -> ApiError:
    # What other clients' unfinished bodies already hold leaves no room for this one: a 503, as a
    # front end gives when it sheds load; OpenAI's clients retry it.
    return _error(503, "crashmatrix fake provider: request bodies being received already hold "
                  f"close to {_size(limit)}, the most this server holds at once; retry shortly",
                  "server_error")


def request_timeout() -> ApiError:
    return _error(408, "crashmatrix fake provider: the request body was not received in time",
                  "invalid_request_error")
