"""The one place a server's command line and environment are built.

`campaign run` (tools.node_runtime), `campaign plan`, the planner model's server and the
real-engine tests all call `build_launch`, so what a plan prints is what a run starts.
Inputs: the engine's profile, the config under test, the model, the port and what the
node fills in (its python, host, the simulated node's settings, `{source}`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from campaign.domain.config import render_argv
from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig
from campaign.domain.redact import ENV_REF, MissingEnvRef, expand_env_refs, redact_argv, redact_env
from tools.engines.base import EngineProfile
from tools.server.launch import LaunchRequest

#: what `campaign plan` prints where a launch's port is picked when it starts
PORT_PLACEHOLDER = "<port>"


class ServerLaunch(BaseModel):
    """One server's command line and the environment it gets on top of its base list."""

    argv: list[str]
    env: dict[str, str]
    #: node variables the server inherits (names or PREFIX*): the profile's list or the playbook's
    base_env: list[str]
    health_path: str
    startup_timeout_s: float
    expect_model: str

    def shown(self) -> tuple[str, dict[str, str]]:
        """The command line and env with secrets masked: what a person may read.  A
        `${NAME}` reference (a plan's) is shown as written: it holds no secret."""
        masked = redact_env(self.env)
        return redact_argv(self.argv, self.env), {k: v if ENV_REF.match(v) else masked[k] for k, v in self.env.items()}

    def request(self, *, port: int, log_path: str, host: str | None = None) -> LaunchRequest:
        """The launch itself (`host` None: the executor's)."""
        return LaunchRequest(
            argv=self.argv,
            env=self.env,
            log_path=log_path,
            port=port,
            host=host,
            health_path=self.health_path,
            startup_timeout_s=self.startup_timeout_s,
            expect_model=self.expect_model,
            base_env=self.base_env,
        )


def launch_template(profile: EngineProfile, command: str | None = None, python: str | None = None) -> str:
    """The command template: the playbook's `server.command`, else the engine's form for
    a named interpreter when `server.python` is set, else the engine's documented form."""
    if command:
        return command
    if python and profile.python_command:
        return profile.python_command
    return profile.command


def build_launch(
    profile: EngineProfile,
    config: EffectiveConfig,
    *,
    model: str,
    port: int | str,
    fill: Mapping[str, object],
    command: str | None = None,
    python: str | None = None,
    health: str | None = None,
    startup_timeout_s: float | None = None,
    base_env: list[str] | None = None,
    expand_secrets: bool = True,
) -> ServerLaunch:
    """The server for `config`: its argv from the template (`fill` gives {python} {host}
    and the node's own placeholders; `python`, the playbook's, wins) and its env: the
    profile's defaults, then the config's env on top.  `${NAME}` references are filled in
    from the controller's environment unless `expand_secrets` is False (a plan shows them)."""
    values = {**fill, "model": model, "port": port}
    if python:
        values["python"] = python
    argv = render_argv(launch_template(profile, command, python), config, **values)
    env = dict(config.env)
    if expand_secrets:
        try:
            env = expand_env_refs(env)
        except MissingEnvRef as exc:
            raise UserError(f"env: {exc}") from None
    return ServerLaunch(
        argv=argv,
        env=profile.env(env),
        base_env=profile.base_env_for(base_env),
        health_path=health or profile.health_path,
        startup_timeout_s=startup_timeout_s or profile.startup_timeout_s,
        expect_model=model,
    )
