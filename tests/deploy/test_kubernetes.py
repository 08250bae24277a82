"""The Kubernetes templates of deploy/kubernetes/: they validate offline (deploy/validate.py), the
validation rejects what a cluster would reject or what would break the job, and the MPIJob's
launcher command, run here with mpirun on this machine, trains W1 to the result of
`mpirun -np 2` and resumes after a killed rank to the same result."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from conftest import ROOT, STUB, base_env, lmtrain_cli, run
from model_params import compare

import validate

MANIFESTS = ROOT / "deploy" / "kubernetes"


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def test_every_manifest_validates() -> None:
    for path in sorted(MANIFESTS.glob("*.yaml")):
        count, failures = validate.file_failures(path)
        assert count > 0 and failures == [], "\n".join(map(str, failures))


def worker(doc: dict[str, Any]) -> dict[str, Any]:
    key = "mpiReplicaSpecs" if doc["kind"] == "MPIJob" else "pytorchReplicaSpecs"
    return doc["spec"][key]["Worker"]


def container(doc: dict[str, Any], role: str = "Worker") -> dict[str, Any]:
    key = "mpiReplicaSpecs" if doc["kind"] == "MPIJob" else "pytorchReplicaSpecs"
    return doc["spec"][key][role]["template"]["spec"]["containers"][0]


def set_env(c: dict[str, Any], name: str, value: str) -> None:
    next(e for e in c["env"] if e["name"] == name)["value"] = value


def _misspelled_field(d: dict[str, Any]) -> None:
    d["spec"]["slotPerWorker"] = d["spec"].pop("slotsPerWorker")


def _unknown_pod_field(d: dict[str, Any]) -> None:
    container(d)["resurces"] = container(d).pop("resources")


def _wrong_type(d: dict[str, Any]) -> None:
    worker(d)["replicas"] = "two"


def _unknown_mpi(d: dict[str, Any]) -> None:
    d["spec"]["mpiImplementation"] = "OpenMP"


def _bad_quantity(d: dict[str, Any]) -> None:
    container(d)["resources"]["limits"]["memory"] = ["32Gi"]


def _ranks_not_workers_times_slots(d: dict[str, Any]) -> None:
    worker(d)["replicas"] = 3


def _slots_not_gpus(d: dict[str, Any]) -> None:
    container(d)["resources"]["limits"]["nvidia.com/gpu"] = 4


def _threads_beyond_cpus(d: dict[str, Any]) -> None:
    set_env(container(d, "Launcher"), "OMP_NUM_THREADS", "8")


def _undeclared_volume(d: dict[str, Any]) -> None:
    container(d)["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})


@pytest.mark.parametrize("mutate, path, words", [
    (_misspelled_field, "spec", "'slotPerWorker' was unexpected"),
    (_unknown_pod_field, "spec.mpiReplicaSpecs.Worker.template.spec.containers[0]",
     "'resurces' was unexpected"),
    (_wrong_type, "spec.mpiReplicaSpecs.Worker.replicas", "'two' is not of type 'integer'"),
    (_unknown_mpi, "spec.mpiImplementation", "'OpenMP' is not one of"),
    (_bad_quantity, "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].resources.limits"
     ".memory", "is not valid"),
    (_ranks_not_workers_times_slots, "env.RANKS", "4 ranks, but 3 Workers × slotsPerWorker 2"),
    (_slots_not_gpus, "spec.slotsPerWorker", "each Worker has 4 GPUs"),
    (_threads_beyond_cpus, "resources.limits.cpu", "OMP_NUM_THREADS 8 threads exceed"),
    (_undeclared_volume, "containers[0].volumeMounts", "mounts volume 'scratch'"),
])
def test_a_broken_mpijob_is_rejected_with_the_field_named(
        mutate: Callable[[dict[str, Any]], None], path: str, words: str) -> None:
    doc = copy.deepcopy(load("mpijob.yaml")[0])
    mutate(doc)
    failures = validate.document_failures(doc, "mpijob.yaml")
    assert failures, "accepted"
    assert any(path in f.path and words in f.message for f in failures), \
        "\n".join(map(str, failures))


def test_a_broken_pytorchjob_and_core_kinds_are_rejected() -> None:
    job = copy.deepcopy(load("pytorchjob.yaml")[0])
    job["spec"]["elasticPolicy"]["maxRestarts"] = "3"
    assert any(f.path == "spec.elasticPolicy.maxRestarts" and "not of type 'integer'" in f.message
               for f in validate.document_failures(job, "x"))
    job = copy.deepcopy(load("pytorchjob.yaml")[0])
    worker(job)["replicas"] = 5
    assert any("outside elasticPolicy's 2…2" in f.message
               for f in validate.document_failures(job, "x"))
    job = copy.deepcopy(load("pytorchjob.yaml")[0])
    container(job)["name"] = "worker"  # the operator sets torchrun's variables in "pytorch"
    assert any("named 'pytorch'" in f.message for f in validate.document_failures(job, "x"))
    claim = copy.deepcopy(load("storage.yaml")[0])
    claim["spec"]["accessModes"] = "ReadWriteMany"
    failures = validate.document_failures(claim, "storage.yaml")
    assert any(f.path == "spec.accessModes" for f in failures), failures
    claim["spec"]["accessModes"] = ["ReadWriteMany"]
    claim["spec"]["resource"] = claim["spec"].pop("resources")
    assert any("'resource' was unexpected" in f.message
               for f in validate.document_failures(claim, "storage.yaml"))


def launcher_script(tmp: Path) -> tuple[str, dict[str, str], Path]:
    """The MPIJob launcher's command and environment as this machine runs it: the ConfigMap's
    run.toml at RUN_CONFIG, W1's data where the config reads it, RUN_DIR in `tmp` (the volume
    mount paths of the pods moved into `tmp`), two ranks on this machine, device = cpu."""
    job = load("mpijob.yaml")[0]
    config_map = next(d for d in load("storage.yaml") if d["kind"] == "ConfigMap")
    c = container(job, "Launcher")
    assert c["command"] == ["bash", "-c"]
    env = {e["name"]: e["value"] for e in c["env"]}
    text = config_map["data"]["run.toml"]
    assert 'path = "/data/sinc.csv"' in text
    (tmp / "config").mkdir()
    (tmp / "data").mkdir()
    (tmp / "config" / "run.toml").write_text(text.replace("/data/", f"{tmp / 'data'}/"))
    env.update(RUN_CONFIG=str(tmp / "config" / "run.toml"),
               RUN_DIR=env["RUN_DIR"].replace("/checkpoints/", f"{tmp / 'checkpoints'}/"),
               RANKS="2", DEVICE="cpu", OMP_NUM_THREADS="1")
    return c["args"][0], env, Path(env["RUN_DIR"])


def test_the_mpijob_launcher_trains_w1_as_mpirun_does(w1: Path, reference: Path,
                                                      tmp_path: Path) -> None:
    script, job_env, run_dir = launcher_script(tmp_path)
    os.symlink(w1 / "sinc.csv", tmp_path / "data" / "sinc.csv")
    env = base_env()
    env.update(job_env)
    env["PATH"] = f"{lmtrain_cli().parent}:{env['PATH']}"
    result = run(["bash", "-c", script], env)
    assert result.returncode == 0, result.stdout + result.stderr
    equal, largest, count = compare(run_dir / "model.safetensors", reference)
    print(f"MPIJob launcher command on 2 local ranks vs mpirun -np 2: {count} parameters, "
          f"largest difference {largest:.3e}")
    assert equal


def test_a_restarted_mpijob_launcher_resumes_to_the_uninterrupted_result(
        w1: Path, reference: Path, tmp_path: Path) -> None:
    script, job_env, run_dir = launcher_script(tmp_path)
    os.symlink(w1 / "sinc.csv", tmp_path / "data" / "sinc.csv")
    shim = tmp_path / "bin"
    shim.mkdir()
    os.symlink(STUB / "lmtrain-fault", shim / "lmtrain")  # `lmtrain` on PATH kills rank 1 once
    env = base_env()
    env.update(job_env, PATH=f"{shim}:{env['PATH']}", LMTRAIN_REAL=str(lmtrain_cli()),
               FAULT_DIR=str(tmp_path), FAULT_RANK="1", FAULT_RUN_DIR=str(run_dir),
               FAULT_AFTER_EPOCHS="10")
    first = run(["bash", "-c", script], env)
    assert first.returncode != 0, "the launcher did not fail with a rank killed"
    killed_after = int((tmp_path / "killed").read_text())
    assert 10 <= killed_after < 50
    assert (run_dir / "checkpoint.safetensors").is_file()
    second = run(["bash", "-c", script], env)  # the launcher pod, restarted by its Job
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"resuming from {run_dir}/checkpoint.safetensors" in second.stdout
    equal, largest, count = compare(run_dir / "model.safetensors", reference)
    print(f"MPIJob: rank 1 killed after epoch {killed_after}, launcher exit "
          f"{first.returncode}; restarted launcher resumed: {count} parameters, largest "
          f"difference from the uninterrupted run {largest:.3e}")
    assert equal
