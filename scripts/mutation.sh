#!/usr/bin/env bash
# Mutation test of the critical core (the modules in [tool.mutmut] only_mutate, pyproject.toml):
# mutmut copies the package into mutants/, plants one small bug at a time and runs the selected tests.
# A surviving mutant is a bug no test notices. Results, the score and every survivor: docs/mutation.md.
# Usage: bash scripts/mutation.sh [max-children] [mutant-glob ...]
#   max-children: default 1 (the machine is shared; runs at low priority)
#   mutant-glob: run only the mutants whose names match (fnmatch), e.g. 'mcp_stateless.tasks.runtime.*_renew__mutmut_*'
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/mutmut ] || .venv/bin/pip install -q -e '.[dev,mutation]'
rm -rf mutants
# mutmut's own sys.path juggling must import the mutated copy, not the editable install.
children="${1:-1}"
shift || true
nice -n 10 timeout "${MUTATION_TIMEOUT:-3600}" .venv/bin/mutmut run --max-children "$children" "$@"
# Without globs every mutant is listed; with globs only those run (the rest show as "not checked").
.venv/bin/mutmut results --all true | grep -v ': not checked' | tee mutants/results.txt
killed=$(grep -c ': killed' mutants/results.txt || true)
total=$(grep -c ': ' mutants/results.txt || true)
echo "score: ${killed}/${total} killed"
