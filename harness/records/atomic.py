"""Replacing a file atomically: a reader, or a crash, sees the old content or the new, never half."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def replace_file(path: Path, chunks: Iterable[str]) -> None:
    """Write `chunks` to a temporary file beside `path`, sync it, and rename it over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp makes it 0600; as readable as a written file
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.filename is None:  # a write or sync to the descriptor: name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
