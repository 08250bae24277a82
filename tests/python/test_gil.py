"""The GIL is released while the library trains: a Python thread keeps running during every LM
step instead of waiting for the step to end."""

from __future__ import annotations

import threading
import time

import numpy as np

import lmtrain


def test_a_python_thread_runs_during_each_lm_step() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5000, 16))
    y = np.tanh(X @ rng.normal(size=16)) + 0.1 * rng.normal(size=5000)
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    time.sleep(0.05)
    started = time.perf_counter()
    # 1 153 parameters, full batch: each step forms a 1 153² JᵀJ from 5 000 rows (0.2–0.6 s).
    _, summary = lmtrain.fit([64, "tanh", 1], X, y, precision="float64", max_epochs=3)
    ended = time.perf_counter()
    done.set()
    thread.join()
    during = np.array([t for t in ticks if started <= t <= ended])
    longest_gap = float(np.diff(np.concatenate([[started], during, [ended]])).max())
    epoch_seconds = np.diff([0.0] + [e.seconds for e in summary.history])
    print(f"{during.size} ticks in {ended - started:.2f} s of training; longest gap "
          f"{longest_gap * 1e3:.1f} ms; shortest epoch {epoch_seconds.min() * 1e3:.1f} ms")
    # Holding the GIL through a step would stop the thread for at least that step.
    assert longest_gap < 0.5 * epoch_seconds.min()
