"""The API histories (grpo_compat.histories): the facts issue 39 names, read from the shipped data, and the query API.

The data is generated from PyPI's files by ``python -m matrix.api_history``; tests/test_histories_installed.py
checks it against the installed releases' code.
"""

from __future__ import annotations

import ast

import pytest
from packaging.version import Version

from grpo_compat import histories
from grpo_compat.histories import Signature, providers, reader


def load(distribution: str) -> histories.ApiHistory:
    history = histories.load(distribution)
    assert history is not None, f"no data for {distribution}: run python -m matrix.api_history --dist {distribution}"
    return history


def between(history: histories.ApiHistory, first: str, last: str) -> list[str]:
    return [v for v in history.releases if Version(first) <= Version(v) <= Version(last)]


def undeclared(requires: list[str], distribution: str) -> bool:
    """No Requires-Dist line installs ``distribution`` unless an extra is asked for."""
    for line in requires:
        name = line.split(";")[0].split("[")[0]
        for cut in "<>=!~ (":
            name = name.split(cut)[0]
        if name.strip().lower().replace("_", "-") == distribution and "extra ==" not in line:
            return False
    return True


# -- the facts issue 39 names


def test_trl_0_21_to_1_12_import_requests_in_the_vllm_client_without_declaring_it():
    trl = load("trl")
    releases = between(trl, "0.21.0", "1.12.0")
    assert releases[0] == "0.21.0" and releases[-1] == "1.12.0" and len(releases) > 20
    for version in releases:
        client = next(m for m in ("trl.generation.vllm_client", "trl.extras.vllm_client") if trl.has(m, None, version))
        imported = [i for i in trl.imports(client, version) if i.module.split(".")[0] == "requests"]
        assert imported, f"trl {version}: {client} imports no requests"
        assert undeclared(trl.requires(version), "requests"), f"trl {version} declares requests"
    # 1.x moved the client to trl/generation/, where HTTPAdapter is imported with no guard at all
    assert any(
        i.guard is None and i.names == ("HTTPAdapter",) for i in trl.imports("trl.generation.vllm_client", "1.12.0")
    )
    assert trl.module_spans("trl.extras.vllm_client")[-1][1] == "0.27.2"


def test_huggingface_hub_2_no_longer_requires_requests():
    hub = load("huggingface-hub")
    old = [v for v in hub.releases if Version(v).major == 0]
    new = [v for v in hub.releases if Version(v).major == 2]
    assert old and new
    assert all(not undeclared(hub.requires(v), "requests") for v in old)
    assert all(undeclared(hub.requires(v), "requests") for v in new)


def test_guided_decoding_params_exists_up_to_vllm_0_11_and_not_in_0_12():
    vllm = load("vllm")
    assert vllm.knows("0.12.0") and vllm.knows("0.11.2")
    for version in between(vllm, "0.11.0", "0.11.2"):
        assert vllm.has("vllm.sampling_params", "GuidedDecodingParams", version), version
    assert not vllm.has("vllm.sampling_params", "GuidedDecodingParams", "0.12.0")
    assert vllm.name_spans("vllm.sampling_params", "GuidedDecodingParams")[-1][1] == "0.11.2"
    assert vllm.has("vllm.sampling_params", "StructuredOutputsParams", "0.12.0")  # what took its place


def test_get_train_sampler_takes_the_dataset_from_transformers_4_52_but_trl_0_16_1_overrides_it_with_self_only():
    transformers = load("transformers")
    qualname = "transformers.trainer.Trainer._get_train_sampler"
    assert [p.name for p in transformers.signature(qualname, "4.51.3").parameters] == ["self"]
    assert [p.name for p in transformers.signature(qualname, "4.52.4").parameters] == ["self", "train_dataset"]
    changed = [first for first, _, sig in transformers.signature_spans(qualname) if "train_dataset" in sig.text]
    assert changed[0] == "4.52.0"  # a yanked release, still read: an exact pin installs it
    assert transformers.yanked.keys() >= {"4.52.0"} and transformers.nearest("4.52.0") == "4.52.0"
    override = load("trl").signature("trl.trainer.grpo_trainer.GRPOTrainer._get_train_sampler", "0.16.1")
    assert override is not None and [p.name for p in override.parameters] == ["self"]
    # transformers 4.52's Trainer calls self._get_train_sampler(train_dataset): self and one more
    assert override.accepts(2, ()) == "takes 1 positional argument but 2 were given"


def test_unsloth_zoo_adds_grpo_accumulated_loss_in_2025_2_6_a_release_after_its_rl_replacements_module():
    zoo = load("unsloth-zoo")
    module = "unsloth_zoo.rl_replacements"
    assert zoo.module_spans(module)[0][0] == "2025.2.5"
    assert zoo.has(module, "RL_REPLACEMENTS", "2025.2.5") and zoo.has(module, "grpo_compute_loss", "2025.2.5")
    assert not zoo.has(module, "grpo_accumulated_loss", "2025.2.5")
    assert zoo.name_spans(module, "grpo_accumulated_loss")[0][0] == "2025.2.6"
    assert zoo.has(module, "UnslothEfficientGRPO.forward", "2025.2.6")
    assert not zoo.has(module, None, "2025.2.4") and zoo.nearest("2024.9.0") is None  # before its first release


def test_unsloth_zoo_load_vllm_takes_unsloth_vllm_standby_from_2025_6_2():
    zoo = load("unsloth-zoo")
    qualname = "unsloth_zoo.vllm_utils.load_vllm"
    assert zoo.signature(qualname, "2025.6.1").accepts(0, ["unsloth_vllm_standby"]) == (
        "no parameter 'unsloth_vllm_standby'"
    )
    assert zoo.signature(qualname, "2025.6.2").accepts(0, ["unsloth_vllm_standby"]) is None
    first = next(first for first, _, sig in zoo.signature_spans(qualname) if "unsloth_vllm_standby" in sig.text)
    assert first == "2025.6.2"


def test_unsloth_releases_declare_their_unsloth_zoo_trl_and_transformers():
    unsloth = load("unsloth")
    declared = unsloth.requires("2025.5.1")
    assert "unsloth_zoo>=2025.5.1" in declared
    assert "trl!=0.15.0,!=0.9.0,!=0.9.1,!=0.9.2,!=0.9.3,<=0.15.2,>=0.7.9" in declared
    assert "transformers!=4.47.0,==4.51.3" in declared
    assert "trl!=0.19.0,<=0.24.0,>=0.18.2" in unsloth.requires("2026.1.1")
    # 2024.8 declares trl only under its extras: a plain install pulls no trl
    assert undeclared(unsloth.requires("2024.8"), "trl")
    assert "trl <0.9.0,>=0.7.9 ; extra == 'huggingface'" in unsloth.requires("2024.8")
    # neither distribution declares vllm in any release: the pairing with vllm is in their code, not their metadata
    for history in (unsloth, load("unsloth-zoo")):
        assert all(undeclared(history.requires(v), "vllm") for v in history.releases)
    zoo = load("unsloth-zoo")
    assert "trl!=0.19.0,<=0.24.0,>=0.18.2" in zoo.requires("2026.1.1")


def test_declared_gives_what_a_release_requires_of_one_distribution_and_which_releases_accept_a_version():
    unsloth, zoo = load("unsloth"), load("unsloth-zoo")
    (trl,) = unsloth.declared("2025.5.1", "trl")
    assert not trl.specifier.contains("0.16.0") and trl.specifier.contains("0.15.2")
    assert [str(r) for r in unsloth.declared("2025.5.1", "unsloth-zoo")] == ["unsloth_zoo>=2025.5.1"]
    assert unsloth.declared("2024.8", "trl") == []  # only its extras name trl
    assert [str(r.specifier) for r in unsloth.declared("2024.8", "trl", extra="huggingface")] == ["<0.9.0,>=0.7.9"]
    (platform_only,) = zoo.declared("2026.10.9", "trl")  # a platform marker stays on the requirement
    assert "darwin" in str(platform_only.marker) and not platform_only.specifier.contains("1.16.0")
    # trl 0.19.0: unsloth excludes it from 2025.7.4 on; 2025.4.x-2025.5.x cap trl at 0.15.2
    accepting = unsloth.releases_accepting("trl", "0.19.0")
    assert "2025.7.3" in accepting and "2025.7.4" not in accepting and "2025.4.1" not in accepting
    assert accepting[0] == "2024.8" and accepting[-1] == "2025.7.3"
    assert zoo.releases_accepting("trl", "1.16.0")[-1] == "2025.9.12"  # 2025.9.13 on caps trl (<=0.23.0, ...)


def test_unsloth_names_the_grpo_entry_points_with_the_release_that_added_them():
    unsloth = load("unsloth")
    assert ("unsloth.models.rl", "2025.2.2", unsloth.newest) in unsloth.where("PatchFastRL")
    assert not unsloth.has("unsloth", "PatchFastRL", "2025.1.8") and unsloth.has("unsloth", "PatchFastRL", "2025.2.2")
    assert unsloth.module_spans("unsloth.models.rl_replacements")[0][0] == "2025.2.6"
    # yanked releases are read too, and a release with no file on PyPI reads as the one before it
    assert unsloth.yanked.keys() == {"2025.12.2", "2025.12.3"} and unsloth.knows("2025.12.2")
    assert not unsloth.knows("2025.11.5") and unsloth.nearest("2025.11.5") == "2025.11.4"


def test_unsloth_zoo_up_to_2025_9_9_imports_a_vllm_module_that_vllm_0_11_no_longer_has():
    # vllm's history covers the modules unsloth-zoo imports too, so the two histories together answer a skew
    zoo, vllm = load("unsloth-zoo"), load("vllm")
    module, imported = "unsloth_zoo.vllm_lora_request", "vllm.adapter_commons.request"

    def guard(version):
        return next(i.guard for i in zoo.imports(module, version) if i.module == imported)

    assert guard("2025.9.9") is None  # unguarded: the module fails to import where vllm lacks it
    assert guard("2025.9.10") == "try-except ImportError"
    assert vllm.module_spans(imported) == [("0.7.0", "0.10.2")]
    assert not vllm.has(imported, "AdapterRequest", "0.11.0") and vllm.has(imported, "AdapterRequest", "0.10.2")


def test_the_shipped_data_keeps_within_its_size_budget():
    sizes = {d: (histories.DATA / f"{d}.json.gz").stat().st_size for d in histories.DISTRIBUTIONS}
    sizes["top-level modules"] = providers.PATH.stat().st_size  # every data file in the wheel counts
    assert sum(sizes.values()) < 4_000_000, sizes  # docs/api-histories.md's budget: under 4 MB in the wheel
    assert max(sizes.values()) < 1_500_000, sizes  # and a distribution under 1.5 MB


# -- the query API


def test_every_distribution_with_data_loads_and_maps_its_import_name():
    assert {"trl", "transformers", "vllm"} <= set(histories.DISTRIBUTIONS)
    for distribution in histories.DISTRIBUTIONS:
        history = load(distribution)
        assert history.releases == sorted(history.releases, key=Version)
        assert history.newest == history.releases[-1]
        for name in histories.IMPORT_NAMES[distribution]:
            assert histories.distribution_of_module(f"{name}.x.y") == distribution
    assert histories.load("no-such-distribution") is None
    assert histories.distribution_of_module("swift.llm") == "ms-swift"
    assert histories.distribution_of_module("numpy") is None


def test_a_release_the_data_lacks_reads_as_the_newest_release_before_it():
    vllm = load("vllm")
    assert vllm.nearest("0.12.0") == "0.12.0"
    assert vllm.nearest("0.12.0.dev3+gabc") == "0.11.2"
    assert vllm.nearest("0.12.1rc1") == "0.12.0"
    assert vllm.nearest("0.8.5.post1") == "0.8.5.post1" and vllm.nearest("0.8.5+cpu") == "0.8.5"
    assert vllm.nearest("0.1.0") is None and vllm.nearest("not a version") is None
    assert not vllm.knows("0.12.1") and not vllm.has("vllm.sampling_params", None, "0.1.0")


def test_where_names_every_module_a_name_was_ever_in_with_its_releases():
    found = load("trl").where("GRPOTrainer")
    modules = {module for module, _, _ in found}
    assert {"trl", "trl.trainer", "trl.trainer.grpo_trainer"} <= modules
    assert ("trl.trainer.grpo_trainer", "0.14.0", load("trl").newest) in found


def test_a_config_dataclass_lists_its_fields_with_their_defaults_as_source_text():
    trl = load("trl")
    fields = trl.fields("trl.trainer.grpo_config.GRPOConfig", "0.16.1")
    assert fields["beta"] == "0.04" and fields["use_vllm"] == "False"
    assert "max_prompt_length" in fields and "max_prompt_length" not in trl.fields(
        "trl.trainer.grpo_config.GRPOConfig", "0.28.0"
    )
    args = load("transformers").fields("transformers.training_args.TrainingArguments", "4.52.4")
    assert args["output_dir"] in ("<required>", "None") and args["learning_rate"] == "5e-05"


def test_guarded_imports_carry_their_guard():
    trl = load("trl")
    guards = {(i.module, i.names): i.guard for i in trl.imports("trl.trainer.grpo_trainer", "0.25.0")}
    assert guards[("vllm.sampling_params", ("GuidedDecodingParams",))] == "is_vllm_available()"
    assert guards[("torch", ())] is None
    lazy = load("transformers").imports("transformers", "5.23.0")
    assert any(i.guard == "TYPE_CHECKING" for i in lazy)


def test_lazy_init_names_count_as_importable():
    transformers = load("transformers")
    for version in ("4.46.0", "4.52.4", transformers.newest):
        assert transformers.has("transformers", "Trainer", version), version
        assert transformers.has("transformers", "AutoModelForCausalLM", version), version
    assert load("trl").has("trl", "GRPOConfig", "0.14.0")


@pytest.mark.parametrize(
    ("text", "positional", "keywords", "why"),
    [
        ("self", 1, (), None),
        ("self", 2, (), "takes 1 positional argument but 2 were given"),
        ("self,dataset=", 2, (), None),
        ("self,a,b=", 4, (), "takes from 2 to 3 positional arguments but 4 were given"),
        ("self,*args,**kwargs", 9, ("x",), None),
        ("self,*,x=", 1, ("x",), None),
        ("self,*,x=", 1, ("y",), "no parameter 'y'"),
        ("self,*,x", 1, (), "missing required argument: 'x'"),
        ("a,/,b", 0, ("a", "b"), "positional-only argument 'a' passed as a keyword"),
        ("a,/,**kw", 1, ("a",), None),
        ("a,/,**kw", 0, ("a",), "missing required argument: 'a'"),
        ("self,a", 2, ("a",), "got multiple values for argument 'a'"),
    ],
)
def test_a_signature_says_whether_a_call_binds_and_why_not(text, positional, keywords, why):
    assert Signature.parse(text).accepts(positional, keywords) == why


def test_a_signature_keeps_each_parameters_kind_and_default():
    signature = Signature.parse("a,/,b=,*args,c,d=,**kw")
    kinds = [(p.name, p.kind, p.has_default) for p in signature.parameters]
    assert kinds == [
        ("a", "POSITIONAL_ONLY", False),
        ("b", "POSITIONAL_OR_KEYWORD", True),
        ("args", "VAR_POSITIONAL", False),
        ("c", "KEYWORD_ONLY", False),
        ("d", "KEYWORD_ONLY", True),
        ("kw", "VAR_KEYWORD", False),
    ]


def test_ms_swift_rlhf_arguments_moved_to_swift_arguments_in_4_0_with_their_fields():
    swift = load("ms-swift")
    modules = {module: (first, last) for module, first, last in swift.where("RLHFArguments")}
    assert modules["swift.llm.argument.rlhf_args"] == ("3.2.0", "3.12.6")
    assert modules["swift.arguments.rlhf_args"][1] == swift.newest
    assert Version(modules["swift.arguments.rlhf_args"][0]).major == 4
    fields = swift.fields("swift.arguments.rlhf_args.RLHFArguments", swift.newest)
    assert fields["num_generations"] == "8"  # GRPO's, from its same-package mixin


def test_an_import_under_a_handler_that_raises_again_is_read_as_unguarded():
    # ms-swift 4.0's `try: import vllm ... except Exception: raise` lets the ImportError through
    tree = ast.parse(
        "try:\n    import vllm\nexcept Exception:\n    raise\n"
        "try:\n    import liger_kernel\nexcept (AttributeError, ImportError):\n    liger_kernel = None\n"
    )
    guards = {
        node.names[0].name: reader._guard(conditions)
        for node, conditions in reader.module_statements(tree.body)
        if isinstance(node, ast.Import)
    }
    assert guards == {"vllm": None, "liger_kernel": reader.IMPORT_ERROR_GUARD}


def test_a_class_names_the_attributes_its_own_methods_assign_on_self_release_by_release():
    trl = load("trl")
    trainer = "trl.trainer.grpo_trainer.GRPOTrainer"
    assert "temperature" not in trl.assigned_attributes(trainer, "0.14.0")  # 0.14 hands it to its generation config
    assert {"temperature", "use_vllm", "vllm_client"} <= set(trl.assigned_attributes(trainer, "0.16.1"))
    assert "args" not in trl.assigned_attributes(trainer, "0.16.1")  # transformers' Trainer.__init__ sets it
    assert trl.assigned_attributes(trainer, "0.1.0") == []
    assert trl.assigned_attributes("trl.NoSuchClass", "0.16.1") == []


def test_a_class_records_how_its_methods_call_its_chains_methods_with_their_arities():
    transformers = load("transformers")
    trainer = "transformers.trainer.Trainer"
    # 4.51 calls self._get_train_sampler() itself; 4.52 hands it to _get_dataloader, which calls it with the dataset
    (direct,) = [c for c in transformers.self_calls(trainer, "4.51.3")["get_train_dataloader"]
                 if c.callee == "_get_train_sampler"]  # fmt: skip
    assert (direct.positional, direct.keywords, direct.via) == (0, (), "")
    (handed,) = [c for c in transformers.self_calls(trainer, "4.52.4")["get_train_dataloader"]
                 if c.callee == "_get_train_sampler"]  # fmt: skip
    assert (handed.positional, handed.keywords, handed.via) == (1, (), "_get_dataloader")
    assert "_get_train_sampler" in transformers.methods(trainer, "4.52.4")
    # trl's trainer calls what it inherits from transformers' Trainer too (a name its own chain does not define)
    calls = load("trl").self_calls("trl.trainer.grpo_trainer.GRPOTrainer", "0.16.1")
    assert any(c.callee == "_prepare_inputs" for made in calls.values() for c in made)
    assert not any(c.callee == "accelerator" for made in calls.values() for c in made)  # an attribute, not called


def test_an_optional_kernel_set_to_none_is_recorded_with_what_its_import_needs_and_who_calls_it():
    trl = load("trl")
    (kernel,) = trl.kernels("1.15.0")
    assert (kernel.module, kernel.name) == ("trl.trainer.utils", "_ChunkedLogProbFunction")
    assert kernel.source == "trl.kernels" and kernel.imported == "ChunkedLogProbFunction"
    assert "triton" in kernel.needs and "trl" not in kernel.needs
    assert any("trl.trainer.grpo_trainer" in callers for _, _, callers in kernel.uses)
    assert trl.kernels("1.16.0") == [] and trl.kernels("0.16.1") == []
