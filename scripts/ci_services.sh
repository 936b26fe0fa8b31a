#!/usr/bin/env bash
# Install what the real-server test (tests/system/flows/test_flows_server.py) needs, the PostgreSQL server binaries,
# and the browser the report test renders in (tests/system/report/test_report_browser.py): chromium-headless-shell.
# The test itself starts a throwaway cluster in a temp folder on a free port of 127.0.0.1 (as the postgres
# user when run as root) and stops it afterwards; this script only installs the package when it is absent.
# Usage (CI, as root): bash scripts/ci_services.sh
set -euo pipefail

have_postgres() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}

if have_postgres; then
  echo "ci_services: PostgreSQL present: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)"
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "ci_services: PostgreSQL is missing; install it with: sudo apt-get install -y postgresql" >&2
    exit 1
  fi
  echo "ci_services: installing PostgreSQL (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  # The package starts a default cluster on port 5432; the test does not use it, so stop it again.
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    for cluster in /etc/postgresql/*/main; do
      [ -d "$cluster" ] || continue
      version=$(basename "$(dirname "$cluster")")
      pg_ctlcluster "$version" main stop >/dev/null 2>&1 || true
    done
  fi
  have_postgres
fi

if command -v chromium-headless-shell >/dev/null 2>&1; then
  echo "ci_services: chromium-headless-shell present"
elif [ "$(id -u)" -eq 0 ]; then
  echo "ci_services: installing chromium-headless-shell (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null; }
else
  echo "ci_services: chromium-headless-shell is missing; install it with: sudo apt-get install -y chromium-headless-shell" >&2
  exit 1
fi

# asyncpg is Prefect's PostgreSQL driver; it comes with the project's dependencies (prefect installs it).
python_bin="${PYTHON:-.venv/bin/python}"
if [ -x "$python_bin" ]; then
  "$python_bin" -c "import asyncpg" 2>/dev/null || echo "ci_services: warning: asyncpg not importable by $python_bin" >&2
fi
if ! command -v runuser >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "ci_services: runuser (util-linux) is needed to start PostgreSQL as the postgres user" >&2
  exit 1
fi
