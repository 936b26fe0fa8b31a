"""``domainbert plan``: which stages a run will run and why (``stage_plans``), whether each stage's output is
current (``stage_state``, which the flows ask too), the probes timed on this machine (``probes``), the time the
stages take here (``estimate``) and a design's power before its compute is spent (``design_power``).

Above ``domainbert.report``, under the flows and the CLI. See docs/architecture.md.
"""
