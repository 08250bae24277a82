"""The installed package carries its typing information (PEP 561): py.typed, and _core.pyi that
describes the extension actually built (stubgen runs on it at build time), so that editors and
type checkers complete and check lmtrain._core's names."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import lmtrain
from lmtrain import _core

PACKAGE = Path(lmtrain.__file__).parent


def stub_tree() -> ast.Module:
    return ast.parse((PACKAGE / "_core.pyi").read_text(encoding="utf-8"))


def public(names: list[str]) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_the_package_is_marked_typed_and_ships_the_extension_stub() -> None:
    assert (PACKAGE / "py.typed").is_file()
    extension = Path(_core.__file__)
    assert extension.parent == PACKAGE
    stub = PACKAGE / "_core.pyi"
    assert stub.is_file()
    # Generated from this build of the extension, not left over from an older one.
    assert stub.stat().st_mtime >= extension.stat().st_mtime - 60


def test_the_stub_declares_every_public_name_of_the_extension() -> None:
    tree = stub_tree()
    declared = {node.name for node in tree.body
                if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    exported = public([n for n, v in vars(_core).items()
                       if inspect.isclass(v) or callable(v)])
    assert exported, "the extension exports no class or function"
    assert exported == declared, (f"missing from the stub: {sorted(exported - declared)}; "
                                  f"not in the module: {sorted(declared - exported)}")


def test_each_class_stub_declares_the_class_attributes() -> None:
    classes = {node.name: node for node in stub_tree().body if isinstance(node, ast.ClassDef)}
    for name, node in classes.items():
        declared = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        # An enum's members are class attributes: `none = 0` in the stub.
        declared |= {t.id for item in node.body if isinstance(item, ast.Assign)
                     for t in item.targets if isinstance(t, ast.Name)}
        declared |= {item.target.id for item in node.body
                     if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
        actual = public(dir(getattr(_core, name))) - public(dir(object))
        assert actual <= declared, f"{name}: not in the stub: {sorted(actual - declared)}"


def test_the_stub_gives_train_its_argument_names() -> None:
    (train,) = [node for node in stub_tree().body
                if isinstance(node, ast.FunctionDef) and node.name == "train"]
    names = [a.arg for a in train.args.args]
    # nanobind writes the bound signature as the docstring's first line.
    signature = _core.train.__doc__.splitlines()[0]
    assert signature.startswith("train(")
    assert [n for n in names if f"{n}: " in signature] == names
    assert names[:3] == ["request", "X", "y"]
