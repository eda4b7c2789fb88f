"""The plugin tier runs pytest in pytest (pytester)."""

pytest_plugins = ["pytester"]
