#!/usr/bin/env bash
# Runs every test of the repository on a fresh machine: installs what Go does
# not fetch (Debian's chromium, for the inspector's browser test) when it is
# missing, then runs `go test -count=1 -timeout 45m ./...`. Arguments are
# passed to go test after the defaults (./test.sh -run TestSmoke ./tests/).
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

if [ "$#" -eq 0 ]; then
  set -- ./...
fi
exec go test -count=1 -timeout 45m "$@"
