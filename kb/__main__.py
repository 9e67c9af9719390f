"""`python -m kb`. A plain `kb ask` is answered without importing typer or kb.cli
(kb.askcli); everything else goes to the typer command line. `main` can serve as the
console-script entry point too (`kb = "kb.__main__:main"`)."""

import sys


def main() -> None:
    from kb.askcli import main as plain_ask

    if not plain_ask(sys.argv[1:]):
        from kb.cli import main as cli_main

        cli_main()


if __name__ == "__main__":
    main()
