"""Fold fits spread over worker processes: the same artifacts as in one process, errors
reported as raised, each worker with its share of the threads."""

from __future__ import annotations

import pytest

from ltr_toolkit.data.svmlight import load_svmlight
from ltr_toolkit.errors import InputError, UserError
from ltr_toolkit.pipeline import parallel
from ltr_toolkit.pipeline.crossval import _fit_fold


def _threads(_shared, name):
    import os
    from ltr_toolkit.models.trees import default_threads
    return os.environ.get(name), default_threads()


def _fails(_shared, line):
    if line == 7:
        raise InputError("judgments.txt", line, "a bad grade")
    return line


def test_fold_fits_in_workers_equal_the_fits_in_one_process(mslr_paths):
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(24)))
    keep = [frozenset(ds.qids[i] for i in range(24) if i % 3 != f) for f in range(3)]
    tasks = [(algo, f, keep[f], 10, 42 + f, None, "mslr", 0)
             for algo in ("lambdamart", "linear") for f in range(3)]
    seen = []
    here = parallel.run_all(_fit_fold, tasks, jobs=1, shared=ds)
    there = parallel.run_all(_fit_fold, tasks, jobs=2, shared=ds,
                             on_done=lambda i, r, p: seen.append((i, p["done"], p["total"])))
    def same(art):      # all but the clock: when it was made, how long epochs took
        out = {k: v for k, v in art.items() if k != "created"}
        out["history"] = [{k: v for k, v in h.items() if k != "seconds"}
                          for h in art.get("history", [])]
        return out
    assert [same(a) for a, *_ in here] == [same(a) for a, *_ in there]
    assert sorted(i for i, _, _ in seen) == list(range(len(tasks)))
    assert [d for _, d, _ in seen] == list(range(1, len(tasks) + 1))


def _started(_shared, i):
    import time
    return time.time()


def test_each_task_starts_once_its_ready_returned():
    """``ready(i)`` runs here, in order, before task i is handed out, and may hold it back
    (here task 2, for a second) while the other worker goes on."""
    import time
    calls = []

    def ready(i):
        if i == 2:
            time.sleep(1.0)
        calls.append((i, time.time()))

    started = parallel.run_all(_started, [(i,) for i in range(4)], jobs=2, ready=ready)
    assert [i for i, _ in calls] == [0, 1, 2, 3]
    assert all(started[i] >= at for i, at in calls)


def test_workers_get_their_share_of_the_cores_and_the_parent_keeps_its_own(monkeypatch):
    monkeypatch.delenv("LTR_THREADS", raising=False)
    monkeypatch.setattr(parallel, "cores", lambda: 4)
    got = parallel.run_all(_threads, [("OPENBLAS_NUM_THREADS",), ("LTR_THREADS",)], jobs=2)
    assert got == [("2", 2), ("2", 2)]
    import os
    assert "LTR_THREADS" not in os.environ


def test_an_error_in_a_worker_reaches_the_caller_as_raised():
    with pytest.raises(InputError, match=r"judgments.txt:7: a bad grade") as err:
        parallel.run_all(_fails, [(7,), (8,)], jobs=2)
    assert err.value.exit_code == 2


def test_jobs_follow_the_setting_the_cores_and_the_memory(monkeypatch):
    monkeypatch.delenv("LTR_JOBS", raising=False)
    monkeypatch.setattr(parallel, "cores", lambda: 8)
    monkeypatch.setattr(parallel, "available_memory", lambda: 10 * 2**30)
    assert parallel.default_jobs(15, 1 << 20) == 8
    assert parallel.default_jobs(3, 1 << 20) == 3
    assert parallel.default_jobs(15, 2**30) == 1        # 12 GiB a copy: one at a time
    monkeypatch.setenv("LTR_JOBS", "3")
    assert parallel.default_jobs(15, 2**30) == 3


def test_a_script_without_a_main_guard_runs_its_fits_once(tmp_path):
    """Spawned workers do not import the user's script again: its top-level code (here a
    script with no ``if __name__ == "__main__":``) runs once, and the fits finish (every
    worker died at start before); a script read from standard input works too."""
    import subprocess
    import sys
    script = ("from ltr_toolkit.pipeline.parallel import run_all\n"
              "print('top-level runs', flush=True)\n"
              "print(run_all(print, [('a',), ('b',)], jobs=2))\n")
    path = tmp_path / "unguarded.py"
    path.write_text(script)
    for args, stdin in (([str(path)], None), (["-"], script)):
        r = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("top-level runs") == 1
        assert "[None, None]" in r.stdout


def _slow_or_fast(_shared, what, pid_file):
    """``slow``: note this worker's pid, then run for 30 s; ``fast``/``fails``: wait for
    the slow fit to be running, then return (or raise)."""
    import os
    import time
    from pathlib import Path
    if what == "slow":
        Path(pid_file).write_text(str(os.getpid()))
        time.sleep(30)
        return what
    deadline = time.monotonic() + 60
    while not Path(pid_file).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if what == "fails":
        raise InputError("judgments.txt", 3, "a bad grade")
    return what


@pytest.mark.parametrize("cause", ["callback", "worker"])
def test_an_error_stops_the_running_fits_at_once(tmp_path, capfd, cause):
    """An error in the parent's work on a finished fit (its upload or rerank), or in
    another fit, while a 30 s fit runs: the call ends within seconds (it waited for the
    long fit before), the long fit's worker process is gone, and one line says so."""
    import os
    import time
    pid_file = tmp_path / "slow.pid"
    raised_at = []

    def done(i, result, progress):
        if cause == "callback":
            raised_at.append(time.time())
            raise UserError("the cluster refused the upload")

    tasks = [("slow", str(pid_file)), ("fails" if cause == "worker" else "fast", str(pid_file))]
    tasks += [("fast", str(pid_file))] * 3
    with pytest.raises(UserError if cause == "callback" else InputError):
        parallel.run_all(_slow_or_fast, tasks, jobs=2, on_done=done)
    # the worker's error came right after the slow fit started
    seconds = time.time() - (raised_at[0] if raised_at else pid_file.stat().st_mtime)
    assert seconds < 10, f"{seconds:.1f}s after the error: it waited for the running fit"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "parallel fits" in ln]
    assert len(lines) == 1 and "stopped" in lines[0] and "worker processes terminated" in lines[0], lines


def test_ctrl_c_stops_the_running_fits_at_once(tmp_path):
    """Ctrl-C (SIGINT to the process, as a terminal sends it) while a 30 s fit runs, in a
    process of its own as a user's command is: KeyboardInterrupt within seconds, the long
    fit's worker process gone, and one line says so."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path
    pid_file = tmp_path / "slow.pid"
    script = tmp_path / "ctrl_c.py"
    script.write_text(
        "import signal, sys\n"
        # Ctrl-C's default, as in a terminal: a shell's background job (a CI runner's,
        # say) starts with SIGINT ignored, and Python then keeps it ignored
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_parallel import _slow_or_fast\n"
        "from ltr_toolkit.pipeline import parallel\n"
        f"tasks = [('slow', {str(pid_file)!r})] + [('fast', {str(pid_file)!r})] * 4\n"
        "try:\n"
        "    parallel.run_all(_slow_or_fast, tasks, jobs=2)\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt', flush=True)\n"
        "    sys.exit(130)\n"
        "print('finished', flush=True)\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 10, "it waited for the running fit"
    assert proc.returncode == 130 and "KeyboardInterrupt" in out, (out, err)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    lines = [ln for ln in err.splitlines() if "parallel fits" in ln]
    assert len(lines) == 1 and "stopped on Ctrl-C" in lines[0], err


def _reports_halfway(_shared, seconds, before=0.0):
    import time
    time.sleep(before)
    parallel.report(1, 2)
    time.sleep(seconds)
    return seconds


def test_a_long_silence_ticks_with_the_share_the_running_tasks_report(monkeypatch):
    """No fit ends for longer than the heartbeat: ``on_tick`` hears where the work stands,
    the running tasks' reported halves counted, with an ETA at that pace."""
    monkeypatch.setattr(parallel, "HEARTBEAT", 0.5)
    ticks = []
    parallel.run_all(_reports_halfway, [(3.0,), (3.0,)], jobs=2, on_tick=ticks.append)
    assert ticks, "no tick in 3 s of silence"
    late = ticks[-1]
    assert late["done"] == 0 and late["total"] == 2
    assert late["share"] == 0.5 and late["eta"] is not None and late["eta"] > 0
    here = []
    parallel.run_all(_reports_halfway, [(0.0, 0.6), (0.0,)], jobs=1, on_tick=here.append)
    assert [t["share"] for t in here] == [0.25]    # half of the first of two, in this process


def test_every_says_a_step_began_then_logs_its_eta_at_most_every_so_often(monkeypatch):
    from ltr_toolkit.pipeline import crossval
    clock = iter([0.0, 5.0, 16.0, 20.0, 40.0])
    monkeypatch.setattr(crossval.time, "monotonic", lambda: next(clock))
    said = []
    progress = crossval.every(15.0, said.append, "logging candidates")
    for done in (1, 2, 5, 6, 10):
        progress(done, 10)
    assert said == ["logging candidates: 1/10 rounds (10%)",
                    "logging candidates: 5/10 rounds (50%), ETA 18s"]     # 3 rounds in the last 11 s


def test_a_fold_whose_budget_affords_no_feature_keeps_the_first_stage(mslr_paths):
    ds = load_svmlight(mslr_paths[0], n_features=136).subset(list(range(6)))
    art, _, runner = _fit_fold(ds, "linear", 0, frozenset(ds.qids), 10, 1, None, "mslr", 0, None, [])
    assert art["model"] is None and runner is None
