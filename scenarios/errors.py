"""The one exception a scenario file can raise: it names the file, the field and what was wrong."""

from __future__ import annotations


class ScenarioError(Exception):
    """A scenario could not be loaded or resolved.

    `path` is the file (None when no file is involved, e.g. an unknown scenario name), `field`
    the dotted path inside it (e.g. `script[2].reply.tool_calls[0].args`), and `line`/`column`
    are set for TOML syntax errors. `str()` gives the one-line message the CLI prints.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.path = path
        self.field = field
        self.line = line
        self.column = column
        super().__init__(self.render())

    def render(self) -> str:
        where = self.path or ""
        if self.path and self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        parts = [where] if where else []
        if self.field:
            parts.append(f"field '{self.field}'")
        parts.append(self.message)
        return ": ".join(parts)
