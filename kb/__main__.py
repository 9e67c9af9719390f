"""`python -m kb`. A plain `kb ask` is answered without importing typer or kb.cli
(kb.askcli); everything else goes to the typer command line. `main` can serve as the
console-script entry point too (`kb = "kb.__main__:main"`)."""

import signal
import sys


def main() -> None:
    try:
        from kb.askcli import main as plain_ask

        if not plain_ask(sys.argv[1:]):
            from kb.cli import main as cli_main

            cli_main()
    except KeyboardInterrupt:  # a Ctrl-C while kb starts, before kb.cli's handler is in place
        print("kb: interrupted", file=sys.stderr)
        exit_interrupted()
    except SystemExit as e:
        if e.code == 130:  # kb's exit for a Ctrl-C (kb.cli, kb.askcli, typer)
            exit_interrupted()
        raise


def exit_interrupted() -> None:
    """Exit 130 with SIGINT blocked until the process is gone. CPython counts a
    KeyboardInterrupt that leaves a string `exec` (dataclasses build their methods so at
    import) as unhandled even when kb catches it, and under `python -m` then ends the
    process by raising SIGINT again after finalisation (Py_RunMain's exit_sigint, measured:
    exit -2 instead of 130); from finalisation on SIGINT has its default action, so a second
    Ctrl-C there kills kb too. Blocked, that SIGINT stays pending and the exit is 130."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    sys.exit(130)


if __name__ == "__main__":
    main()
