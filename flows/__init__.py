"""Prefect flows: wiring only. Each flow calls the stage functions of ``domainbert`` as tasks with retries
and caching on the stages' own fingerprints; no stage logic lives here. Installed as ``domainbert.flows``."""
