"""Commands that talk to a running inference server: probe, sweep, doctor.

    client.py   URL checks, timeouts, capped reads, httpx errors → ServerError
    metrics.py  Prometheus /metrics text → the few load figures kb uses
    probe.py    which engine, version, model, context length and server arguments
    sweep.py    a streaming load generator over concurrency levels (sglang JSONL out), made of:
      sweep_options.py  its options and checks, lengths fitted to the context, its result
      prompts.py        prompts of a token length, calibrated on the server's tokenizer
      stream.py         one streamed request: the aiohttp client, SSE parsing and timing
      sampler.py        the /metrics sampler of a level
      runner.py         the level loop, Ctrl-C, the progress bar, the JSON lines file
      stats.py          percentiles and per-metric figures, as numpy computes them
      sweep_output.py   a level's JSON line and the printed table
    slo.py      service-level objectives: goodput, a level's verdict, the highest level that meets them
    doctor.py   probe + sweep + diagnose
"""
