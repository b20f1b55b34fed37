"""The `campaign` command line.  Only this layer prints."""

from __future__ import annotations

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Optimization campaigns for LLM inference servers.")


def main() -> None:
    try:
        from campaign.cli_toolkit import register as register_toolkit
        register_toolkit(app)
    except ImportError:
        pass
    app()
