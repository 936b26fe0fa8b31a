"""Prefect flows: wiring only. Each flow calls the stage functions of ``domainbert`` as tasks with retries
and content-hash caching; no stage logic lives here. Installed as ``domainbert.flows``."""
