"""The daemon's configuration file and folders (PROTOCOL §8; docs/architecture.md, decision 6).

`read_config()` reads ``ROBOTA_CONFIG`` or ``$XDG_CONFIG_HOME/robota/config.toml`` and says
which file it read, or that it found none (`LoadedConfig`); `load_config()` is the
configuration alone. A missing default file is the defaults (the offline ``scripted``
provider, no rules, no hooks, no classifier); a ``ROBOTA_CONFIG`` that names no file, or a
default file that is a symbolic link to nothing, is an error naming the path.
Anything else that is wrong — TOML syntax, an unknown key, a wrong type, a provider name that
names nothing, a hook matcher that is not a regular expression — is a `ConfigError` listing
every problem with its TOML path
(``providers.local.base_url: expected string or null, got integer``), raised at daemon start
before anything listens. Messages never echo a value.

Shape (every table forbids unknown keys)::

    default_provider = "scripted"        # a [providers] name, or a built-in kind
    [providers.NAME]                     # kind, base_url?, model?, api_key_env?,
    kind = "openai"                      #   context_window?, max_tokens?, idle_timeout_ms?,
                                         #   connect_timeout_ms?, api_key_command?
    [permissions]                        # allow / ask / deny: lists of pattern strings;
                                         #   protected_reads?, additional_dirs (§10.7)
    [defaults]                           # max_rounds? (new sessions' round limit)
    [instructions]                       # files = ["AGENTS.md"] (project instruction names)
    [classifier]                         # command
    [hooks]                              # Event = [{matcher?, hooks = [{type, command?,
                                         #   timeout?}]}]
    [mcp_servers.NAME]                   # command/args/env/cwd or url/headers, risk?,
                                         #   startup_timeout_ms?, tool_timeout_ms?, enabled?
    [sandbox]                            # mode = "off"|"read-only"|"workspace-write",
                                         #   network = false, writable_roots = []

Hooks are Claude-Code-shaped. Their event names are checked; a handler's `type` is a plain
string: ``"command"`` handlers need a `command`, while a type this build has no executor for is
not a start-up error (PreToolUse then denies with a reason naming it) and its other members are
not interpreted. Permission patterns are only checked for being strings here; the permission
engine refuses malformed ones when a session is built from them.

API keys are never in the file: `api_key_env` names the environment variable the provider
registry reads when it builds a provider, and nothing writes the key anywhere.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, get_args

import msgspec
from msgspec import Meta, Struct
from xdg_base_dirs import xdg_config_home, xdg_runtime_dir, xdg_state_home

from protocol.methods import PositiveInt
from protocol.shapes import SandboxMode
from protocol.validate import Issue, ValidationFailed, convert
from robotad.config_checks import (
    first_per_path,
    in_toml_terms,
    raw_issues,
    toml_path,
    without_foreign_hook_members,
)
from robotad.mcp.config import McpServerConfig

__all__ = [
    "BUILTIN_PROVIDER_KINDS",
    "HOOK_EVENTS",
    "ClassifierConfig",
    "Config",
    "ConfigError",
    "DefaultsConfig",
    "HookEvent",
    "HookHandler",
    "HookMatcher",
    "InstructionsConfig",
    "LoadedConfig",
    "PermissionsConfig",
    "ProviderConfig",
    "ProviderKind",
    "SandboxConfig",
    "config_path",
    "decode_config",
    "load_config",
    "read_config",
    "runtime_dir",
    "state_dir",
]

ProviderKind = Literal["openai", "anthropic", "scripted"]
BUILTIN_PROVIDER_KINDS: tuple[ProviderKind, ...] = ("scripted", "openai", "anthropic")

HookEvent = Literal[
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionDecision",
    "PostToolUse",
    "Stop",
    "StopFailure",
    "PreCompact",
    "PostCompact",
    "PreModelCall",
    "PostModelCall",
]
HOOK_EVENTS: tuple[str, ...] = get_args(HookEvent)

_Name = Annotated[str, Meta(min_length=1)]


class _Table(Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every table: unknown keys refused."""


class ProviderConfig(_Table, frozen=True):
    kind: ProviderKind
    base_url: _Name | None = None
    model: _Name | None = None
    api_key_env: _Name | None = None
    context_window: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    #: PROTOCOL §10.3: the idle deadline of a model call and the bound on opening a connection.
    idle_timeout_ms: PositiveInt = 120_000
    connect_timeout_ms: PositiveInt = 10_000
    #: Run through ``/bin/sh -c`` when the provider is built; its first stdout line is the key.
    api_key_command: _Name | None = None


class PermissionsConfig(_Table, frozen=True):
    """Default rules of new sessions. `protected_reads` (path patterns) replaces the built-in
    list of secrets that ask before being read; `additional_dirs` widen the workspace that
    ``acceptEdits`` writes in without asking (PROTOCOL.md §10.7)."""

    allow: list[str] = msgspec.field(default_factory=list)
    ask: list[str] = msgspec.field(default_factory=list)
    deny: list[str] = msgspec.field(default_factory=list)
    protected_reads: list[str] | None = None
    additional_dirs: list[_Name] = msgspec.field(default_factory=list)


class ClassifierConfig(_Table, frozen=True):
    command: _Name


class HookHandler(_Table, frozen=True):
    """One hook: `type` ``"command"`` runs `command` (timeout in seconds); any other type is
    kept by name only, for the hook runner to report."""

    type: _Name
    command: _Name | None = None
    timeout: Annotated[float, Meta(gt=0)] | None = None


class HookMatcher(_Table, frozen=True):
    """`matcher` absent, empty or ``"*"`` matches every tool; otherwise a regex searched in
    the tool name."""

    hooks: list[HookHandler]
    matcher: str | None = None


class DefaultsConfig(_Table, frozen=True):
    """Defaults of new sessions. `max_rounds` bounds each turn's provider calls (absent: no
    limit)."""

    max_rounds: PositiveInt | None = None


class InstructionsConfig(_Table, frozen=True):
    """Project instructions: the file names looked for from a session's cwd up to its
    repository root (and in the user's config folder)."""

    files: list[_Name] = msgspec.field(default_factory=lambda: ["AGENTS.md"])


class SandboxConfig(_Table, frozen=True):
    """Defaults of new sessions' sandboxes (PROTOCOL.md §10.4); `writable_roots` absolute
    or ``~/``-relative."""

    mode: SandboxMode = "off"
    network: bool = False
    writable_roots: list[str] = msgspec.field(default_factory=list)


class Config(_Table, frozen=True):
    default_provider: _Name = "scripted"
    providers: dict[str, ProviderConfig] = msgspec.field(default_factory=dict)
    permissions: PermissionsConfig = msgspec.field(default_factory=PermissionsConfig)
    defaults: DefaultsConfig = msgspec.field(default_factory=DefaultsConfig)
    instructions: InstructionsConfig = msgspec.field(default_factory=InstructionsConfig)
    classifier: ClassifierConfig | None = None
    hooks: dict[HookEvent, list[HookMatcher]] = msgspec.field(default_factory=dict)
    mcp_servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)
    sandbox: SandboxConfig = msgspec.field(default_factory=SandboxConfig)


class ConfigError(Exception):
    """The configuration file is unusable; `issues` has every problem, each at a TOML path.
    The message lists them and ends with what to do, for the person reading robotad's
    refusal (or robotactl's relay of it)."""

    def __init__(self, path: Path, issues: list[Issue]) -> None:
        self.path = path
        self.issues = issues
        lines = "\n".join(f"  {issue['path'] or '(file)'}: {issue['message']}" for issue in issues)
        super().__init__(
            f"invalid configuration {path}:\n{lines}\nfix the file, then start robotad again "
            "(any robotactl command starts it); it is read only at start"
        )


# -- folders --------------------------------------------------------------------------------


def config_path() -> Path:
    """``ROBOTA_CONFIG``, else ``$XDG_CONFIG_HOME/robota/config.toml``."""
    override = os.environ.get("ROBOTA_CONFIG")
    return Path(override) if override else xdg_config_home() / "robota" / "config.toml"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``ROBOTA_STATE_DIR`` (the state folder itself), else ``$XDG_STATE_HOME/robota``.

    The one definition of the state folder (PROTOCOL.md §8); `environ` defaults to the process's.
    """
    env = os.environ if environ is None else environ
    override = env.get("ROBOTA_STATE_DIR")
    if override:
        return Path(override)
    xdg = env.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "robota"
    return xdg_state_home() / "robota"


def runtime_dir() -> Path:
    """``$XDG_RUNTIME_DIR/robota``, else ``/tmp/robota-$UID`` (where the socket defaults too)."""
    runtime = xdg_runtime_dir()
    return runtime / "robota" if runtime is not None else Path(f"/tmp/robota-{os.getuid()}")


# -- loading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedConfig:
    """A configuration and where it came from: the file `path` when `found`, else the
    defaults, `path` then being the file looked for."""

    config: Config
    path: Path
    found: bool

    def source(self) -> str:
        """The file read, or that there was none and where it was looked for, in words fit
        for robotad's log (``serving … config=…``)."""
        return str(self.path) if self.found else f"none: no file at {self.path}, the defaults"


def load_config(path: Path | None = None) -> Config:
    """The configuration `read_config` reads, without its source."""
    return read_config(path).config


def read_config(path: Path | None = None) -> LoadedConfig:
    """Read and decode the configuration file `path` (`config_path()` by default), saying
    whether one was found; defaults when the default file does not exist. A
    ``ROBOTA_CONFIG`` that names no file is a `ConfigError` naming the path (§10.3)."""
    named = path is None and bool(os.environ.get("ROBOTA_CONFIG"))
    path = config_path() if path is None else path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if named:
            message = "ROBOTA_CONFIG names this file, and it does not exist"
            raise ConfigError(path, [{"path": "", "message": message}]) from None
        if path.is_symlink():  # a link made on purpose, to a file moved or not there yet
            message = (
                f"is a symbolic link to {os.readlink(path)}, which does not exist: restore "
                "that file, or remove the link to run with the defaults"
            )
            raise ConfigError(path, [{"path": "", "message": message}]) from None
        return LoadedConfig(Config(), path, found=False)
    except OSError as exc:
        raise ConfigError(path, [{"path": "", "message": f"cannot read: {exc.strerror}"}]) from None
    try:
        return LoadedConfig(decode_config(data), path, found=True)
    except ValidationFailed as exc:
        raise ConfigError(path, exc.issues) from None


def decode_config(data: bytes | str) -> Config:
    """Decode TOML text strictly; raises `ValidationFailed` with every issue at its TOML path."""
    try:
        text = data.decode() if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise ValidationFailed([{"path": "", "message": "not UTF-8 text"}]) from None
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write first
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationFailed([{"path": "", "message": f"invalid TOML: {exc}"}]) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        message = "invalid TOML: arrays or inline tables nested too deeply"
        raise ValidationFailed([{"path": "", "message": message}]) from None
    issues = raw_issues(raw, BUILTIN_PROVIDER_KINDS)
    shaped = without_foreign_hook_members(raw)
    config: Config | None = None
    try:
        config = convert(shaped, Config)
    except ValidationFailed as exc:
        issues = exc.issues + issues
    if issues or config is None:
        located = [
            {**in_toml_terms(i, Config), "path": toml_path(i["path"])}
            for i in first_per_path(issues)
        ]
        raise ValidationFailed(located)
    return config
