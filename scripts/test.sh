#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what the tests need (redis-server,
# from Debian's packages, when missing), then runs every unit and end-to-end test.
# The tests start their own redis-server processes on unix sockets; nothing else is needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "# installing redis-server" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
