"""One JSON POST with urllib, as a plain HTTP client sends it, for tests that talk to the fake provider."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


def post(url: str, body: Any, timeout: float = 5.0,
         headers: Mapping[str, str] | None = None) -> tuple[int, str, bytes]:
    """Status, content type and body of the answer (an HTTP error status is an answer too)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read()
