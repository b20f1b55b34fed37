"""What the campaign needs to know about one inference engine: how to start it, what
environment it wants, how its failures read, and where its live counters are.

A profile is data plus two pure functions (log rules, metrics parser), so the campaign
picks everything engine-specific from `tools.engines.engine_profile(name)`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from campaign.domain import server_env
from campaign.domain.models import Failure, ReportedConfig
from tools.engines.reported import from_server_args
from tools.engines.startup_log import StartupConfig
from tools.server.triage import Phase, TriageRule, classify


class EngineMetrics(BaseModel):
    """Live counters of a running engine, in engine-neutral names.  None: not reported."""

    engine: str
    spec_accept_length: float | None = None  # mean tokens emitted per verify step, bonus token included
    spec_acceptance_rate: float | None = None  # accepted / proposed draft tokens
    spec_drafts: float | None = None
    spec_draft_tokens: float | None = None
    spec_accepted_tokens: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    running_requests: float | None = None
    waiting_requests: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    server_args: dict[str, Any] = Field(default_factory=dict)


MetricsParser = Callable[[str], EngineMetrics]
StartupReader = Callable[[Iterable[str]], StartupConfig]
#: server args (as the metrics endpoint returns them) -> (flags, env)
ReportedArgs = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


class EngineProfile(BaseModel):
    """How to launch and read one engine.  `command` is a `render_argv` template with
    {python} {model} {host} {port} {flags}: the engine's documented launch form, with no
    settings of one machine in it (those belong in a playbook, where a plan shows them).
    tools.engines.launch_spec.build_launch is the one place it becomes a command line."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    command: str
    #: the form used when the playbook names the interpreter (`server.python`); None: `command`
    python_command: str | None = None
    #: the engine's top-level Python package: the node's fingerprint reads its installed
    #: version with the launch command's interpreter (tools.engines.version_probe)
    package: str = ""
    #: variables every launch of the engine needs on any machine (the shipped engines need
    #: none; what one machine needs goes in its playbook's env, where a plan shows it)
    env_defaults: dict[str, str] = Field(default_factory=dict)
    #: the engine's own variables a server inherits from the node (names or PREFIX*),
    #: on top of campaign.domain.server_env.DEFAULT_BASE_ENV; see `base_env_for`.
    own_env: tuple[str, ...] = ()
    health_path: str = "/health"
    metrics_path: str
    metrics_fallback_paths: tuple[str, ...] = ()  # tried in order when metrics_path answers 404 (older releases)
    startup_timeout_s: float = 600.0
    triage_rules: tuple[TriageRule, ...] = ()
    metrics_parser: MetricsParser
    #: the engine counts the bonus token in its accepted tokens (SGLang-style), else +1 (vLLM)
    bonus_token_in_accepted: bool = False
    #: reported setting -> the flags it follows from: the server resolves it from them
    #: (a KV-derived request limit, a speculative default), so a hypothesis that declares
    #: one of them expects it to move; the confound check reads this from the record
    reported_derived: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: another spelling of a flag -> the name the server reports it under (`tp` -> `tp-size`)
    reported_aliases: dict[str, str] = Field(default_factory=dict)
    #: reported settings that differ per launch besides tools.engines.reported.PER_LAUNCH
    reported_skip: tuple[str, ...] = ()
    #: the settings (flags, env) in the server args its metrics endpoint returns (SGLang's
    #: `/server_info`, the simulated node's); None: it returns none, the start-up log is read
    reported_args: ReportedArgs | None = None
    #: reads the config the engine logs at start-up (tools.engines.startup_log); None: it logs none
    startup_reader: StartupReader | None = None

    @property
    def reports_in_log(self) -> bool:
        return self.startup_reader is not None

    def base_env_for(self, override: list[str] | None) -> list[str]:
        """A launch's base list: the playbook's `server.base_env` when set, else the
        default list and this engine's own variables."""
        return server_env.resolve(override, self.own_env)

    def env(self, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        """The engine's defaults, then the config's own values on top."""
        return {**self.env_defaults, **dict(overrides or {})}

    def accept_length_between(self, before: EngineMetrics | None, after: EngineMetrics | None) -> float | None:
        """Tokens emitted per verify step over a window (one workload), from the cumulative
        draft and accepted-token counters read before and after it."""
        if before is None or after is None or after.spec_drafts is None or after.spec_accepted_tokens is None:
            return None
        drafts = after.spec_drafts - (before.spec_drafts or 0.0)
        accepted = after.spec_accepted_tokens - (before.spec_accepted_tokens or 0.0)
        if drafts <= 0:
            return None
        return round(accepted / drafts + (0.0 if self.bonus_token_in_accepted else 1.0), 3)

    def reported_config(
        self, metrics: EngineMetrics | None, log_lines: Iterable[str] | None = None
    ) -> ReportedConfig | None:
        """The configuration the server says it runs, for the confound check; None when
        the engine reports none (tools.engines.reported: the sources by engine).  Flags are
        in the command line's spelling, secret-named settings masked, per-launch fields
        left out; the profile's derivations and aliases travel with it."""
        args = metrics.server_args if metrics is not None else {}
        read = functools.partial(
            from_server_args, derived=self.reported_derived, aliases=self.reported_aliases, skip=self.reported_skip
        )
        if self.reported_args is not None and args:
            flags, env = self.reported_args(args)
            return read(flags, env=env)
        if self.startup_reader is not None and log_lines is not None:
            startup = self.startup_config(log_lines)
            return read(startup.resolved or startup.args)
        return None

    def classify(self, exit_code: int | None, log_lines: list[str], *, phase: Phase = "start") -> Failure:
        return classify(exit_code, log_lines, phase=phase, extra_rules=self.triage_rules)

    def startup_config(self, log_lines: Iterable[str]) -> StartupConfig:
        """The effective config the server logged at start-up (empty when it logs none)."""
        return self.startup_reader(log_lines) if self.startup_reader else StartupConfig(engine=self.name)

    def parse_metrics(self, body: str) -> EngineMetrics:
        return self.metrics_parser(body)

    def read_metrics(self, url: str, *, timeout_s: float = 10.0) -> EngineMetrics:
        """Scrape a live server (`url` = http://host:port)."""
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            for path in (self.metrics_path, *self.metrics_fallback_paths):
                response = client.get(url.rstrip("/") + path)
                if response.status_code != 404:
                    break
        response.raise_for_status()
        return self.metrics_parser(response.text)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator
