#!/usr/bin/env bash
# One entry point for a fresh machine: creates .venv, installs the package, then
#   bash run.sh demo   -> runs `gandalf demo` on the embedded dataset
#   bash run.sh test   -> checks the style (ruff lint and format) and types (mypy), runs the test suite,
#                         then again for the core package at its lowest versions
#   bash run.sh <any gandalf sub-command and options>
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
cmd=${1:-demo}; shift || true
# What the command needs: the demo runs the core package; `test` everything and the test tools;
# any other command every extra (a model or the server may need one).
case "$cmd" in
    demo) level=core; spec='.' ; what="the core package (the demo needs no extra)" ;;
    test) level=test; spec='.[test]'; what="every extra (PyTorch, the encoder, the server, Dask, plots) and the test tools" ;;
    *)    level=all;  spec='.[all]';  what="every extra (PyTorch, the encoder, the server, Dask, plots)" ;;
esac
if [ ! -x .venv/bin/python ]; then
    echo "run.sh: creating .venv with $("$PY" --version)" >&2
    "$PY" -m venv .venv
fi
sha=$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
# a level's stamp also stands for the levels below it (test > all > core)
case "$level" in
    core) wanted="core all test" ;;
    all)  wanted="all test" ;;
    test) wanted="test" ;;
esac
installed=no
for l in $wanted; do
    if [ -f ".venv/.installed-$l-$sha" ]; then installed=yes; fi
done
if [ "$installed" = no ]; then
    echo "run.sh: installing $what into .venv, at the versions of constraints.txt (once; pip is quiet for a minute or more) ..." >&2
    .venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e "$spec"
    # byte-compiled as a regular install leaves it (an editable one does not; see docs/decisions.md)
    .venv/bin/python -m compileall -q src/gandalf_xmc >/dev/null
    find .venv -maxdepth 1 -name '.installed-*' ! -name "*-$sha" -delete
    touch ".venv/.installed-$level-$sha"
    echo "run.sh: installed" >&2
fi
case "$cmd" in
    test)
        if [ $# -eq 0 ]; then
            .venv/bin/ruff check --quiet src tests benchmarks  # the style rules of pyproject.toml, first: seconds
            .venv/bin/ruff format --check --quiet src tests benchmarks  # the one formatter (ruff format)
            .venv/bin/mypy  # a mild type check of src (pyproject.toml's [tool.mypy])
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
