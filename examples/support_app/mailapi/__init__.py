"""A tiny client of a mail API: POST /messages with an Idempotency-Key, as a user's app would call
its email provider. The API's base URL comes from MAIL_API_URL (crashmatrix points it at its fake
downstream service; docs/downstream.md)."""

from __future__ import annotations

import json
import os
import urllib.request


def send(to: str, subject: str, body: str, key: str) -> str:
    """Send one email; the key makes a repeat of the same send a no-op at the API. Returns the
    API's message id."""
    request = urllib.request.Request(
        f"{os.environ['MAIL_API_URL']}/messages",
        data=json.dumps({"to": to, "subject": subject, "body": body}).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": key}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["id"])
