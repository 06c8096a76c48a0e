"""reproduce under faults: malformed results, full or read-only disks, file
modes, leftovers of killed runs, concurrent processes, killed parents."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from fltheory.cli import main
from fltheory.errors import OutputDirectoryError, SourcesChangedError
from fltheory.reproduce import discover, load_experiment, reproduce
from fltheory.reproduce.runner import _require_keyed_sources

from ..experiments.fake_package import good, make_package

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def slow(name: str, seconds: float, log: str | None = None) -> str:
    """A good experiment whose run sleeps ``seconds`` and appends its name to ``log``."""
    body = f"    time.sleep({seconds})\n"
    if log:
        body += f"    with open({log!r}, 'a') as fh:\n        fh.write('{name}\\n')\n"
    return "import time\n" + good(name).replace("def run(config, rng):\n", "def run(config, rng):\n" + body)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith((".tmp", ".lock")))


# --------------------------------------------------------------------------- malformed results

CORRUPTIONS = [
    (lambda doc: {**doc, "macros": []}, "'macros' must be an object"),
    (lambda doc: {**doc, "checks": [{k: v for k, v in doc["checks"][0].items() if k != "status"}]},
     "'checks[0].status' must be one of"),
    (lambda doc: "not json {", "not valid JSON"),
]


def test_one_malformed_result_makes_only_itself_stale(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha"), "beta": good("beta")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    path = out / "alpha.json"
    good_text = path.read_text()
    for corrupt, field in CORRUPTIONS:
        bad = corrupt(json.loads(good_text))
        path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        capsys.readouterr()
        assert main(["--package", pkg, "list", "--out", str(out)]) == 0
        lines: dict[str, str] = {}          # one entry per experiment (continuation lines indented)
        name = ""
        for ln in capsys.readouterr().out.splitlines()[1:]:
            if ln and not ln[0].isspace():
                name = ln.split()[0]
                lines[name] = ln
            elif name:
                lines[name] += " " + ln.strip()
        assert "quick: unreadable result (stale: " in lines["alpha"] and str(path) in lines["alpha"]
        assert field in lines["alpha"]
        assert "stale" not in lines["beta"]
        assert main(["--package", pkg, "show", "alpha", "--out", str(out)]) == 1
        text = capsys.readouterr().out
        assert "alpha: unreadable result, treated as stale" in text and field in text
        assert main(["--package", pkg, "show", "beta", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "beta", "--out", str(out), "--force"]) == 0
    assert "unreadable result" in (out / "SUMMARY.md").read_text()
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "beta: up to date" in text and "alpha: up to date" not in text
    assert json.loads(path.read_text())["macros"]


# --------------------------------------------------------------------------- modes and leftovers

@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_outputs_get_the_usual_mode(root, umask, mode):
    pkg = make_package(root, {"alpha": good("alpha")})
    old = os.umask(umask)
    try:
        reproduce(discover(pkg), root / "figs", show_progress=False)
    finally:
        os.umask(old)
    files = [p for p in (root / "figs").iterdir() if p.is_file()]
    assert {p.name for p in files} == {"alpha.json", "alpha.pdf", "alpha.png", "macros.tex", "SUMMARY.md"}
    assert {p.name: p.stat().st_mode & 0o777 for p in files} == {p.name: mode for p in files}


def test_the_next_run_removes_temporary_files_of_an_interrupted_one(root):
    pkg = make_package(root, {"alpha": good("alpha"), "beta": good("beta")})
    out = root / "figs"
    reproduce(discover(pkg), out, show_progress=False)
    stray = [".alpha.json.k2j3.tmp", ".alpha.pdf.x9.tmp", ".beta.4ac1.npz.zz.tmp", ".macros.tex.q1.tmp",
             ".SUMMARY.md.w.tmp"]
    for name in stray:
        (out / name).write_bytes(b"partial")
    keep = out / ".alphabet.json.k.tmp"          # another experiment's name prefix: not ours to remove
    keep.write_bytes(b"x")
    outcomes = reproduce(discover(pkg), out, show_progress=False)
    assert [o.action for o in outcomes] == ["skipped", "skipped"]
    assert not any((out / name).exists() for name in stray)
    assert keep.exists()


# --------------------------------------------------------------------------- disks

def test_full_disk_gives_one_clear_error_and_leaves_files_intact(root, capsys, monkeypatch):
    pkg = make_package(root, {"alpha": good("alpha"), "beta": good("beta")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    before = snapshot(out)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    # the probe passes, every atomic write then fails (as when the disk fills during a run)
    monkeypatch.setattr(tempfile, "mkstemp", full)
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--force"]) == 2
    text = capsys.readouterr().out
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and str(out) in errors[0]
    assert "Traceback" not in text
    assert snapshot(out) == before
    # the probe itself failing (a disk already full) is the same one error
    monkeypatch.setattr(os, "fsync", full)
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--force"]) == 2
    assert "cannot write to" in capsys.readouterr().out
    assert snapshot(out) == before


@contextlib.contextmanager
def read_only(directory: Path):
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(directory)],
                                                        capture_output=True).returncode != 0:
        pytest.skip("running as root without chattr: cannot make a directory read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_read_only_directory(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    before = snapshot(out)
    capsys.readouterr()
    with read_only(out):
        assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0     # nothing to write
        assert "alpha: up to date" in capsys.readouterr().out
        assert main(["--package", pkg, "list", "--out", str(out)]) == 0
        capsys.readouterr()
        assert main(["--package", pkg, "reproduce", "--out", str(out), "--force"]) == 2
        text = capsys.readouterr().out
        assert [ln for ln in text.splitlines() if ln.startswith("error:")] == [
            ln for ln in text.splitlines() if "cannot write to" in ln]
        assert "Traceback" not in text
    assert snapshot(out) == before


def test_out_naming_a_file_is_a_clear_error(root, capsys):
    pkg = make_package(root, {"alpha": good("alpha")})
    (root / "file").write_text("x")
    assert main(["--package", pkg, "reproduce", "--out", str(root / "file")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().out
    with pytest.raises(OutputDirectoryError):
        reproduce(discover(pkg), root / "file", show_progress=False)


# --------------------------------------------------------------------------- processes

def _cli(pkg: str, root: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(ROOT)]), PYTHONUNBUFFERED="1")
    code = "import sys; from fltheory.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, "--package", pkg, "reproduce", *args], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_concurrent_processes_sharing_a_directory_compute_each_experiment_once(root):
    log = root / "computed.log"
    names = ["alpha", "beta", "gamma"]
    pkg = make_package(root, {n: slow(n, 1.0, str(log)) for n in names})
    out = root / "shared"
    procs = [_cli(pkg, root, "--out", str(out)), _cli(pkg, root, "--out", str(out), "--jobs", "2")]
    texts = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], texts
    assert sorted(log.read_text().split()) == names, texts          # each computed exactly once
    for n in names:
        assert json.loads((out / f"{n}.json").read_text())["key"]["mode"] == "quick"
    assert leftovers(out) == []


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(k) for k in (task / "children").read_text().split()}
                todo.extend(kids - found)
                found |= kids
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_workers_die_with_a_killed_parent_and_a_rerun_finishes_cleanly(root, capsys):
    pkg = make_package(root, {"alpha": slow("alpha", 60.0), "beta": slow("beta", 60.0),
                              "gamma": good("gamma")})
    out = root / "figs"
    proc = _cli(pkg, root, "--out", str(out), "--jobs", "2")
    deadline = time.monotonic() + 120
    while len(_descendants(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3.0)                                   # workers import and start sleeping in run()
    workers = _descendants(proc.pid)
    assert len(workers) >= 2
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers), "worker processes outlived their killed parent"
    # the rerun (fast now) computes what is missing and leaves no temporary or lock file
    for name in ("alpha", "beta"):
        (root / pkg / f"{name}.py").write_text(textwrap.dedent(good(name)))
    from ..experiments.fake_package import forget
    forget(root, pkg)
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    assert leftovers(out) == []
    for name in ("alpha", "beta", "gamma"):
        assert json.loads((out / f"{name}.json").read_text())["checks"]


@pytest.mark.parametrize("delay", [0.5, 2.5, 4.5])
def test_kill_at_several_points_then_rerun_redoes_only_what_is_missing(root, capsys, delay):
    names = ["alpha", "beta", "gamma", "delta"]
    pkg = make_package(root, {n: good(n) for n in names})
    out = root / "figs"
    proc = _cli(pkg, root, "--out", str(out))
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    done_before = {n for n in names if (out / f"{n}.json").exists()}
    for n in done_before:                             # whatever is visible under a final name is whole
        assert json.loads((out / f"{n}.json").read_text())["checks"]
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert {n for n in names if f"{n}: up to date" in text} == done_before
    assert leftovers(out) == []


# --------------------------------------------------------------------------- sources edited during a run

def editing(name: str, flag: Path) -> str:
    """A good experiment whose run, while ``flag`` exists, computes another result and appends a
    comment to its own module file (an edit of the sources while the result is computed)."""
    body = (f"    import os\n    if os.path.exists({str(flag)!r}):\n"
            "        config = dict(config, n=config['n'] + 1)       # another result: another figure\n"
            "        with open(__file__, 'a') as fh:\n            fh.write('\\n# edited during the run\\n')\n")
    return good(name).replace("def run(config, rng):\n", "def run(config, rng):\n" + body)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_result_whose_sources_change_during_its_run_is_not_stored(root, capsys, jobs):
    """The key hashes the sources before the run; an edit during it (or a worker importing newer
    files) would store a result under sources that did not produce it: SourcesChangedError, the
    experiment fails, nothing is written (the stored result and its figure stay as they were),
    and a run on settled sources computes it."""
    flag = root / "edit-while-running"
    pkg = make_package(root, {"alpha": editing("alpha", flag), "beta": good("beta")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", jobs]) == 0
    stored = {name: (out / name).read_bytes() for name in ("alpha.json", "alpha.png", "alpha.pdf")}
    capsys.readouterr()
    flag.write_text("")
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", jobs, "--force"]) == 1
    text = capsys.readouterr()
    said = text.out + text.err
    assert "SourcesChangedError" in said and "changed on disk after the result key was computed" in said
    assert f"{pkg}.alpha" in said
    assert {name: (out / name).read_bytes() for name in stored} == stored
    flag.unlink()
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", jobs]) == 0
    assert "alpha: up to date" not in capsys.readouterr().out      # stale: its source changed
    assert (out / "alpha.json").read_bytes() != stored["alpha.json"]


def test_code_imported_before_its_file_changed_runs_in_a_new_process(root, capsys):
    """A long-lived process (a notebook, a second reproduce(jobs=1) call) imports an experiment, then
    its file is edited to compute another result.  The key hashes the new file and the file check
    passes, but this process would run the old code: the job runs in a new worker process instead,
    which computes the new result (the old code would give the stored one again)."""
    pkg = make_package(root, {"alpha": good("alpha")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", "1"]) == 0
    before = (out / "alpha.json").read_bytes()
    old_module = sys.modules[f"{pkg}.alpha"]
    source = root / pkg / "alpha.py"
    edited = source.read_text().replace("def run(config, rng):\n",
                                        "def run(config, rng):\n    config = dict(config, n=config['n'] + 1)\n")
    assert edited != source.read_text()
    source.write_text(edited)
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "--out", str(out), "--jobs", "1"]) == 0
    assert "alpha: up to date" not in capsys.readouterr().out
    assert (out / "alpha.json").read_bytes() != before                  # the new code's result
    assert sys.modules[f"{pkg}.alpha"] is old_module                     # not run here
    exp = load_experiment(f"{pkg}.alpha", str(root))
    key = json.loads((out / "alpha.json").read_text())["key"]
    with pytest.raises(SourcesChangedError, match=f"this process imported {pkg}.alpha before the file changed"):
        _require_keyed_sources(exp, key)                                  # the guard in this process


def test_import_stamps_name_exactly_the_modules_whose_file_changed(tmp_path, monkeypatch):
    """The stamping finder records a module's file as it is imported; changed_since_import names
    it once the file's stamp differs (an edit, or the file removed), and not before; modules not
    imported are not named."""
    import importlib

    from fltheory._import_stamps import changed_since_import
    pkg = f"stamped_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "a.py").write_text("X = 1\n")
    (tmp_path / pkg / "b.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        a = importlib.import_module(f"{pkg}.a")
        names = [pkg, f"{pkg}.a", f"{pkg}.b"]
        assert a.X == 1 and changed_since_import(names) == []
        stat = (tmp_path / pkg / "a.py").stat()
        (tmp_path / pkg / "a.py").write_text("X = 3\n")
        os.utime(tmp_path / pkg / "a.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # coarse clocks
        (tmp_path / pkg / "b.py").write_text("Y = 4\n")                     # b was never imported
        assert changed_since_import(names) == [f"{pkg}.a"]
        importlib.reload(a)                                                  # read again: stamped again
        assert a.X == 3 and changed_since_import(names) == []
        (tmp_path / pkg / "a.py").unlink()
        assert changed_since_import(names) == [f"{pkg}.a"]
    finally:
        for name in [n for n in sys.modules if n == pkg or n.startswith(pkg + ".")]:
            del sys.modules[name]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 no longer asks find_module")
def test_import_stamps_keep_a_legacy_find_module_hook_first(tmp_path, monkeypatch):
    """A finder with only the legacy find_module, placed before the path finder, still answers
    before Python 3.12 with the stamping finder installed in front of it."""
    import importlib
    import importlib.machinery

    name = f"legacy_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text("WHERE = 'path'\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class Loader:
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.WHERE = "legacy hook"

    class Legacy:
        def find_module(self, fullname, path=None):
            return Loader() if fullname == name else None

    position = sys.meta_path.index(importlib.machinery.PathFinder)
    monkeypatch.setattr(sys, "meta_path", sys.meta_path[:position] + [Legacy()] + sys.meta_path[position:])
    try:
        assert importlib.import_module(name).WHERE == "legacy hook"
    finally:
        sys.modules.pop(name, None)


def test_bundled_experiments_package_is_stamped_when_loaded_from_its_file(monkeypatch):
    """The bundled fltheory_experiments package is loaded with spec_from_file_location (past the
    finders); it is stamped all the same, so an edit of its __init__.py is seen."""
    from fltheory import _import_stamps
    from fltheory.reproduce import discovery

    folder = discovery.bundled_experiments_dir()
    if folder is None:
        pytest.skip("a regular install: the package is imported through the finders")
    monkeypatch.delitem(sys.modules, discovery.DEFAULT_PACKAGE, raising=False)
    monkeypatch.delitem(_import_stamps._STAMPS, discovery.DEFAULT_PACKAGE, raising=False)
    discovery._load_bundled()
    path, stamp = _import_stamps._STAMPS[discovery.DEFAULT_PACKAGE]
    assert path == str(folder / "__init__.py") and stamp == _import_stamps._stamp(path)


def test_an_up_to_date_result_clears_the_error_log_of_an_attempt_at_other_sources(root, capsys):
    """A failed attempt (other sources, since restored) leaves NAME.error.log beside the stored
    result; reproduce finds that result up to date and skips it, so the log no longer describes
    it: it is removed, and the status reads the result instead of "failed"."""
    from fltheory.reproduce.status import experiment_status
    pkg = make_package(root, {"alpha": good("alpha")})
    out = root / "figs"
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    (out / "alpha.error.log").write_text("Traceback: a failed attempt at other sources\n")
    exp = load_experiment(f"{pkg}.alpha", str(root))
    assert experiment_status(out, exp, "quick").status.startswith("failed")
    capsys.readouterr()
    assert main(["--package", pkg, "reproduce", "--out", str(out)]) == 0
    assert "alpha: up to date" in capsys.readouterr().out
    assert not (out / "alpha.error.log").exists()
    assert not experiment_status(out, exp, "quick").status.startswith("failed")


def test_bytecode_older_than_a_same_second_edit_of_its_source_counts_as_a_change(tmp_path):
    """Python loads a cached .pyc whose header has the source's whole-second mtime and size: an edit
    in the same second that keeps the length leaves the old code running under the new file's hash.
    Such a module is reported as changed, so no result of it is stored."""
    import importlib.util
    src = tmp_path / "samesecond.py"
    src.write_text("VALUE = 0.5\n")
    start = (int(time.time()) - 10) * 10**9 + 100_000_000
    os.utime(src, ns=(start, start))
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        sys.dont_write_bytecode = False
        import fltheory._import_stamps as stamps
        import fltheory
        import samesecond
        print(samesecond.VALUE, stamps.changed_since_import(["samesecond"]))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    run = lambda: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                 check=True).stdout.split()
    assert run() == ["0.5", "[]"]
    pyc = importlib.util.cache_from_source(str(src))
    os.utime(pyc, ns=(start + 400_000_000,) * 2)                  # compiled 0.4 s after the write
    src.write_text("VALUE = 0.6\n")
    os.utime(src, ns=(start + 800_000_000,) * 2)                  # edited in that second, same length
    assert run() == ["0.5", "['samesecond']"]                     # the old code ran: reported
