"""Hypothesis sources: the playbook queue (default) and an LLM behind the `openai` client.

`select_planner` picks one from the playbook and the environment.  The LLM module
(and `openai`) is imported only when an LLM planner is really built.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from campaign.domain.errors import UserError
from campaign.domain.redact import remember_secret
from campaign.planner.base import (
    AnalysisOutcome,
    Planner,
    PlannerContext,
    PlannerUnavailable,
    ProposalOutcome,
    TriageOutcome,
)
from campaign.planner.queue import QueuePlanner, propose_or_queue
from campaign.planner.schemas import LlmCallRecord, Proposal, Rejection
from campaign.playbook.schema import PlannerSpec, Playbook

NO_ENDPOINT = (
    "planner.kind is llm but no endpoint is configured (set OPENAI_BASE_URL and/or OPENAI_API_KEY, "
    "or planner.base_url): the playbook queue drives the campaign"
)


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_endpoint(spec: PlannerSpec, environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(base_url, api_key): planner.base_url, else OPENAI_BASE_URL.  The key goes only where
    it is meant: OPENAI_API_KEY to OPENAI_BASE_URL (or OpenAI's own), `planner.api_key_env`
    to `planner.base_url`; a playbook naming another base_url gets no key.  A key is never
    sent in clear text (http://) to a host other than this machine."""
    env = os.environ if environ is None else environ
    base_url = spec.base_url or env.get("OPENAI_BASE_URL") or None
    api_key = env.get(spec.api_key_env or "OPENAI_API_KEY") or None
    if spec.api_key_env and not api_key:
        raise UserError(f"planner.api_key_env: {spec.api_key_env} is not set (fix: export {spec.api_key_env}=<key>)")
    if spec.base_url and not spec.api_key_env and not _same_url(spec.base_url, env.get("OPENAI_BASE_URL", "")):
        api_key = None  # the environment's key belongs to the environment's endpoint
    if api_key and base_url:
        parts = urlsplit(base_url)
        if parts.scheme != "https" and not _loopback(parts.hostname or ""):
            where = "planner.base_url" if spec.base_url else "OPENAI_BASE_URL"
            raise UserError(
                f"{where}: {parts.scheme}://{parts.hostname} would get the planner's API key in clear "
                "text (fix: an https:// URL, or an endpoint on this machine)"
            )
    if api_key:
        remember_secret(api_key)
    return base_url, api_key


def select_planner(playbook: Playbook, environ: Mapping[str, str] | None = None) -> tuple[Planner, str | None]:
    """The planner the playbook asks for, and a one-line notice when it falls back to the queue."""
    spec = playbook.planner
    if spec.kind == "queue":
        return QueuePlanner(), None
    base_url, api_key = resolve_endpoint(spec, environ)
    if base_url is None and api_key is None:
        return QueuePlanner(), NO_ENDPOINT
    from campaign.planner.llm import LlmPlanner

    return LlmPlanner(
        spec, playbook.knobs, api_key=api_key, base_url=base_url, allowed_flags=playbook.server.allowed_flags
    ), None


__all__ = [
    "NO_ENDPOINT",
    "AnalysisOutcome",
    "LlmCallRecord",
    "Planner",
    "PlannerContext",
    "PlannerUnavailable",
    "Proposal",
    "ProposalOutcome",
    "QueuePlanner",
    "Rejection",
    "TriageOutcome",
    "propose_or_queue",
    "resolve_endpoint",
    "select_planner",
]
