#!/usr/bin/env bash
# Checks that the top-level modules of src/ import each other without circles: from every
# `crate::<module>` path outside test code it draws the graph of the modules under src/ (lib.rs
# and main.rs are the wiring, src/fuzz/ only tests) and fails naming each circle. Needs bash and
# python3 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 - <<'PY'
import os
import re
import sys

WIRING = {"lib", "main", "fuzz"}
# Test code may reach anywhere: drop `#[cfg(test)]` modules and the files they live in.
TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", re.S)

imports = {}
for root, _, files in os.walk("src"):
    for name in files:
        if not name.endswith(".rs") or name == "tests.rs":
            continue
        path = os.path.join(root, name)
        parts = os.path.relpath(path, "src").split(os.sep)
        module = parts[0][:-3] if len(parts) == 1 else parts[0]
        if module in WIRING:
            continue
        with open(path, encoding="utf-8") as f:
            text = TEST_MODULE.sub("", f.read())
        used = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text)) - {module}
        imports.setdefault(module, set()).update(used)

# Tarjan's strongly connected components: a component of more than one module is a circle.
index, low, stack, on_stack, circles = {}, {}, [], set(), []


def visit(module):
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for other in sorted(imports.get(module, ())):
        if other not in index:
            visit(other)
            low[module] = min(low[module], low[other])
        elif other in on_stack:
            low[module] = min(low[module], index[other])
    if low[module] == index[module]:
        component = []
        while True:
            other = stack.pop()
            on_stack.discard(other)
            component.append(other)
            if other == module:
                break
        if len(component) > 1:
            circles.append(sorted(component))


for module in sorted(imports):
    if module not in index:
        visit(module)
for circle in circles:
    print("modules importing each other: " + ", ".join(circle), file=sys.stderr)
if circles:
    sys.exit(1)
print(f"check-layers: {len(imports)} modules, no circles")
PY
