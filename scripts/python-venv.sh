# Sourced by the test scripts: a Python venv under target/ holding pinned requirements, built
# once and again only when the pins change.

# ensure_venv VENV REQUIREMENTS CHECK WHAT: makes sure VENV holds REQUIREMENTS (CHECK is Python
# code that must run in it, e.g. an import); says it installs WHAT; fails (status 1) when it
# cannot (no python3, no network).
ensure_venv() {
  local venv=$1 requirements=$2 check=$3 what=$4
  local stamp="$venv/.flagpole-requirements" want
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && "$venv/bin/python" -c '' 2>/dev/null; then
    return 0
  fi
  command -v python3 >/dev/null 2>&1 || { echo "# python3 not found" >&2; return 1; }
  echo "# installing $what into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || return 1
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --retries 2 --timeout 60 -r "$requirements" >&2 || return 1
  "$venv/bin/python" -c "$check" >&2 || return 1
  echo "$want" >"$stamp"
}
