#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine: installs what Go does
# not fetch (Debian's chromium, for the inspector's browser test) when it is
# missing, runs `go test -count=1 -timeout 45m ./...`, then the Python
# client's tests (`python3 -m unittest discover` in clients/python, standard
# library only) against an engine binary built here once (ENGINE_BIN). The
# script fails when either fails. Arguments are passed to go test after the
# defaults and run the Go tests only (./test.sh -run TestSmoke ./tests/).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
  echo "test.sh: go is not on PATH: install Go 1.26 (https://go.dev/dl/) and run ./test.sh again" >&2
  exit 2
fi

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing Debian's chromium (the inspector's browser test needs it)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "test.sh: /usr/bin/chromium is missing and cannot be installed here (not root, or no apt-get)." >&2
    echo "test.sh: install it (sudo apt-get install chromium) and run ./test.sh again; the inspector's browser test needs it." >&2
    exit 2
  fi
fi

if [ "$#" -gt 0 ]; then
  exec go test -count=1 -timeout 45m "$@"
fi

if ! command -v python3 >/dev/null 2>&1; then
  echo "test.sh: python3 is not on PATH: install Python 3.10 or later (the Python client's tests need nothing else)" >&2
  exit 2
fi

status=0
go test -count=1 -timeout 45m ./... || status=$?

bin_dir="$(mktemp -d)"
trap 'rm -rf "$bin_dir"' EXIT
echo "test.sh: Python client tests (clients/python) against an engine built into $bin_dir"
if go build -o "$bin_dir/engine" ./cmd/engine; then
  (cd clients/python && ENGINE_BIN="$bin_dir/engine" python3 -m unittest discover) || status=$?
else
  echo "test.sh: go build ./cmd/engine failed: the Python client tests did not run" >&2
  status=1
fi
exit "$status"
