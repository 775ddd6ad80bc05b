"""The layout of the histories' data files (matrix.api_history.encode writes it, grpo_compat.histories._decoded reads
it): a read decodes the values of the keys it asks and no others, and it holds the same content as the single JSON
document the data files were before."""

from __future__ import annotations

import gzip
import json

import pytest

from grpo_compat import histories
from matrix.api_history import encode


def as_plain(data: dict) -> dict:
    """Every table as a plain dict or value (a lazily decoded table decodes each of its keys)."""
    return {table: dict(value.items()) if hasattr(value, "items") else value for table, value in data.items()}


def decoded_keys(data: dict) -> dict[str, list[str]]:
    return {table: sorted(value._decoded) for table, value in data.items() if isinstance(value, histories._LazyTable)}


def test_a_read_decodes_the_values_of_the_keys_it_asks_and_no_others():
    data = histories._decoded(histories.DATA / "trl.json.gz")
    assert set(decoded_keys(data)) == set(histories.KEYED_TABLES)  # trl's data has each of them
    assert not any(decoded_keys(data).values())  # reading the file decoded no value of a keyed table
    assert len(data["signatures"]) > 2000 and "trl.trainer.grpo_trainer.GRPOTrainer.__init__" in data["signatures"]
    assert not any(decoded_keys(data).values())  # nor did counting or testing keys

    history = histories.ApiHistory(data)
    assert "reward_funcs" in str(history.signature("trl.trainer.grpo_trainer.GRPOTrainer.__init__", "0.17.0"))
    assert history.has("trl.trainer.grpo_trainer", "GRPOTrainer", "0.17.0")
    decoded = {table: keys for table, keys in decoded_keys(data).items() if keys}
    asked = {"signatures": ["trl.trainer.grpo_trainer.GRPOTrainer.__init__"], "names": ["trl.trainer.grpo_trainer"]}
    assert decoded == asked


def test_the_single_document_layout_converts_to_the_shipped_bytes_and_content(tmp_path):
    shipped = histories.DATA / "trl.json.gz"
    content = as_plain(histories._decoded(shipped))
    before = tmp_path / "trl.json.gz"  # the layout the data files had before: the whole content as one document
    before.write_bytes(gzip.compress(json.dumps(content, separators=(",", ":"), sort_keys=True).encode()))
    document = json.loads(gzip.decompress(before.read_bytes()))
    before.write_bytes(encode(json.loads(gzip.decompress(before.read_bytes()))))  # the conversion's one line
    assert before.read_bytes() == shipped.read_bytes()
    converted = histories._decoded(before)
    assert list(converted) == list(document)
    for table, value in document.items():
        if table in histories.KEYED_TABLES:
            assert list(converted[table]) == list(value), table
            assert all(converted[table][key] == each for key, each in value.items()), table
        else:
            assert converted[table] == value, table


def test_a_file_in_the_single_document_layout_is_refused_not_read_as_empty(tmp_path):
    before = tmp_path / "requests.json.gz"
    content = as_plain(histories._decoded(histories.DATA / "requests.json.gz"))
    before.write_bytes(gzip.compress(json.dumps(content, separators=(",", ":"), sort_keys=True).encode()))
    with pytest.raises(ValueError, match=r"not the layout matrix\.api_history writes"):
        histories._decoded(before)


def test_values_with_line_breaks_and_other_scripts_keep_to_their_own_line(tmp_path):
    content = {
        "distribution": "example",
        "releases": ["1.0", "2.0"],
        "fields": {"example.Config": [[0, 1, {"separator": "'\\n'", "greeting": "'héllo\n世界'"}]]},
        "names": {},
        "signatures": {"example.f": [[0, 0, "a,b="]], "example.g": [[1, 1, "*args,**kwargs"]]},
        "requires": [[0, 1, ["torch>=2; extra == 'gpu'"]]],
    }
    path = tmp_path / "example.json.gz"
    path.write_bytes(encode(content))
    assert as_plain(histories._decoded(path)) == content
