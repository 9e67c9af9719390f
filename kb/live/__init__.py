"""Commands that talk to a running inference server: probe, sweep, doctor.

    client.py   URL checks, timeouts, capped reads, httpx errors → ServerError
    metrics.py  Prometheus /metrics text → the few load figures kb uses
    probe.py    which engine, version, model, context length and server arguments
    sweep.py    a streaming load generator over concurrency levels (sglang JSONL out)
    doctor.py   probe + sweep + diagnose
"""
