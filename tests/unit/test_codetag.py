"""The code tag that keys every cache: one digest per set of source files."""
from __future__ import annotations

import importlib
import sys

import pytest

from memory_tui.core.cache import codetag


def _module(tmp_path, monkeypatch, body: str):
    (tmp_path / "tagged_mod.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tagged_mod", None)
    return importlib.import_module("tagged_mod")


def test_a_module_and_its_dotted_name_tag_alike(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch, "X = 1\n")
    monkeypatch.setattr(codetag, "_TAGS", {})
    by_object = codetag.code_tag(mod, salt="s")
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.code_tag("tagged_mod", salt="s") == by_object


def test_other_source_or_salt_is_another_tag(tmp_path, monkeypatch):
    mod = _module(tmp_path, monkeypatch, "X = 1\n")
    monkeypatch.setattr(codetag, "_TAGS", {})
    first = codetag.code_tag(mod)
    assert codetag.code_tag(mod, salt="v2") != first
    (tmp_path / "tagged_mod.py").write_text("X = 2\n")
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.code_tag(mod) != first


def test_a_missing_module_fails_loudly():
    with pytest.raises((ValueError, ModuleNotFoundError)):
        codetag.code_tag("memory_tui.core.no_such_module")


def test_package_tag_covers_subpackages(tmp_path, monkeypatch):
    pkg = tmp_path / "tagged_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text("Y = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tagged_pkg", None)
    package = importlib.import_module("tagged_pkg")
    monkeypatch.setattr(codetag, "_TAGS", {})
    first = codetag.package_tag(package)
    (pkg / "sub" / "deep.py").write_text("Y = 2\n")
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.package_tag(package) != first


def test_code_tag_of_a_package_covers_its_modules(tmp_path, monkeypatch):
    # a grammar split into a package's rooms stays one piece of code to the caches naming it
    pkg = tmp_path / "tagged_rooms"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .grammar import RULE\n")
    (pkg / "grammar.py").write_text("RULE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("tagged_rooms", None)
    sys.modules.pop("tagged_rooms.grammar", None)
    package = importlib.import_module("tagged_rooms")
    monkeypatch.setattr(codetag, "_TAGS", {})
    first = codetag.code_tag(package)
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.code_tag("tagged_rooms") == first
    (pkg / "grammar.py").write_text("RULE = 2\n")
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.code_tag(package) != first
    monkeypatch.setattr(codetag, "_TAGS", {})
    assert codetag.code_tag("tagged_rooms") != first
