"""The ``slotflight serve`` command line: arguments and entry point."""

from __future__ import annotations

import argparse

from ._gateway import serve

__all__ = ["add_serve_arguments", "run_serve"]


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``slotflight serve`` to ``parser``."""
    parser.add_argument(
        "--upstream-base-url",
        required=True,
        help="base URL of the OpenAI-compatible model server (for example http://127.0.0.1:8080/v1)",
    )
    parser.add_argument("--api-key", default=None, help="API key sent to the model server")
    parser.add_argument(
        "--token", default=None, help="require 'Authorization: Bearer TOKEN' on /v1/ routes"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--redis-url",
        default=None,
        help="keep streams in Redis (redis://host:port/db) so several instances share them",
    )
    parser.add_argument(
        "--drain-s",
        type=float,
        default=10.0,
        help="on SIGTERM, seconds running streams may still finish before they end"
        " with 'shutting_down' (default 10)",
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
        api_key=args.api_key,
        token=args.token,
        host=args.host,
        port=args.port,
        redis_url=args.redis_url,
        cors_origins=args.cors_origins,
        drain_s=args.drain_s,
    )
    return 0
