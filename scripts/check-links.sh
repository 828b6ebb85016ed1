#!/usr/bin/env bash
# Checks the documentation's references, offline: every relative Markdown link in README.md and
# docs/*.md must name an existing file, and a `file.md#anchor` (or `#anchor`) link a heading of
# that file (GitHub's slugs: lowercase, spaces to '-', punctuation other than '-' and '_'
# dropped, repeats numbered -1, -2, …). Repository paths named in backticks (`src/…`,
# `tests/…`, `helm/…`, `loadtest/…`, `scripts/…`, `deploy/…`, `benches/…`, `build/…`) must exist
# too. Exits non-zero naming each broken reference. Needs bash and python3 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 - README.md docs/*.md <<'PY'
import os
import re
import sys
import unicodedata

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target "title") — the target may be <…>; images too.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^()\s]+(?:\([^()\s]*\))?)(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
REPO_PATH = re.compile(r"^(?:src|tests|helm|loadtest|scripts|deploy|benches|build)/[\w./-]*$")
# Made by ./scripts/test.sh, not part of the repository.
GENERATED = ("tests/sdk/node_modules",)


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = text.strip().lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -" or cat[0] in "LMN" or cat == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def lines_outside_fences(path):
    with open(path, encoding="utf-8") as f:
        fenced = False
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            yield number, line, fenced


anchors_of = {}


def anchors(path):
    if path not in anchors_of:
        seen = {}
        found = set()
        for _, line, fenced in lines_outside_fences(path):
            m = None if fenced else HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        anchors_of[path] = found
    return anchors_of[path]


problems = []
for doc in sys.argv[1:]:
    if not os.path.isfile(doc):
        continue
    here = os.path.dirname(doc)
    for number, line, fenced in lines_outside_fences(doc):
        if fenced:
            continue
        where = f"{doc}:{number}"
        for code in INLINE_CODE.finditer(line):
            text = code.group(2).strip()
            first = text.split()[0] if text.split() else ""
            if REPO_PATH.match(first) and not first.startswith(GENERATED) and not os.path.exists(first.rstrip("/") or first):
                problems.append(f"{where}: `{first}` names no file or directory of the repository")
        prose = INLINE_CODE.sub("", line)
        targets = [m.group(1) for m in LINK.finditer(prose)]
        ref = REFDEF.match(prose)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            target = target.strip("<>")
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            if file_part:
                resolved = os.path.normpath(os.path.join(here, file_part))
                if not os.path.exists(resolved):
                    problems.append(f"{where}: ({target}): {resolved} does not exist")
                    continue
            else:
                resolved = doc
            if anchor:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append(f"{where}: ({target}): an anchor into a file that is not Markdown")
                elif anchor not in anchors(resolved):
                    problems.append(f"{where}: ({target}): {resolved} has no heading '#{anchor}'")

for problem in problems:
    print(problem, file=sys.stderr)
if problems:
    print(f"# {len(problems)} broken reference(s) in the documentation", file=sys.stderr)
    sys.exit(1)
print("# documentation links: all resolve", file=sys.stderr)
PY
