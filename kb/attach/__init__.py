"""`kb attach`: what a run taught us, written back as a finding the next query finds.

Gains are computed from the benchmark files, never typed: both sides are read with
ingest.run.read_run and compared level by level (same concurrency or request rate,
same input/output lengths when known). Context comes from the runs (engine, server
arguments, config.json, nvidia-smi) and from options, never from guesses. The
finding is redacted, rendered in the canonical format, appended to a findings file
under a lock with an atomic write, and indexed at once.

    request.py  what the user asked to record (the command's options)
    gains.py    the gains table from paired levels, its confidence and spread notes
    context.py  engine, model, GPU, changed server arguments and sources, from the runs
    measure.py  the runs read and compared (or observed alone): gains, confidence, notes
    finding.py  the finding built from all that: classes, title, symptoms, redacted
    writer.py   appended or merged under a lock, read back, indexed; near-duplicates caught
    report.py   the text the command prints
"""

from kb.attach.context import changed_args
from kb.attach.finding import build
from kb.attach.report import report
from kb.attach.request import Request
from kb.attach.writer import AttachResult, attach

__all__ = ["AttachResult", "Request", "attach", "build", "changed_args", "report"]
