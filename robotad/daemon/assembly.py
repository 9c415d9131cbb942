"""Turning configuration and stored records into `Session`s (the daemon's one factory).

`SessionAssembler` holds what every session of the daemon shares — the configuration (provider
registry, default permissions), the compiled hooks, the classifier command, the log folder, the
spill store, the project rules and the trace flag — and builds:

- `settings_for_create(params)`: a new session's `SessionSettings` from ``session/create``'s
  params and the configured defaults, refusing every problem at once (G-108, G-215): a cwd that
  is not an existing directory (G-102), an unknown provider, a script for a non-scripted
  provider or a malformed step, each malformed permission pattern at its own path. Nothing is
  built (no SDK client is opened just to validate).
- `build(record, ...)`: the `Session` of a record, not started: the record's settings, the
  project rules of its canonical cwd merged in (G-115; an MCP rule stored state holds that
  robotad now refuses is left out, decisions 73 and 81), the session log (``logs/<id>.jsonl``),
  the built-in tools and the hooks, and its provider over the daemon's pooled SDK client of
  that configuration (`robotad.providers.clients`). Refusals are located in the params of a
  session being made (`new_at`) or reported as the stored session's (see `build`).

A scripted provider's steps live in the record's ``settings.script``; the Session reports the
unconsumed ones in its snapshot, so a reload continues the script where it stopped.

Its size is one concept: every path from configuration, params and records to a Session, with
each refusal located where its setting came from, kept in one place so no two disagree.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec
import trio
from msgspec import UNSET, UnsetType
from xdg_base_dirs import xdg_config_home

from protocol.errors import InvalidParams, Issue, NotAllowed
from protocol.methods import CreateParams
from protocol.validate import ValidationFailed
from robotad.agent.provider import Provider
from robotad.config import Config, config_path
from robotad.daemon.inert_rules import without_inert_rules
from robotad.daemon.project_rules import ProjectRules, ProjectRulesUnreadable
from robotad.mcp.config import spec_of_wire, wire_issues
from robotad.mcp.hub import McpHub, SessionTools
from robotad.prompting import SessionFacts, compose_system_prompt, load_instructions, render_default
from robotad.providers import (
    DEFAULT_MODELS,
    ProviderPlan,
    ProviderUnavailable,
    plan_provider,
    provider_of,
    resolve_provider_config,
)
from robotad.providers.clients import ClientPool
from robotad.providers.scripted import decode_script
from robotad.providers.unavailable import UnavailableProvider
from robotad.sandbox import UNCONFINED, Confinement, SandboxPolicy, SandboxProbe, policy_for_session
from robotad.session.context_window import AUTO_COMPACT_THRESHOLD
from robotad.session.errors import InvalidSetting
from robotad.session.hooks.config import HooksConfig, parse_hooks_config
from robotad.session.hooks.runner import HookRunner
from robotad.session.permissions.classifier import Classifier, CommandClassifier
from robotad.session.permissions.patterns import parse_rules
from robotad.session.permissions.sensitive_paths import SensitivePaths
from robotad.session.ports import EventSink, SessionStorePort
from robotad.session.session import Session
from robotad.session.settings import SessionOptions, SessionServices
from robotad.storage import fsio
from robotad.storage.log_files import FileLogSink
from robotad.storage.record import Permissions, SessionRecord, SessionSettings
from robotad.storage.session_log import SessionLogger
from robotad.storage.spill import SpillStore
from robotad.tools import builtin_tools

__all__ = ["SessionAssembler"]

log = logging.getLogger("robotad.daemon")

_RULE_KINDS: Final = ("allow", "ask", "deny")

T = TypeVar("T")
RuleKind = Literal["allow", "ask", "deny"]
#: Persists one project rule for a cwd; raises when it cannot.
PersistProjectRule = Callable[[str, str, str], Awaitable[None]]


@dataclass(frozen=True)
class SessionAssembler:
    """Builds the daemon's sessions; see the module docstring."""

    config: Config
    hooks: HooksConfig
    classifier_command: str | None
    logs_dir: Path
    project_rules: ProjectRules
    spill: SpillStore | None = None
    trace: bool = False
    mcp: McpHub | None = None
    #: What this machine can sandbox (probed at start; again at a create while it says no).
    sandbox_probe: SandboxProbe = field(default_factory=SandboxProbe)
    #: robota's own folders and config file, read-only inside any sandbox.
    protected_folders: tuple[str, ...] = ()
    #: The configured providers' key variables (``api_key_env``): no model-run command gets
    #: them, whatever they are called.
    key_variables: frozenset[str] = frozenset()
    #: The daemon's SDK clients, shared by its sessions; None: each provider builds its own.
    clients: ClientPool | None = None

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        state_dir: Path,
        spill: SpillStore | None = None,
        trace: bool = False,
        mcp: McpHub | None = None,
        sandbox_probe: SandboxProbe | None = None,
        clients: ClientPool | None = None,
    ) -> SessionAssembler:
        """The assembler of a daemon with `config` and its state under `state_dir`. Raises
        `InvalidParams` listing every default rule under ``[permissions]`` that is malformed
        (``$.permissions.allow[0]``…) and every problem of a hooks table the session layer
        refuses (under ``$.hooks``), so a bad pattern stops the start, never a later create."""
        issues: list[Issue] = []
        for kind in _RULE_KINDS:
            try:
                parse_rules(list(getattr(config.permissions, kind)), f"$.permissions.{kind}")
            except InvalidSetting as exc:
                issues.extend(exc.issues)
        try:
            hooks = parse_hooks_config(msgspec.to_builtins(config.hooks))
        except InvalidSetting as exc:
            issues.extend(exc.issues)
        if issues:
            raise InvalidParams(issues)
        command = config.classifier.command if config.classifier is not None else None
        # robota's config folder exists from now on, so a sandbox can keep it read-only: one a
        # sandboxed command could create would be read (hooks and all) at the next start.
        with contextlib.suppress(OSError):  # a home we cannot write: no command can either
            fsio.ensure_private_dir(xdg_config_home() / "robota")
        return cls(
            config=config,
            hooks=hooks,
            classifier_command=command,
            logs_dir=state_dir / "logs",
            project_rules=ProjectRules(state_dir),
            spill=spill,
            trace=trace,
            mcp=mcp,
            sandbox_probe=sandbox_probe or SandboxProbe(),
            clients=clients,
            # robota's config folder, the config file wherever ROBOTA_CONFIG puts it (not its
            # folder, which may be the user's home), and the state folder.
            protected_folders=(
                str(xdg_config_home() / "robota"),
                str(config_path()),
                str(state_dir),
            ),
            key_variables=frozenset(
                spec.api_key_env for spec in config.providers.values() if spec.api_key_env
            ),
        )

    # -- new sessions ------------------------------------------------------------------------

    def create_issues(self, params: CreateParams, left_out: frozenset[str]) -> list[Issue]:
        """What `settings_for_create` refuses in `params` (nothing is built or written): the
        checks a ``session/create`` refused for its shape still reports (PROTOCOL §2). With
        ``provider`` left out (its shape was wrong), the script is not judged against the
        default provider: the one meant is unknown."""
        try:
            self.settings_for_create(params)
        except InvalidParams as exc:
            if "provider" in left_out:
                return [i for i in exc.issues if not i["path"].startswith("$.script")]
            return exc.issues
        return []

    def settings_for_create(self, params: CreateParams) -> SessionSettings:
        """The settings of a new session, or one `InvalidParams` listing every problem."""
        issues: list[Issue] = []
        if not os.path.isdir(params.cwd):
            issues.append({"path": "$.cwd", "message": "not an existing directory"})
        defaults = self.config.permissions
        rules: dict[str, list[str]] = {}
        given = params.permissions
        for kind in _RULE_KINDS:
            chosen = getattr(given, kind) if given is not UNSET else UNSET
            texts = list(getattr(defaults, kind)) if chosen is UNSET else list(chosen)
            rules[kind] = texts
            where = f"$.permissions.{kind}"
            try:
                parse_rules(texts, where)
            except InvalidSetting as exc:
                issues.extend(exc.issues)
        provider_name = params.provider if params.provider is not UNSET else None
        name = provider_name or self.config.default_provider
        script = msgspec.to_builtins(params.script) if params.script is not UNSET else None
        model: str | None = None
        try:
            spec = resolve_provider_config(name, self.config)
        except ProviderUnavailable as exc:
            issues.append({"path": "$.provider", "message": str(exc)})
        else:
            model = _given(params.model) or spec.model or DEFAULT_MODELS[spec.kind][0]
            if script is not None and spec.kind != "scripted":
                issues.append(
                    {"path": "$.script", "message": "a script is only for a scripted provider"}
                )
            elif script is not None:
                try:
                    decode_script(script, path="$.script")
                except ValidationFailed as exc:
                    issues.extend(exc.issues)
        mcp_servers = (
            msgspec.to_builtins(params.mcp_servers) if params.mcp_servers is not UNSET else None
        )
        if mcp_servers is not None:
            issues.extend(wire_issues(mcp_servers, reserved=self.config.mcp_servers.keys()))
        if issues or model is None:
            raise InvalidParams(issues)
        threshold = params.auto_compact_threshold
        max_rounds = params.max_rounds
        if max_rounds is UNSET and self.config.defaults.max_rounds is not None:
            max_rounds = self.config.defaults.max_rounds
        sandbox = self.config.sandbox
        policy = policy_for_session(
            sandbox.mode if params.sandbox is UNSET else params.sandbox,
            network=sandbox.network,
            writable_roots=sandbox.writable_roots,
        )
        return SessionSettings(
            provider=name,
            model=model,
            permission_mode=params.permission_mode,
            permissions=Permissions(**rules),
            auto_compact_threshold=(AUTO_COMPACT_THRESHOLD if threshold is UNSET else threshold),
            context_window=params.context_window,
            idle_timeout_ms=params.idle_timeout_ms,
            max_rounds=max_rounds,
            script=UNSET if script is None else script,
            mcp_servers=mcp_servers if mcp_servers else UNSET,
            sandbox=policy if policy.confined else UNSET,
        )

    def system_prompt_for(
        self, params: CreateParams, settings: SessionSettings
    ) -> tuple[str | None, list[str] | None]:
        """Blocking (it reads files): a new session's system prompt and the instruction files
        it holds. A model gets robota's default prompt (or `systemMessage`, which replaces it)
        followed by the project instructions of its cwd (`robotad.prompting`); the scripted
        provider, which is no model, gets `systemMessage` as given and no instructions (None:
        not looked for)."""
        given = params.system_message if params.system_message is not UNSET else None
        if resolve_provider_config(settings.provider, self.config).kind == "scripted":
            return given, None
        cwd = Path(params.cwd)
        base = given
        if base is None:
            facts = SessionFacts(
                cwd=str(cwd),
                tools=[tool.name for tool in builtin_tools()],
                permission_mode=settings.permission_mode,
                sandbox=None if settings.sandbox is UNSET else settings.sandbox.mode,
            )
            base = render_default(facts)
        user_dir = xdg_config_home() / "robota"
        files = load_instructions(cwd, self.config.instructions.files, user_dir)
        return compose_system_prompt(base, files), [str(item.path) for item in files]

    # -- sessions of records -----------------------------------------------------------------

    async def build(
        self,
        record: SessionRecord,
        *,
        event_sink: EventSink,
        store: SessionStorePort,
        persist_project_rule: PersistProjectRule,
        source: Literal["startup", "resume"],
        new_at: str | None = None,
    ) -> Session:
        """The Session of `record` (not started yet). Nothing is left open when it raises:
        its provider is closed, its own MCP servers no longer registered with the hub.

        `new_at` is None for a stored session being loaded; for a session that does not exist
        yet it says where its settings came from, so refusals are located there: ``"$"`` for
        ``session/create``'s params (``$.cwd``, ``$.provider``…), a record root such as
        ``$.artifact.record`` for an import (``$.artifact.record.settings.provider``…).

        Raises `InvalidParams` (a new session's bad setting), `TransitionRefused` (``auto``
        without a classifier), `NotAllowed` (a stored session whose cwd is gone, or
        unreadable project rules, or a new session's sandbox that cannot be set up here). A
        stored session whose provider cannot be built now (its table removed, its key
        variable unset) loads with an `UnavailableProvider`: readable, its model calls
        failing with why. A stored sandboxed session loads without a usable sandbox; its
        commands are then refused one by one, never run unconfined.
        """
        settings = record.settings
        self._require_mcp_rules(record, new_at)
        sandbox = settings.sandbox if settings.sandbox is not UNSET else UNCONFINED
        if sandbox.confined and new_at is not None:
            await self._require_sandbox(sandbox)
        project = await self._project_rules_for(record, new_at)
        provider = await self._provider_for(record, new_at)
        # The session's view of the daemon's store: it reads back only its own results.
        spill = self.spill.scoped(record.id) if self.spill is not None else None
        tool_source: SessionTools | None = None
        try:
            # Registers the session's own MCP servers with the hub: from here on, a failure
            # takes the registration back (`SessionTools.aclose`), or `mcp/list` would list,
            # and start, the servers of a session that does not exist.
            tool_source = self._mcp_tools(record)
            return Session(
                cwd=Path(record.cwd),
                provider=provider,
                tools=builtin_tools(
                    Confinement(
                        sandbox, probe=self.sandbox_probe, protected=self.protected_folders
                    ),
                    self.key_variables,
                    spill,
                ),
                options=self._options_of(record, self._rules_of(record, project, new_at), sandbox),
                services=self._services_of(
                    record,
                    store=store,
                    event_sink=event_sink,
                    persist_project_rule=persist_project_rule,
                    spill=spill,
                    tool_source=tool_source,
                ),
                session_id=record.id,
                history=list(record.messages),
                turn_count=record.turn_count,
                source=source,
            )
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                if tool_source is not None:
                    await tool_source.aclose()
                await provider.aclose()
            if isinstance(exc, InvalidSetting):
                raise _relocated(exc, new_at or "$") from None
            raise

    def _services_of(
        self,
        record: SessionRecord,
        *,
        store: SessionStorePort,
        event_sink: EventSink,
        persist_project_rule: PersistProjectRule,
        spill: SpillStore | None,
        tool_source: SessionTools | None,
    ) -> SessionServices:
        """What the daemon provides the session of `record`: its ports, its log
        (``logs/<id>.jsonl``, opened at its first line), its hooks and classifier."""
        cwd = record.cwd

        async def persist(rule: str, kind: str) -> None:
            await persist_project_rule(cwd, rule, kind)

        return SessionServices(
            store=store,
            logger=SessionLogger(record.id, FileLogSink.for_session(self.logs_dir, record.id)),
            event_sink=event_sink,
            persist_project_rule=persist,
            spill=spill,
            hooks=self._hook_runner(record),
            classifier=self._classifier(),
            sensitive_paths=SensitivePaths(
                cwd,
                protected_reads=self.config.permissions.protected_reads,
                additional_dirs=self.config.permissions.additional_dirs,
            ),
            tool_source=tool_source,
            discard_settled_journals=True,  # the daemon hosts the journal (G-099)
        )

    # -- parts -------------------------------------------------------------------------------

    def _require_mcp_rules(self, record: SessionRecord, new_at: str | None) -> None:
        """`InvalidParams` at each MCP server of a new session's `record` (`new_at` not None)
        that breaks the rules of ``session/create``'s (its name, one transport): an import's
        are checked here, their shape by the record decoder. A stored session's load as
        they are."""
        servers = record.settings.mcp_servers
        if new_at is None or servers is UNSET:
            return
        if issues := wire_issues(servers, reserved=self.config.mcp_servers.keys()):
            raise _relocated(InvalidParams(issues), new_at)

    async def _require_sandbox(self, sandbox: SandboxPolicy) -> None:
        """Refuse a new session whose sandbox this machine cannot set up, saying how to go on
        without it."""
        support = await self.sandbox_probe.current()
        if not support.available:
            raise NotAllowed(
                f"the {sandbox.mode} sandbox cannot be set up: {support.reason}. Without it: "
                'sandbox "off" (robotactl new --sandbox off), or another [sandbox] mode in '
                "config.toml for every new session"
            )

    async def _project_rules_for(
        self, record: SessionRecord, new_at: str | None
    ) -> dict[str, list[str]]:
        """The project rules of the record's cwd (G-115), refused when they cannot be read or
        the cwd is no existing directory (see `build` for how each is reported)."""
        try:
            project = await trio.to_thread.run_sync(self._project_rules_of, record.cwd)
        except (ProjectRulesUnreadable, OSError) as exc:
            doing = f"cannot load session {record.id}" if new_at is None else "cannot create it"
            raise NotAllowed(f"{doing}: {exc}") from None
        if project is not None:
            return project
        if new_at is None:
            raise NotAllowed(
                f"cannot load session {record.id}: its working directory {record.cwd} is not "
                "an existing directory (create it again to go on with the session; "
                "`robotactl export` and `robotactl log` work meanwhile)"
            )
        at = "$.cwd" if new_at == "$" else f"{new_at}.cwd"
        raise InvalidParams([{"path": at, "message": "not an existing directory"}])

    async def _provider_for(self, record: SessionRecord, new_at: str | None) -> Provider:
        """The record's provider, built (in a thread when it runs a key command); refusals
        located as `build` says."""
        settings = record.settings
        make_plan = functools.partial(
            self._plan,
            settings.provider,
            model=settings.model,
            script=settings.script if settings.script is not UNSET else None,
            context_window=_given(settings.context_window),
        )
        try:
            if self._runs_a_key_command(settings.provider):
                plan = await trio.to_thread.run_sync(make_plan)
            else:
                plan = make_plan()
        except ProviderUnavailable as exc:
            if new_at is not None:
                at = "$.provider" if new_at == "$" else f"{new_at}.settings.provider"
                raise InvalidParams([{"path": at, "message": str(exc)}]) from None
            # A stored session stays readable; its model calls say why they cannot be made.
            log.warning(
                "session %s loads without its provider %s: %s", record.id, settings.provider, exc
            )
            return UnavailableProvider(
                settings.provider, settings.model, _given(settings.context_window), str(exc)
            )
        except InvalidParams as exc:
            raise _relocated(exc, new_at or "$") from None
        return await self._provider_of(plan)

    async def _provider_of(self, plan: ProviderPlan) -> Provider:
        """The provider of `plan`, over the pooled SDK client of its configuration (built in
        a worker thread when the pool lacks it); over its own client when there is no pool."""
        if self.clients is None or not plan.uses_sdk_client:
            return provider_of(plan)
        lease = await self.clients.lease(
            plan.kind,
            base_url=plan.base_url,
            api_key=plan.api_key,
            connect_timeout=plan.connect_timeout,
        )
        try:
            return provider_of(plan, lease)
        except BaseException:
            await lease.release()
            raise

    def _rules_of(
        self, record: SessionRecord, project: Mapping[str, Sequence[str]], new_at: str | None
    ) -> dict[str, list[str]]:
        """The session's rules: the record's own, then its project's (G-115). An MCP rule
        robotad now refuses that stored state holds — the project's file, a stored session's
        record — is left out, and the daemon's log says so: robotad took those before it
        refused them, they never matched a call, and refusing one now would refuse the
        session (`robotad.daemon.inert_rules`; an import's are left out before it is built).
        A new session's own are refused as any bad rule is."""
        own: dict[str, list[str]] = msgspec.to_builtins(record.settings.permissions)
        if new_at is None:
            own = without_inert_rules(own, f"session {record.id}")
        return _merged(own, project)

    def _options_of(
        self,
        record: SessionRecord,
        rules: dict[str, list[str]],
        sandbox: SandboxPolicy,
    ) -> SessionOptions:
        """The user's choices of `record`, with `rules` (its own and its project's)."""
        settings = record.settings
        idle = settings.idle_timeout_ms
        return SessionOptions(
            system_message=record.system_prompt,
            permissions=rules,
            permission_mode=settings.permission_mode,
            auto_compact_threshold=settings.auto_compact_threshold,
            context_window=_given(settings.context_window),
            idle_timeout=None if idle is UNSET else idle / 1000,
            round_cap=_given(settings.max_rounds),
            instructions=_given(settings.instructions),
            trace=self.trace,
            sandbox=sandbox,
        )

    def _plan(
        self,
        name: str,
        *,
        model: str | None,
        script: list[dict[str, Any]] | None,
        context_window: int | None,
    ) -> ProviderPlan:
        steps = None
        if script is not None:
            try:
                steps = decode_script(script, path="$.script")
            except ValidationFailed as exc:
                raise InvalidParams(exc.issues) from None
        return plan_provider(
            name, self.config, model=model, script=steps, context_window=context_window
        )

    def _runs_a_key_command(self, name: str) -> bool:
        """Whether building provider `name` runs an ``api_key_command`` (blocking: a thread)."""
        spec = self.config.providers.get(name)
        return spec is not None and spec.api_key_command is not None

    def _project_rules_of(self, cwd: str) -> dict[str, list[str]] | None:
        """Blocking: the project rules of `cwd`, or None when it is no existing directory. An
        MCP rule robotad now refuses is left out (see `_rules_of`)."""
        if not (os.path.isabs(cwd) and os.path.isdir(cwd)):
            return None
        where = f"the project rules of {cwd} ({self.project_rules.path_for(cwd)})"
        return without_inert_rules(self.project_rules.load(cwd), where)

    def _mcp_tools(self, record: SessionRecord) -> SessionTools | None:
        """The session's MCP tool source: the daemon's servers and its own; None when it has
        none (its turns then never look for any)."""
        own = record.settings.mcp_servers
        specs = [spec_of_wire(server, record.cwd) for server in own] if own is not UNSET else []
        if self.mcp is None or not (specs or self.mcp.has_daemon_servers):
            return None
        return self.mcp.for_session(record.id, specs)

    def _hook_runner(self, record: SessionRecord) -> HookRunner | None:
        if not self.hooks:
            return None
        return HookRunner(self.hooks, cwd=Path(record.cwd), session_id=record.id)

    def _classifier(self) -> Classifier | None:
        if self.classifier_command is None:
            return None
        return CommandClassifier(self.classifier_command)


def _given(value: T | UnsetType) -> T | None:
    """An optional record setting as Python's None when absent."""
    return None if isinstance(value, UnsetType) else value


def _merged(
    own: Mapping[str, Sequence[str]], project: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """The session's rules followed by the project's, each once."""
    merged: dict[str, list[str]] = {}
    for kind in _RULE_KINDS:
        rules = list(own.get(kind, ()))
        rules.extend(rule for rule in project.get(kind, ()) if rule not in rules)
        merged[kind] = rules
    return merged


def _relocated(exc: InvalidParams | InvalidSetting, where: str) -> InvalidParams:
    """The wire's refusal of the settings `exc` names, located inside the record at `where`
    (``$`` = as they are, for a create, whose params name each setting as the session does):
    ``$.permissions.allow[0]`` becomes ``<where>.settings.permissions.allow[0]``."""
    if where == "$":
        return InvalidParams(exc.issues)
    root = where + ".settings"
    return InvalidParams(
        [{"path": root + issue["path"][1:], "message": issue["message"]} for issue in exc.issues]
    )
