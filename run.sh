#!/usr/bin/env bash
# One entry point for a fresh machine: creates .venv, installs the package, then
#   bash run.sh demo   -> runs `gandalf demo` on the embedded dataset
#   bash run.sh test   -> checks the style (ruff), runs the test suite, then again for the core package
#                         at its lowest versions
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
    # byte-compiled as a regular install leaves it (an editable one does not; see docs/decisions.md)
    .venv/bin/python -m compileall -q src/gandalf_xmc >/dev/null
    rm -f .venv/.installed-*; touch "$stamp"
fi
cmd=${1:-demo}; shift || true
case "$cmd" in
    test)
        if [ $# -eq 0 ]; then
            .venv/bin/ruff check --quiet src tests benchmarks  # the style rules of pyproject.toml, first: seconds
        fi
        .venv/bin/python -m pytest "$@"
        if [ $# -eq 0 ]; then
            # Then the core package alone (no extras) at the lowest versions its ranges allow, on the
            # oldest Python found, in .venv-core: the tests of the extras skip there.
            if [ ! -x .venv-core/bin/python ]; then
                for py in ${PYTHON_CORE:-} python3.10 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.10*/bin/python3.10 "$PY"; do
                    if "$py" -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then
                        "$py" -m venv .venv-core && break
                    fi
                done
            fi
            core_stamp=.venv-core/.installed-$(cat pyproject.toml constraints-lowest.txt | sha1sum | cut -c1-12)
            if [ ! -f "$core_stamp" ]; then
                .venv-core/bin/pip install --quiet --disable-pip-version-check -c constraints-lowest.txt -e . pytest
                rm -f .venv-core/.installed-*; touch "$core_stamp"
            fi
            echo "core package, lowest versions: $(.venv-core/bin/python -c 'import sys, numpy, scipy; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}")')"
            .venv-core/bin/python -m pytest
        fi ;;
    *)    exec .venv/bin/gandalf "$cmd" "$@" ;;
esac
