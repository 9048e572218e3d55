#!/usr/bin/env bash
# Mutation test of one target: mutmut plants one small bug at a time in a copy of the package and runs the
# tests that cover it. A surviving mutant is a bug no test notices. Scores and survivors: docs/mutation.md.
# Usage: bash scripts/mutation.sh [TARGET] [max-children] [mutant-glob ...]
#   TARGET: `core` (default: the modules in [tool.mutmut] only_mutate) or a table of
#           [tool.mcp-stateless.mutation] in pyproject.toml (e.g. auth, audit-checks, legacy), which names
#           the modules to mutate and the tests that may kill them.
#   max-children: default 1 (the machine is shared; runs at low priority)
#   mutant-glob: run only the mutants whose names match (fnmatch), e.g. 'mcp_stateless.auth.bearer.*'
# The run happens in a scratch copy of the tracked files (uncommitted edits included), so the checkout stays
# usable and several targets can run side by side; the results land in mutants/results-TARGET.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
target="${1:-core}"
shift || true
children="${1:-1}"
shift || true
# mutmut runs as a module of the venv's Python, so it may also come from PYTHONPATH (a --target install beside
# a shared venv) instead of being installed into it.
mutmut=("$root/.venv/bin/python" -m mutmut)
"${mutmut[@]}" --version >/dev/null 2>&1 || .venv/bin/pip install -q -e '.[dev,mutation]'

work=$(mktemp -d "/tmp/mutation-$target.XXXXXX")
# MUTATION_KEEP=1 keeps the scratch copy (its path is printed), so `mutmut show NAME` can be run in it.
if [ -n "${MUTATION_KEEP:-}" ]; then echo "scratch copy kept: $work"; else trap 'rm -rf "$work"' EXIT; fi
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - 2>/dev/null | tar -xf - -C "$work"
# What the tests find beside the package (the venvs, Node and its packages): shared, not copied.
for d in .venv .cache tools/node/node_modules; do
    if [ -e "$d" ]; then
        mkdir -p "$work/$(dirname "$d")" "$work/mutants/$(dirname "$d")"
        ln -s "$root/$d" "$work/$d"
        ln -s "$root/$d" "$work/mutants/$d"
    fi
done
.venv/bin/python - "$target" "$work/pyproject.toml" <<'EOF'
"""Make TARGET's table the [tool.mutmut] configuration of the scratch copy."""
import json
import re
import sys
import tomllib
from pathlib import Path

target, path = sys.argv[1], Path(sys.argv[2])
text = path.read_text()
config = tomllib.loads(text)
if target != "core":
    targets = config["tool"]["mcp-stateless"]["mutation"]
    if target not in targets:
        sys.exit(f"unknown target {target!r}: one of core, {', '.join(sorted(targets))}")
    chosen = targets[target]
    table = dict(config["tool"]["mutmut"])
    table["only_mutate"] = chosen["only_mutate"]
    table["pytest_add_cli_args_test_selection"] = chosen["tests"]
    if "timeout_multiplier" in chosen:  # mutmut's wall bound per mutant: (tests' time + 1 s) x this
        table["timeout_multiplier"] = chosen["timeout_multiplier"]
    body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[)", lambda _: "[tool.mutmut]\n" + body + "\n", text)
    path.write_text(text)
EOF
cd "$work"
# mutmut's own sys.path juggling imports the mutated copy (mutants/src first), not the editable install.
nice -n 10 timeout "${MUTATION_TIMEOUT:-3600}" "${mutmut[@]}" run --max-children "$children" "$@" || true
mkdir -p "$root/mutants"
# Without globs every mutant is listed; with globs only those run (the rest show as "not checked").
"${mutmut[@]}" results --all true | grep -v ': not checked' | tee "$root/mutants/results-$target.txt"
killed=$(grep -c ': killed' "$root/mutants/results-$target.txt" || true)
total=$(grep -c ': ' "$root/mutants/results-$target.txt" || true)
echo "score ($target): ${killed}/${total} killed"
# Per module: killed / mutants.
sed -E 's/^ *([^:]*)\.x(_|ǁ).*: (.*)$/\1 \3/' "$root/mutants/results-$target.txt" |
    awk '{n[$1]++; if ($2 == "killed") k[$1]++} END {for (m in n) printf "  %s %d / %d\n", m, k[m], n[m]}' | sort
