#!/usr/bin/env python3
"""Validates the Kubernetes manifests of deploy/kubernetes/ offline.

    python3 deploy/validate.py [FILE.yaml ...]         (default: every deploy/kubernetes/*.yaml)

Three checks, each naming the file, the document and the field path of what it rejects:

1. Core kinds (PersistentVolumeClaim, ConfigMap, …) against the Kubernetes API schema of version
   KUBERNETES_VERSION, strictly (unknown fields are errors), with kubernetes-validate.
2. MPIJob (kubeflow.org/v2beta1) and PyTorchJob (kubeflow.org/v1) against the openAPIV3Schema of
   the CRDs committed in deploy/kubernetes/schemas/ (what the operators install), with jsonschema.
   A CRD schema lets the API server drop unknown fields silently; here an unknown field is an
   error, as `kubectl apply --validate=strict` makes it, so that a misspelled key cannot pass.
   Each replica's pod template is also checked as a core PodTemplate (check 1), whose schema is
   newer and stricter than the one embedded in the CRD.
3. The sizes that must agree within a job (the rules in the templates' comments): for an MPIJob,
   RANKS = Worker replicas × slotsPerWorker, slotsPerWorker = the Worker's nvidia.com/gpu when it
   asks for GPUs, and OMP_NUM_THREADS × slotsPerWorker ≤ the Worker's cpu limit; for a PyTorchJob,
   OMP_NUM_THREADS × nprocPerNode ≤ the cpu limit, the elastic replica range holds the Worker
   replicas, and the container is named "pytorch"; in both, every volume a container mounts is declared in its pod.

Exit status 0 when every document passes, 1 otherwise (each failure printed), 2 on unreadable
input.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
SCHEMAS = HERE / "kubernetes" / "schemas"
KUBERNETES_VERSION = "1.33.0"
CRDS = {
    ("kubeflow.org/v2beta1", "MPIJob"): SCHEMAS / "kubeflow.org_mpijobs.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): SCHEMAS / "kubeflow.org_pytorchjobs.yaml",
}


@dataclass
class Failure:
    where: str  # file and document
    path: str  # field path in the document
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.path or '(document)'}: {self.message}"


def field_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def strict(schema: Any) -> Any:
    """The CRD schema with additionalProperties: false on every object that lists its properties
    and neither allows other keys nor preserves unknown fields."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


_crd_validators: dict[tuple[str, str], jsonschema.protocols.Validator] = {}


def crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    key = (api_version, kind)
    if key not in _crd_validators:
        crd = yaml.safe_load(CRDS[key].read_text())
        version = api_version.split("/")[1]
        matches = [v for v in crd["spec"]["versions"] if v["name"] == version]
        if not matches:
            raise SystemExit(f"validate.py: {CRDS[key]} has no version {version}")
        schema = strict(matches[0]["schema"]["openAPIV3Schema"])
        # metadata is the API server's ObjectMeta, which the CRD leaves open (type: object).
        schema["properties"]["metadata"] = {"type": "object"}
        _crd_validators[key] = jsonschema.Draft7Validator(schema)
    return _crd_validators[key]


def core_failures(doc: dict[str, Any], where: str, prefix: str = "") -> list[Failure]:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        path = field_path(list(error.path))
        if prefix:  # a pod template checked as a PodTemplate: report its place in the job
            path = prefix + path[len("template"):]
        return [Failure(where, path, error.message)]
    except kubernetes_validate.SchemaNotFoundError:
        return [Failure(where, "kind", f"no schema for {doc.get('apiVersion')}/{doc.get('kind')} "
                        f"in Kubernetes {KUBERNETES_VERSION}, and no CRD schema in {SCHEMAS}")]
    return []


def replica_templates(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    specs_key = "mpiReplicaSpecs" if doc["kind"] == "MPIJob" else "pytorchReplicaSpecs"
    for role, spec in (doc.get("spec", {}).get(specs_key) or {}).items():
        if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
            yield role, f"spec.{specs_key}.{role}.template", spec


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in container.get("env") or []}


def cpu_cores(quantity: Any) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def size_failures(doc: dict[str, Any], where: str) -> list[Failure]:
    out: list[Failure] = []
    templates = {role: (path, spec) for role, path, spec in replica_templates(doc)}
    for role, (path, spec) in templates.items():
        pod = spec["template"].get("spec", {})
        volumes = {v.get("name") for v in pod.get("volumes") or []}
        for i, c in enumerate(pod.get("containers") or []):
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    out.append(Failure(where, f"{path}.spec.containers[{i}].volumeMounts",
                                       f"mounts volume {m.get('name')!r}, which the pod does not "
                                       f"declare (volumes: {sorted(volumes)})"))
    if "Worker" not in templates:
        return out
    worker_path, worker = templates["Worker"]
    container = worker["template"]["spec"]["containers"][0]
    limits = container.get("resources", {}).get("limits", {})
    gpus = int(limits.get("nvidia.com/gpu", 0))
    cpus = cpu_cores(limits["cpu"]) if "cpu" in limits else None
    replicas = int(worker.get("replicas", 1))
    if doc["kind"] == "MPIJob":
        slots = int(doc["spec"].get("slotsPerWorker", 1))
        launcher = templates.get("Launcher")
        env = env_of(launcher[1]["template"]["spec"]["containers"][0]) if launcher else {}
        if "RANKS" in env and int(env["RANKS"]) != replicas * slots:
            out.append(Failure(where, "spec.mpiReplicaSpecs.Launcher…env.RANKS",
                               f"{env['RANKS']} ranks, but {replicas} Workers × slotsPerWorker "
                               f"{slots} = {replicas * slots}"))
        if gpus and gpus != slots:
            out.append(Failure(where, "spec.slotsPerWorker",
                               f"{slots} ranks per Worker, but each Worker has {gpus} GPUs "
                               "(one rank per GPU)"))
        threads = env.get("OMP_NUM_THREADS")
    else:
        slots = int(doc["spec"].get("nprocPerNode", 1))
        if container.get("name") != "pytorch":
            out.append(Failure(where, f"{worker_path}.spec.containers[0].name",
                               f"{container.get('name')!r}: the Training Operator sets torchrun's "
                               "variables (PET_*, MASTER_ADDR) in the container named 'pytorch'"))
        threads = env_of(container).get("OMP_NUM_THREADS")
        elastic = doc["spec"].get("elasticPolicy") or {}
        low, high = elastic.get("minReplicas", replicas), elastic.get("maxReplicas", replicas)
        if not low <= replicas <= high:
            out.append(Failure(where, f"{worker_path[:-len('.template')]}.replicas",
                               f"{replicas} Workers, outside elasticPolicy's {low}…{high}"))
    if threads is not None and cpus is not None and int(threads) * slots > cpus:
        out.append(Failure(where, f"{worker_path}.spec.containers[0].resources.limits.cpu",
                           f"{slots} ranks × OMP_NUM_THREADS {threads} threads exceed the "
                           f"Worker's {cpus:g} CPUs"))
    return out


def document_failures(doc: Any, where: str) -> list[Failure]:
    if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
        return [Failure(where, "", "not a Kubernetes object (expected a mapping with apiVersion "
                        "and kind)")]
    key = (doc["apiVersion"], doc["kind"])
    if key not in CRDS:
        return core_failures(doc, where)
    failures = [Failure(where, field_path(list(e.absolute_path)), e.message)
                for e in sorted(crd_validator(*key).iter_errors(doc), key=lambda e: list(e.path))]
    if failures:
        return failures
    for _, path, spec in replica_templates(doc):
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"},
               "template": copy.deepcopy(spec["template"])}
        failures += core_failures(pod, where, prefix=path)
    return failures or size_failures(doc, where)


def file_failures(path: Path) -> tuple[int, list[Failure]]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as error:
        raise SystemExit(f"validate.py: cannot read {path}: {error}") from None
    failures: list[Failure] = []
    for i, doc in enumerate(docs):
        name = doc.get("metadata", {}).get("name", "?") if isinstance(doc, dict) else "?"
        kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
        failures += document_failures(doc, f"{path} (document {i + 1}, {kind} {name})")
    return len(docs), failures


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or sorted((HERE / "kubernetes").glob("*.yaml"))
    bad = 0
    for path in files:
        count, failures = file_failures(path)
        for failure in failures:
            print(f"FAIL {failure}")
        bad += bool(failures)
        if not failures:
            print(f"ok   {path}: {count} document(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
