"""The ``taskqueue`` command (placeholder until the CLI lands)."""


def main() -> None:  # pragma: no cover
    raise SystemExit("taskqueue CLI: not built yet")
