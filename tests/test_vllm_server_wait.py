"""Before trl waits for a vLLM server: an address no server can answer at is refused, a silent one is waited for."""

from __future__ import annotations

import logging
import socket

import pytest

from grpo_compat.core.errors import GRPOSettingsError
from grpo_compat.fixes.vllm_server import check_server_address, server_address


def test_an_unresolvable_host_is_refused_with_the_command_that_starts_a_server():
    with pytest.raises(GRPOSettingsError, match=r"host 'grpo-compat-no-such-host\.invalid' .* does not resolve") as e:
        check_server_address(None, "grpo-compat-no-such-host.invalid", 8000, 240.0)
    assert "trl vllm-serve --model <your model> --host grpo-compat-no-such-host.invalid --port 8000" in str(e.value)


@pytest.mark.parametrize("base_url", ["http://localhost:70000", "http://localhost:port"])
def test_a_port_that_cannot_exist_is_refused(base_url):
    with pytest.raises(GRPOSettingsError, match="is not a TCP port"):
        check_server_address(base_url, "0.0.0.0", 8000, 240.0)


def test_a_server_still_starting_is_waited_for_after_one_line_that_says_what_for(caplog):
    with socket.socket() as unused:  # a port nothing listens on: a server that has not bound it yet
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with caplog.at_level(logging.WARNING, logger="grpo_compat"):
        check_server_address(None, "127.0.0.1", port, 240.0)  # no error: trl goes on waiting
    (line,) = [r.getMessage() for r in caplog.records]
    assert f"Waiting for the vLLM server at http://127.0.0.1:{port}" in line and "up to 240.0 s" in line


def test_a_server_that_answers_is_passed_without_a_word(caplog):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with caplog.at_level(logging.WARNING, logger="grpo_compat"):
            check_server_address(f"http://127.0.0.1:{server.getsockname()[1]}/", "0.0.0.0", 8000, 240.0)
    assert caplog.records == []


def test_the_base_url_wins_over_host_and_port_as_in_trl():
    assert server_address("http://example.org:9000/", "0.0.0.0", 8000) == (
        "http://example.org:9000",
        "example.org",
        9000,
    )
    assert server_address(None, "10.0.0.1", 8001) == ("http://10.0.0.1:8001", "10.0.0.1", 8001)
