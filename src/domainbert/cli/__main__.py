"""``python -m domainbert.cli``: the ``domainbert`` command (``main``)."""

from domainbert.cli import main

if __name__ == "__main__":
    main()
