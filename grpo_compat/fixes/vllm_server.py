"""Before trl waits for a vLLM server: refuse an address no server can ever answer at, say what the wait is for.

trl's client polls ``GET <base_url>/health`` every 2 s until ``vllm_server_timeout`` (240 s by default) and
logs only "Server is not up yet. Retrying in 2.0 seconds..." (census row 21). A host name that does not
resolve, or a port outside 1-65535, never answers: refused at once. A host that resolves but does not answer
yet may be a server still loading its model: waited for, as upstream does, after one line that names the
address, the timeout and the command that starts the server.
"""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

from grpo_compat.core.errors import GRPOSettingsError

logger = logging.getLogger("grpo_compat")
SERVE = "trl vllm-serve --model <your model> --host {host} --port {port}"


def server_address(base_url: str | None, host: str, port: int) -> tuple[str, str, object]:
    """(url, host, port) the client will poll; the port as given (an int unless the URL holds something else)."""
    if base_url is None:
        return f"http://{host}:{port}", host, port
    parts = urlsplit(base_url)
    try:
        found: object = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # urlsplit refuses a port out of range or not a number
        found = parts.netloc.rpartition(":")[2]
    return base_url.rstrip("/"), parts.hostname or "", found


def check_server_address(base_url: str | None, host: str, port: object, timeout: float) -> None:
    """Refuse an unresolvable host or an impossible port; log what the wait is for when nothing answers yet."""
    url, host, port = server_address(base_url, host, port)  # type: ignore[arg-type]
    fix = f"start the server with `{SERVE.format(host=host or '<host>', port=port)}` and point vllm_server_host / "
    fix += "vllm_server_port (or vllm_server_base_url) at it"
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise GRPOSettingsError(
            f"vLLM server port {port!r} ({url}) is not a TCP port (1-65535): no server can answer. Fix: {fix}."
        )
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        if error.errno == socket.EAI_AGAIN:  # the name server did not answer: it may later
            logger.warning("vLLM server host %r could not be resolved yet (%s); trl keeps trying", host, error)
        else:
            raise GRPOSettingsError(
                f"vLLM server host {host!r} ({url}) does not resolve ({error.strerror}): no server can answer there. "
                f"Fix: {fix}."
            ) from None
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        logger.warning(
            "Waiting for the vLLM server at %s: trl polls %s/health every 2 s for up to %s s (vllm_server_timeout), "
            'logging "Server is not up yet". A server still loading its model answers when ready; if none was '
            "started, %s.",
            url,
            url,
            timeout,
            fix,
        )
