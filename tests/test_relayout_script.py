"""scripts/relayout.py (issue 27) on a copy of this repository: it is idempotent, and it stops,
changing nothing, when a module is missing from its mapping."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("relayout", ROOT / "scripts" / "relayout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["relayout"] = module
    spec.loader.exec_module(module)
    return module


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The repository's files (as they are now, committed or not) in a fresh git repository."""
    files = _git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard").splitlines()
    dest = tmp_path / "repo"
    for name in files:
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "copy")
    return dest


def test_a_second_run_changes_nothing(copy: Path) -> None:
    """Also after the import sort and the formatting that follow the script's run."""
    relayout = _script()
    relayout.run(copy)
    ruff = str(Path(sys.executable).with_name("ruff"))  # a dev dependency, like in CI
    where = ["runtime", "stores", "tests", "examples", "benchmarks"]
    subprocess.run([ruff, "check", "-q", "--fix", "--select", "I", *where], cwd=copy, check=True)
    subprocess.run([ruff, "format", "-q", "runtime", "stores", "tests"], cwd=copy, check=True)
    _git(copy, "add", "-A")
    _git(
        copy,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "sweep",
    )
    assert relayout.run(copy) == []
    assert _git(copy, "status", "--porcelain") == ""
    assert (copy / "runtime" / "_journal" / "codec.py").is_file()
    assert not (copy / "runtime" / "_codec.py").exists()


def test_an_unmapped_module_stops_the_run_before_any_change(copy: Path) -> None:
    relayout = _script()
    (copy / "runtime" / "_brand_new.py").write_text('"""new."""\n', encoding="utf-8")
    (copy / "tests" / "runtime" / "test_brand_new.py").write_text('"""new."""\n', encoding="utf-8")
    with pytest.raises(relayout.RelayoutError) as caught:
        relayout.run(copy)
    assert "runtime/_brand_new.py" in str(caught.value)
    assert "tests/runtime/test_brand_new.py" in str(caught.value)
    status = _git(copy, "status", "--porcelain").splitlines()
    assert sorted(status) == ["?? runtime/_brand_new.py", "?? tests/runtime/test_brand_new.py"]
