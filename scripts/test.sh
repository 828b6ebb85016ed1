#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what the tests need (redis-server,
# from Debian's packages, when missing), then runs every unit and end-to-end test, then the
# Helm chart, alert rule and dashboard tests (helm/tests).
# The tests start their own redis-server processes on unix sockets; nothing else is needed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=python-venv.sh
. scripts/python-venv.sh
./scripts/check-links.sh
./scripts/check-layers.sh

if ! command -v redis-server >/dev/null 2>&1; then
  echo "# installing redis-server" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# PostgreSQL 15 for the real Unleash of tests/it/migration.rs (a private cluster under target/).
if ! command -v initdb >/dev/null 2>&1 && [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  echo "# installing postgresql-15" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  (DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql-15 >/dev/null) ||
    echo "# WARNING: could not install postgresql-15: the migration tests will be skipped" >&2
fi

# The real Unleash SDKs for tests/it/sdks.rs: Python's UnleashClient in a venv under target/,
# Node's unleash-client under tests/sdk/node_modules (versions pinned in tests/sdk/). Each is
# installed once and again only when its pins change. When one cannot be installed (no network,
# no python3/node), its variable stays unset and its tests say "skipping" instead of failing.
# FLAGPOLE_SDK_SKIP_INSTALL=1 skips the installs; a variable already set is used as it is.
sdk_warn() {
  echo "# WARNING: $1: the $2 SDK tests will be skipped (tests/it/sdks.rs)" >&2
}

sdk_hash() {
  cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1
}

install_python_sdk() {
  ensure_venv target/sdk-venv tests/sdk/requirements.txt 'import UnleashClient, openfeature.contrib.provider.ofrep' \
    "the Python Unleash SDK"
}

install_node_sdk() {
  local dir=tests/sdk stamp=tests/sdk/node_modules/.flagpole-stamp
  local want
  want="$(sdk_hash tests/sdk/package.json tests/sdk/package-lock.json)"
  if [ -d "$dir/node_modules/unleash-client" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  command -v node >/dev/null 2>&1 || { echo "# node not found" >&2; return 1; }
  command -v npm >/dev/null 2>&1 || { echo "# npm not found" >&2; return 1; }
  echo "# installing the Node Unleash SDK into $dir/node_modules" >&2
  local install=install
  [ -f "$dir/package-lock.json" ] && install=ci
  (cd "$dir" && npm "$install" --no-audit --no-fund --loglevel=error \
    --fetch-retries=1 --fetch-retry-mintimeout=2000 \
    --fetch-retry-maxtimeout=10000 --fetch-timeout=30000 >&2) || return 1
  (cd "$dir" && node -e 'require("unleash-client")') >&2 || return 1
  echo "$want" >"$stamp"
}

# Real unleash-servers (7.5.1, 6.10.1, 5.12.8 and 4.19.5, Apache-2.0, pinned in tests/unleash/,
# tests/unleash-6/, tests/unleash-5/ and tests/unleash-4/) for tests/it/migration.rs, which also needs PostgreSQL 15's initdb and
# postgres. Installed like the Node SDK, without install scripts (one is telemetry); unset:
# those tests say "skipping".
install_unleash_server() {
  local dir=$1 stamp=$1/node_modules/.flagpole-stamp
  local want
  want="$(sdk_hash "$dir/package.json" "$dir/package-lock.json")"
  if [ -d "$dir/node_modules/unleash-server" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  command -v npm >/dev/null 2>&1 || { echo "# npm not found" >&2; return 1; }
  echo "# installing unleash-server into $dir/node_modules" >&2
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error \
    --fetch-retries=1 --fetch-retry-mintimeout=2000 \
    --fetch-retry-maxtimeout=10000 --fetch-timeout=30000 >&2) || return 1
  (cd "$dir" && node -e 'require("unleash-server")') >&2 || return 1
  echo "$want" >"$stamp"
}

if [ "${FLAGPOLE_SDK_SKIP_INSTALL:-}" = 1 ]; then
  echo "# FLAGPOLE_SDK_SKIP_INSTALL=1: not installing the Unleash SDKs" >&2
else
  if [ -z "${FLAGPOLE_SDK_PYTHON:-}" ]; then
    if install_python_sdk; then
      export FLAGPOLE_SDK_PYTHON="$PWD/target/sdk-venv/bin/python"
    else
      sdk_warn "could not install the Python Unleash SDK (tests/sdk/requirements.txt)" Python
    fi
  fi
  if [ -z "${FLAGPOLE_SDK_NODE_DIR:-}" ]; then
    if install_node_sdk; then
      export FLAGPOLE_SDK_NODE_DIR="$PWD/tests/sdk"
    else
      sdk_warn "could not install the Node Unleash SDK (tests/sdk/package.json)" Node
    fi
  fi
  if [ -z "${FLAGPOLE_UNLEASH_DIR:-}" ]; then
    if install_unleash_server tests/unleash; then
      export FLAGPOLE_UNLEASH_DIR="$PWD/tests/unleash"
    else
      echo "# WARNING: could not install unleash-server (tests/unleash/package.json): the migration tests will be skipped (tests/it/migration.rs)" >&2
    fi
  fi
  if [ -z "${FLAGPOLE_UNLEASH6_DIR:-}" ]; then
    if install_unleash_server tests/unleash-6; then
      export FLAGPOLE_UNLEASH6_DIR="$PWD/tests/unleash-6"
    else
      echo "# WARNING: could not install unleash-server 6 (tests/unleash-6/package.json): its migration case will be skipped (tests/it/migration.rs)" >&2
    fi
  fi
  if [ -z "${FLAGPOLE_UNLEASH5_DIR:-}" ]; then
    if install_unleash_server tests/unleash-5; then
      export FLAGPOLE_UNLEASH5_DIR="$PWD/tests/unleash-5"
    else
      echo "# WARNING: could not install unleash-server 5 (tests/unleash-5/package.json): its migration case will be skipped (tests/it/migration.rs)" >&2
    fi
  fi
  if [ -z "${FLAGPOLE_UNLEASH4_DIR:-}" ]; then
    if install_unleash_server tests/unleash-4; then
      export FLAGPOLE_UNLEASH4_DIR="$PWD/tests/unleash-4"
    else
      echo "# WARNING: could not install unleash-server 4 (tests/unleash-4/package.json): its migration case will be skipped (tests/it/migration.rs)" >&2
    fi
  fi
fi

cargo_status=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@" || cargo_status=$?
else
  cargo test --workspace --no-fail-fast "$@" || cargo_status=$?
fi

# ---------------------------------------------------------------------------------------------
# The Helm chart, the alert rules and the dashboard (helm/tests, pytest; about 30 s once the
# venv exists).
# Their venv (target/chart-venv: helm-python-sdk, kubernetes-validate, pytest, PyYAML, pinned in
# helm/tests/requirements.txt) is built once and again only when the pins change; without it
# (no network) these tests are skipped with a warning. promtool comes from Debian's prometheus
# package, unpacked into target/promtool (not installed); without it the two promtool tests say
# "skipped". The tests start the flagpole binary cargo built and their own redis-server.
install_chart_venv() {
  ensure_venv target/chart-venv helm/tests/requirements.txt \
    'import helm_python, kubernetes_validate, pytest, yaml' "the chart test tools"
}

find_promtool() {
  if [ -n "${FLAGPOLE_PROMTOOL:-}" ]; then return 0; fi
  if command -v promtool >/dev/null 2>&1; then
    FLAGPOLE_PROMTOOL="$(command -v promtool)"
  elif [ -x target/promtool/usr/bin/promtool ]; then
    FLAGPOLE_PROMTOOL="$PWD/target/promtool/usr/bin/promtool"
  else
    local tmp
    tmp="$(mktemp -d)"
    echo "# unpacking promtool from Debian's prometheus package into target/promtool" >&2
    if (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1) &&
      dpkg -x "$tmp"/prometheus_*.deb target/promtool &&
      [ -x target/promtool/usr/bin/promtool ]; then
      FLAGPOLE_PROMTOOL="$PWD/target/promtool/usr/bin/promtool"
    fi
    rm -rf "$tmp"
  fi
  [ -n "${FLAGPOLE_PROMTOOL:-}" ] && export FLAGPOLE_PROMTOOL
}

chart_status=0
if install_chart_venv; then
  find_promtool || echo "# WARNING: promtool not available: the promtool tests will be skipped" >&2
  cargo build --quiet --bin flagpole
  FLAGPOLE_BIN="$PWD/target/debug/flagpole" target/chart-venv/bin/python -m pytest \
    -q -p no:cacheprovider helm/tests || chart_status=$?
else
  echo "# WARNING: could not install helm/tests/requirements.txt: the chart, rules and" \
    "dashboard tests (helm/tests) are skipped" >&2
fi
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# The admin UI in a real browser (tests/ui, pytest + Playwright driving Debian's Chromium; no
# browser download). The venv (target/ui-venv, pinned in tests/ui/requirements.txt) is built
# once and again only when the pins change; Chromium comes from Debian's package as
# redis-server does. Without either (no network), these tests are skipped with a warning.
# Screenshots of every page: target/ui-screenshots/.
install_ui_venv() {
  ensure_venv target/ui-venv tests/ui/requirements.txt 'import playwright, pytest' \
    "the admin UI's browser test tools"
}

find_chromium() {
  if [ -n "${FLAGPOLE_CHROMIUM:-}" ]; then return 0; fi
  if ! command -v chromium >/dev/null 2>&1; then
    echo "# installing chromium (Debian's package) for the admin UI's browser tests" >&2
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    { $SUDO apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        chromium fonts-dejavu-core >/dev/null; } || return 1
  fi
  FLAGPOLE_CHROMIUM="$(command -v chromium)" && export FLAGPOLE_CHROMIUM
}

ui_status=0
if install_ui_venv && find_chromium; then
  cargo build --quiet --bin flagpole
  FLAGPOLE_BIN="$PWD/target/debug/flagpole" target/ui-venv/bin/python -m pytest \
    -q -p no:cacheprovider tests/ui || ui_status=$?
else
  echo "# WARNING: skipping the admin UI's browser tests (tests/ui): could not install" \
    "tests/ui/requirements.txt or Debian's chromium" >&2
fi
# ---------------------------------------------------------------------------------------------

# The HTTP API fuzzed by schemathesis against the real binary (bounded; see the script).
fuzz_status=0
./scripts/fuzz-api.sh || fuzz_status=$?

[ "$cargo_status" = 0 ] || exit "$cargo_status"
[ "$chart_status" = 0 ] || exit "$chart_status"
[ "$ui_status" = 0 ] || exit "$ui_status"
exit "$fuzz_status"
