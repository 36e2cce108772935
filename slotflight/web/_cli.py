"""The ``slotflight serve`` command line: arguments and entry point.

Secrets come from the environment (:data:`API_KEY_ENV`, :data:`TOKEN_ENV`): a value on
the command line is visible to every user of the machine (``ps``, ``/proc``). The
``--api-key`` and ``--token`` options remain, and win over the environment.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from .._serving import arguments
from .._serving.protocol import DEFAULT_HEADER_TIMEOUT_S
from ._gateway import check_root_path, serve
from ._request import RequestLimits
from ._sse import DEFAULT_PING_S, MIN_PING_S, check_ping_s

__all__ = ["API_KEY_ENV", "TOKEN_ENV", "add_serve_arguments", "run_serve"]

#: The environment variable holding the API key sent to the model server.
API_KEY_ENV: Final = "SLOTFLIGHT_API_KEY"
#: The environment variable holding the bearer token clients must present.
TOKEN_ENV: Final = "SLOTFLIGHT_TOKEN"


def _ping_seconds(text: str) -> float:
    """A ``--ping-s`` value: 0 (no pings) or a finite number >= ``MIN_PING_S``."""
    try:
        return check_ping_s(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 0 or a number of seconds >= {MIN_PING_S:g}, got {text!r}"
        ) from None


def _root_path(text: str) -> str:
    """A ``--root-path`` value: empty, or a path such as ``/api`` (no trailing ``/``)."""
    try:
        return check_root_path(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a path such as /api, without a trailing /, got {text!r}"
        ) from None


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``slotflight serve`` to ``parser``."""
    parser.add_argument(
        "--upstream-base-url",
        required=True,
        help="base URL of the OpenAI-compatible model server (for example http://127.0.0.1:8080/v1)",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"API key sent to the model server (prefer ${API_KEY_ENV}: a command line is"
        " visible to every user of the machine)",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"require 'Authorization: Bearer TOKEN' on /v1/ routes (prefer ${TOKEN_ENV})",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=arguments.port, default=8000, help="port to listen on")
    parser.add_argument(
        "--redis-url",
        type=arguments.redis_url,
        default=None,
        help="keep streams in Redis (redis://host:port/db) so several instances share them",
    )
    parser.add_argument(
        "--drain-s",
        type=arguments.seconds,
        default=10.0,
        help="on SIGTERM, seconds running streams may still finish before they end"
        " with 'shutting_down' (default 10)",
    )
    parser.add_argument(
        "--header-timeout",
        type=arguments.positive_seconds,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds a connection may take to send a request's headers"
        f" (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--body-timeout",
        type=arguments.positive_seconds,
        default=RequestLimits.body_timeout_s,
        metavar="SECONDS",
        help="seconds a request's body may take to arrive after its headers"
        f" (default {RequestLimits.body_timeout_s:g})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=arguments.byte_count,
        default=RequestLimits.max_body_bytes,
        metavar="BYTES",
        help="largest request body; images come inline, so raise it for them"
        f" (default {RequestLimits.max_body_bytes})",
    )
    parser.add_argument(
        "--ping-s",
        type=_ping_seconds,
        default=DEFAULT_PING_S,
        metavar="SECONDS",
        help="seconds between keep-alive comments on a stream, under the idle timeout of"
        f" any proxy in front (0: none; default {DEFAULT_PING_S:g})",
    )
    parser.add_argument(
        "--root-path",
        type=_root_path,
        default="",
        metavar="PATH",
        help="the path prefix a reverse proxy serves the gateway under and removes before"
        " it forwards (for example /api), so that Location names where to reconnect",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=None,
        dest="cors_origins",
        metavar="ORIGIN",
        help="allow this origin by CORS (repeatable; CORS is off without it)",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run the gateway for parsed ``args`` until interrupted; the exit status."""
    serve(
        args.upstream_base_url,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
        token=args.token or os.environ.get(TOKEN_ENV) or None,
        host=args.host,
        port=args.port,
        redis_url=args.redis_url,
        cors_origins=args.cors_origins,
        drain_s=args.drain_s,
        header_timeout_s=args.header_timeout,
        root_path=args.root_path,
        ping_s=args.ping_s,
        limits=RequestLimits(body_timeout_s=args.body_timeout, max_body_bytes=args.max_body_bytes),
    )
    return 0
