"""Which top-level modules each distribution provides (grpo_compat.histories.providers), against what is installed."""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import os
import sys

import pytest

from grpo_compat.core.versions import canonicalize_name
from grpo_compat.histories import providers
from matrix import module_providers


def installed_folders() -> dict[str, tuple[str, str]]:
    """Canonical name -> (version, metadata folder) of each distribution this interpreter has."""
    found = {}
    for distribution in importlib.metadata.distributions():
        folder = getattr(distribution, "_path", None)
        if distribution.metadata["Name"] and folder is not None:
            found[canonicalize_name(distribution.metadata["Name"])] = (distribution.version, str(folder))
    return found


def test_the_shipped_table_holds_what_each_installed_release_it_read_provides():
    with gzip.open(providers.PATH, "rt", encoding="utf-8") as stream:
        table = json.load(stream)["distributions"]
    compared = 0
    for name, (version, folder) in installed_folders().items():
        if name in table and version in table[name]["releases"]:
            installed = providers.top_level_of_metadata(folder)
            if installed is None:
                continue  # an editable install (grpo-compat itself): its RECORD does not say
            assert installed <= set(table[name]["modules"]), (name, version)
            compared += 1
    assert compared >= 20  # torch, transformers, trl, accelerate, pyyaml ... of the development env


def test_a_record_names_packages_modules_and_compiled_modules_but_not_scripts_or_metadata():
    folder = installed_folders()["pyyaml"][1]
    assert providers.top_level_of_metadata(folder) == {"yaml", "_yaml"}  # _yaml: a package of a compiled module
    typing_extensions = providers.top_level_of_metadata(installed_folders()["typing-extensions"][1])
    assert typing_extensions == {"typing_extensions"}  # a single-file module
    torch = providers.top_level_of_metadata(installed_folders()["torch"][1])
    assert {"torch", "torchgen", "functorch"} <= torch and not any(m.startswith(("..", "bin")) for m in torch)


def test_an_editable_install_provides_what_nobody_wrote_down():
    folder = installed_folders()["grpo-compat"][1]
    with open(os.path.join(folder, "direct_url.json"), encoding="utf-8") as handle:
        if not json.load(handle).get("dir_info", {}).get("editable"):
            pytest.skip("grpo-compat is not installed editable here")
    assert providers.top_level_of_metadata(folder) is None  # its RECORD lists a .pth and a finder


def test_a_module_is_placed_with_the_distributions_that_provide_it():
    assert providers.distributions_providing("msgspec") == ["msgspec"]
    assert providers.distributions_providing("swift") == ["ms-swift"]  # the histories' import names join in
    assert providers.distributions_providing("yaml") == ["pyyaml"]
    assert providers.distributions_providing("not_a_module_anyone_ships") == []


def test_the_generator_adds_the_releases_of_a_site_folder_to_what_it_read(tmp_path):
    site = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p))
    output = tmp_path / "modules.json.gz"
    assert module_providers.main(["--output", str(output), site]) == 0
    with gzip.open(output, "rt", encoding="utf-8") as stream:
        first = json.load(stream)["distributions"]
    assert first["pyyaml"]["modules"] == ["_yaml", "yaml"]
    assert module_providers.main(["--output", str(output), site]) == 0  # again: the same data, the same bytes
    with gzip.open(output, "rt", encoding="utf-8") as stream:
        assert json.load(stream)["distributions"] == first
