"""`crashmatrix schema`: print the JSON Schema of scenario files, for editors and CI checks."""

from __future__ import annotations

import json

import click

from crashmatrix.scenarios.jsonschema import scenario_json_schema


@click.command("schema")
def schema() -> None:
    """Print the JSON Schema of scenario files (docs/scenarios.md, "Editor support")."""
    click.echo(json.dumps(scenario_json_schema(), indent=2, ensure_ascii=False))
