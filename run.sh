#!/usr/bin/env bash
# One entry point for a fresh machine: creates .venv, installs the package, then
#   bash run.sh demo   -> runs `gandalf demo` on the embedded dataset
#   bash run.sh test   -> runs the test suite
#   bash run.sh <any gandalf sub-command and options>
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
    rm -f .venv/.installed-*; touch "$stamp"
fi
cmd=${1:-demo}; shift || true
case "$cmd" in
    test) exec .venv/bin/python -m pytest "$@" ;;
    *)    exec .venv/bin/gandalf "$cmd" "$@" ;;
esac
