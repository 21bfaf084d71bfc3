#!/usr/bin/env bash
# A fresh, non-editable `pip install .` in a throwaway venv, used from outside the checkout:
# the `actorlog` command works, and actorlog.testing, actorlog.web (with its templates and
# static files), actorlog.benchmarks and py.typed are in the installed package.
# Used by .ci/run; needs network to PyPI (or a warm uv cache).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d /tmp/actorlog-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

python3 -m uv venv -q -p "$(command -v python3)" "$tmp/venv"
python3 -m uv pip install -q -p "$tmp/venv/bin/python" --reinstall-package actorlog "$root[web]"
cd "$tmp"   # nothing of the checkout is importable from here

venv/bin/actorlog --help | grep -q "usage: actorlog"
# without the testing extra: actorlog.testing imports (replay works), and the contract kit
# says what to install
venv/bin/python -c "import actorlog.testing; assert callable(actorlog.testing.replay)"
if ! venv/bin/python -c "import pytest" 2>/dev/null; then
  if venv/bin/python -c "from actorlog.testing import StoreContract" 2>err.txt; then
    echo "the contract kit imported without pytest?" >&2; exit 1
  fi
  grep -q "pip install 'actorlog\[testing\]'" err.txt
fi
python3 -m uv pip install -q -p "$tmp/venv/bin/python" "$root[web,testing]"
venv/bin/python - <<'PY'
import importlib.resources as res

import actorlog
import actorlog.benchmarks
import actorlog.errors
import actorlog.ops
import actorlog.testing
import actorlog.web
from actorlog.web import create_app

assert "site-packages" in actorlog.__file__, actorlog.__file__  # the wheel, not the checkout
web = res.files("actorlog.web")
templates = [p.name for p in (web / "templates").iterdir()]
assert any(n.endswith(".html") for n in templates), templates
assert any(True for _ in (web / "static").iterdir()), "actorlog.web static files missing"
assert (res.files("actorlog") / "py.typed").is_file(), "py.typed missing"
assert actorlog.testing.__all__
print("installed package: ok (templates: %d)" % len(templates))
PY
# the README's crash example, run against the installed package
cp "$root/examples/crash_resume.py" .
venv/bin/python crash_resume.py | tee crash.out | tail -n 1
grep -q "exactly once: yes" crash.out
venv/bin/actorlog actors sqlite:///"$(ls *.db | head -n 1)" >/dev/null 2>&1 || true
# the benchmarks from the installed package: a report in --out; --write-docs refuses
venv/bin/python -m actorlog.benchmarks raw_sqlite --quick --seconds 0.05 --out bench >/dev/null
test -f bench/raw_sqlite.md
if venv/bin/python -m actorlog.benchmarks raw_sqlite --quick --write-docs >/dev/null 2>err.txt; then
  echo "--write-docs should refuse in an installed copy" >&2; exit 1
fi
grep -q "installed copy" err.txt
echo "fresh install: ok"
