"""The bundled experiments are found under the name fltheory_experiments, and
a user's own ``experiments`` package (on sys.path or as the working directory)
cannot shadow them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fltheory.reproduce import DEFAULT_PACKAGE, bundled_experiments_dir, discover

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted(p.stem for p in (ROOT / "experiments").glob("[!_]*.py"))


def _decoy(tmp_path: Path) -> Path:
    """A project folder with an ``experiments`` package of its own that fails on import."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("raise ImportError('the decoy was imported')\n")
    (tmp_path / "experiments" / "_framework.py").write_text("X = 1\n")
    return tmp_path


def test_bundled_folder_is_the_checkouts_experiments_folder():
    assert bundled_experiments_dir() == ROOT / "experiments"


def test_discover_loads_every_bundled_module_under_the_unshadowable_name():
    exps = discover()
    assert [e.name for e in exps] == BUNDLED
    assert all(e.module_name == f"{DEFAULT_PACKAGE}.{e.name}" for e in exps)
    assert all(e.source_file == ROOT / "experiments" / f"{e.name}.py" for e in exps)


def test_a_decoy_experiments_package_on_sys_path_and_as_cwd_does_not_shadow(tmp_path):
    decoy = _decoy(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(decoy), str(ROOT)]))
    env.pop("FLTHEORY_EXPERIMENTS", None)
    code = ("import sys; sys.path.insert(0, ''); "
            "from fltheory.cli import main; sys.exit(main(['list', '--out', 'nowhere']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=decoy, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"registry ({DEFAULT_PACKAGE}): {len(BUNDLED)} experiment(s)" in done.stdout
    for name in BUNDLED:
        assert name in done.stdout
    assert "decoy" not in done.stdout + done.stderr
