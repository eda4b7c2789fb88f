"""The Anthropic-shaped error responses the fake returns, with the real service's wording."""

from __future__ import annotations

from crashmatrix.fakes.api_errors import ApiError


def _error(status: int, type_: str, message: str) -> ApiError:
    # The Messages API's error envelope. The service now adds a top-level `request_id`; the fake
    # leaves it out (it would be a random value), as older responses did.
    return ApiError(status, {"type": "error", "error": {"type": type_, "message": message}})


# Pairing errors worded as the service words them (reported verbatim in public bug reports).
# `index` is the assistant message whose `tool_use` blocks are unanswered.
def missing_tool_results(index: int, ids: list[str]) -> ApiError:
    return _error(
        400, "invalid_request_error",
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` "
        "block in the next message.")


def orphan_tool_result(index: int, block: int, tool_use_id: str) -> ApiError:
    return _error(
        400, "invalid_request_error",
        f"messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` "
        f"blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` "
        "block in the previous message.")


def invalid_request(message: str) -> ApiError:
    return _error(400, "invalid_request_error", message)


def invalid_json() -> ApiError:
    return _error(400, "invalid_request_error",
                  "There was an issue with the formatting or content of your request: the body "
                  "is not valid JSON.")


def server_error() -> ApiError:
    return _error(500, "api_error", "Internal server error")


def rate_limited() -> ApiError:
    return _error(429, "rate_limit_error",
                  "This request would exceed the rate limit for your organization. Please try "
                  "again shortly.")


def script_gap(scenario: str) -> ApiError:
    # Not an API error: the script has no rule for this history (see api_errors.script_gap).
    return _error(400, "crashmatrix_script_gap",
                  f"crashmatrix fake provider: no rule of scenario {scenario!r} matches this "
                  "conversation")


def unknown_case(key: str) -> ApiError:
    return _error(404, "not_found_error",
                  f"crashmatrix fake provider: no case registered under {key!r}")
