"""The LLM as planner and analyst, through the official `openai` client.

The client retries connection errors, timeouts, 408/409/429 and 5xx itself
(`max_retries`, exponential backoff from 0.5 s up to 8 s with jitter, or the
server's Retry-After), so a `PlannerUnavailable` here means the endpoint stayed
unusable.  Answers are asked for with a strict JSON schema; an endpoint that
refuses `response_format` (HTTP 400) is asked again without it and its plain
JSON content parsed.  Every answer is validated (pydantic, then the knob space,
dead ends and duplicates) and every call recorded, never with the API key.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

import httpx
import openai
from pydantic import BaseModel, ValidationError

from campaign.domain.models import FailureClass
from campaign.domain.records import ExperimentView
from campaign.domain.redact import redact_text
from campaign.planner.base import (
    AnalysisOutcome,
    PlannerContext,
    PlannerUnavailable,
    ProposalOutcome,
    TriageOutcome,
)
from campaign.planner.prompt import (
    Messages,
    analysis_messages,
    proposal_messages,
    triage_messages,
)
from campaign.planner.schemas import (
    ANALYSIS_MAX_WORDS,
    TRIAGE_SCHEMA,
    AnalysisAnswer,
    CallPurpose,
    LlmCallRecord,
    Proposal,
    Rejection,
    TriageAnswer,
    analysis_schema,
    proposal_schema,
    response_format,
    with_reopened,
)
from campaign.planner.vetting import vet_proposal
from campaign.planner.wire import (
    BadBody,
    Completion,
    one_line,
    parse_completion,
    read_body,
)
from campaign.playbook.schema import KnobSpace, PlannerSpec

#: sent when an endpoint needs no key (a local vLLM/SGLang server); never a secret.
NO_KEY = "no-key"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def parse_json_object(content: str) -> Any:
    """The JSON object in `content`: the whole text, a ```json fence, or the outermost braces."""
    text = content.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    candidates = [text] + ([fence.group(1)] if fence else [])
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{") : text.rindex("}") + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: "[[[[..." nested past the C stack limit
            continue
    raise ValueError(f"answer is not valid JSON: {text[:80]!r}")


def _validation_summary(err: ValidationError) -> str:
    parts = [f"{'.'.join(str(x) for x in e['loc']) or 'answer'}: {e['msg']}" for e in err.errors()[:5]]
    return "answer violates the schema: " + "; ".join(parts)


def _cap(reason: str, limit: int = 400) -> str:
    """A rejection reason as one line of at most `limit` characters (it goes back to the model)."""
    flat = one_line(reason, limit + 1)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_analysis(text: str) -> str:
    """One paragraph of plain text, at most ANALYSIS_MAX_WORDS words."""
    words = _CONTROL.sub(" ", text).split()
    if len(words) <= ANALYSIS_MAX_WORDS:
        return " ".join(words)
    return " ".join(words[:ANALYSIS_MAX_WORDS]) + " …"


class LlmPlanner:
    """Proposes hypotheses, analyses verdicts and triages failures with a chat model."""

    kind = "llm"

    def __init__(
        self,
        spec: PlannerSpec,
        knobs: KnobSpace,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        allowed_flags: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.knobs = knobs
        self.proposal_schema = proposal_schema(knobs, allowed_flags, spec.text_max_chars, spec.max_changes)
        self.analysis_schema = analysis_schema(spec.text_max_chars)
        self.base_url = base_url
        self._secrets = [api_key] if api_key else []
        self._structured = spec.structured
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or NO_KEY,
            timeout=spec.timeout_s,
            max_retries=spec.max_retries,
        )

    # ------------------------------------------------------------------ calls
    def _redact(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def _unavailable(self, err: Exception) -> str:
        where = self._where()
        tries = f"after {self.spec.max_retries} retries"
        if isinstance(err, openai.AuthenticationError):
            return f"planner: {where} refused the API key (HTTP 401; fix: check OPENAI_API_KEY)"
        if isinstance(err, openai.PermissionDeniedError):
            return f"planner: {where} denied access (HTTP 403; fix: check OPENAI_API_KEY and planner.model)"
        if isinstance(err, openai.NotFoundError):
            return f"planner: model '{self.spec.model}' or the API path not found at {where} (HTTP 404; fix: check planner.model and planner.base_url)"
        if isinstance(err, openai.RateLimitError):
            return f"planner: {where} kept rate-limiting (HTTP 429) {tries}"
        if isinstance(err, openai.APITimeoutError):
            return f"planner: no answer from {where} within {self.spec.timeout_s:g} s {tries} (fix: check the endpoint or raise planner.timeout_s)"
        if isinstance(err, openai.APIConnectionError):
            return f"planner: cannot connect to {where} {tries} (fix: check OPENAI_BASE_URL or planner.base_url)"
        if isinstance(err, openai.APIStatusError):
            return f"planner: {where} answered HTTP {err.status_code} {tries}"
        return f"planner: {type(err).__name__} calling {where}"

    def _where(self) -> str:
        return self.base_url or "the default OpenAI endpoint"

    def _fetch(self, args: dict[str, Any]) -> Completion:
        """One request; the body read by us, bounded in size and time (see `wire`)."""
        deadline = time.monotonic() + self.spec.timeout_s
        try:
            with self.client.chat.completions.with_streaming_response.create(**args) as raw:
                body = read_body(raw.iter_bytes(), deadline=deadline)
                content_type = raw.headers.get("content-type", "")
        except httpx.TimeoutException:
            raise BadBody(f"a body that stopped arriving (no data for {self.spec.timeout_s:g} s)") from None
        except httpx.HTTPError as err:
            raise BadBody(f"a body cut off ({type(err).__name__})") from None
        return parse_completion(body, content_type)

    def _complete(
        self,
        purpose: CallPurpose,
        messages: Messages,
        schema_name: str,
        schema: dict[str, Any],
        calls: list[LlmCallRecord],
    ) -> tuple[str, LlmCallRecord, bool]:
        """One answer's text, its (not yet appended) record and whether the endpoint cut it off at
        its length limit (finish_reason "length"); failed calls go to `calls`.

        A 200 whose body is not a chat completion counts against `max_retries` like a
        transport error (the client's own retries cover those)."""
        prompt_hash = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        bad = 0
        while True:
            args: dict[str, Any] = {
                "model": self.spec.model,
                "messages": messages,
                "temperature": self.spec.temperature,
            }
            if self.spec.max_tokens is not None:
                args["max_tokens"] = self.spec.max_tokens
            if self.spec.seed is not None:
                args["seed"] = self.spec.seed
            if self._structured:
                args["response_format"] = response_format(schema_name, schema)
            record = LlmCallRecord(
                purpose=purpose, model=self.spec.model, prompt_hash=prompt_hash, structured=self._structured
            )
            start = time.perf_counter()
            try:
                completion = self._fetch(args)
            except openai.BadRequestError as err:
                record.latency_ms = (time.perf_counter() - start) * 1000
                record.error = self._redact(f"HTTP 400: {one_line(str(err.message))}")[:300]
                calls.append(record)
                if self._structured:  # the endpoint may not support json_schema: ask for plain JSON
                    self._structured = False
                    continue
                raise PlannerUnavailable(f"planner: {self._where()} rejected the request (HTTP 400)", calls) from None
            except openai.OpenAIError as err:
                record.latency_ms = (time.perf_counter() - start) * 1000
                message = self._redact(self._unavailable(err))
                record.error = message
                calls.append(record)
                raise PlannerUnavailable(message, calls) from None
            except BadBody as err:
                record.latency_ms = (time.perf_counter() - start) * 1000
                record.error = self._redact(f"planner: {self._where()} answered HTTP 200 with {err}")[:400]
                calls.append(record)
                bad += 1
                if bad > self.spec.max_retries:
                    raise PlannerUnavailable(f"{record.error} ({bad} answers in a row)", calls) from None
                time.sleep(min(0.25 * 2 ** (bad - 1), 4.0))
                continue
            except Exception as err:  # the endpoint is untrusted: never a traceback
                record.latency_ms = (time.perf_counter() - start) * 1000
                record.error = self._redact(f"planner: {type(err).__name__} calling {self._where()}")
                calls.append(record)
                raise PlannerUnavailable(record.error, calls) from None
            record.latency_ms = (time.perf_counter() - start) * 1000
            record.prompt_tokens = completion.prompt_tokens
            record.completion_tokens = completion.completion_tokens
            # redacted before anything reads it: a key echoed by the model is never recorded or run
            return self._redact(completion.content), record, completion.finish_reason == "length"

    def _answer(self, content: str, model: type[BaseModel], cut: bool = False) -> tuple[BaseModel | None, str | None]:
        try:
            return model.model_validate(parse_json_object(content)), None
        except ValidationError as err:
            return None, _validation_summary(err)
        except ValueError as err:
            if cut:
                limit = (
                    f"planner.max_tokens ({self.spec.max_tokens})" if self.spec.max_tokens else "the endpoint's limit"
                )
                return None, f"answer cut off at {limit} before its JSON closed (fix: a shorter answer)"
            return None, str(err)

    # --------------------------------------------------------------- propose
    def propose(self, ctx: PlannerContext) -> ProposalOutcome:
        used = len({e.hypothesis for e in ctx.view.experiments if e.source == "llm"})
        if used >= self.spec.max_proposals:
            return ProposalOutcome(
                source="llm",
                exhausted=True,
                note=f"planner.max_proposals ({self.spec.max_proposals}) LLM hypotheses already run",
            )
        rejections: list[Rejection] = []
        calls: list[LlmCallRecord] = []
        schema = with_reopened(self.proposal_schema, sorted(ctx.reopened_names()))
        for _ in range(self.spec.max_rejections + 1):
            messages = proposal_messages(ctx, self.knobs, rejections, self.spec.context_tokens)
            content, record, cut = self._complete("propose", messages, "proposal", schema, calls)
            proposal, reason = self._answer(content, Proposal, cut)
            if isinstance(proposal, Proposal):
                hypothesis, problems = vet_proposal(proposal, ctx, self.knobs, self.spec.max_changes)
                reason = "; ".join(problems) if hypothesis is None else None
                if hypothesis is not None:
                    record.output_json = self._redact(proposal.model_dump_json())
                    calls.append(record)
                    return ProposalOutcome(
                        hypothesis=hypothesis,
                        source="llm",
                        proposal=proposal,
                        rejections=rejections,
                        calls=calls,
                        needs_approval=hypothesis.patch is not None,
                    )
            rejection = Rejection(reason=_cap(self._redact(reason or "rejected")), raw=self._redact(content)[:4000])
            record.rejection = rejection.reason
            record.output_json = rejection.raw[:2000]  # what was refused, for the record (redacted)
            calls.append(record)
            rejections.append(rejection)
        return ProposalOutcome(
            source="llm",
            rejections=rejections,
            calls=calls,
            exhausted=True,
            note=f"LLM planner gave up after {len(rejections)} rejected proposals",
        )

    # --------------------------------------------------------------- analyst
    def analyze(self, ctx: PlannerContext, experiment: ExperimentView) -> AnalysisOutcome:
        """A short paragraph, or None (disabled, endpoint down, invalid answer).  Never raises
        for the endpoint: analysis is commentary, the campaign goes on without it."""
        if not self.spec.analyze:
            return AnalysisOutcome()
        calls: list[LlmCallRecord] = []
        try:
            messages = analysis_messages(ctx, experiment, self.spec.context_tokens)
            content, record, cut = self._complete("analyze", messages, "analysis", self.analysis_schema, calls)
        except PlannerUnavailable as err:
            return AnalysisOutcome(calls=err.calls)
        answer, reason = self._answer(content, AnalysisAnswer, cut)
        if not isinstance(answer, AnalysisAnswer):
            record.rejection = self._redact(reason or "rejected")
            return AnalysisOutcome(calls=calls + [record])
        text = self._redact(short_analysis(answer.analysis))
        record.output_json = json.dumps({"analysis": text})
        return AnalysisOutcome(text=text or None, calls=calls + [record])

    def triage(self, log_lines: list[str]) -> TriageOutcome:
        """A failure class for a log the rule table could only call `exited`, or None."""
        calls: list[LlmCallRecord] = []
        lines = [self._redact(line) for line in log_lines]
        try:
            content, record, cut = self._complete(
                "triage", triage_messages(lines, self.spec.context_tokens), "triage", TRIAGE_SCHEMA, calls
            )
        except PlannerUnavailable as err:
            return TriageOutcome(calls=err.calls)
        answer, reason = self._answer(content, TriageAnswer, cut)
        value = answer.failure_class if isinstance(answer, TriageAnswer) else None
        known = {c.value for c in FailureClass} - {FailureClass.exited.value}
        if value in known:
            record.output_json = json.dumps({"failure_class": value})
            return TriageOutcome(failure_class=FailureClass(value), calls=calls + [record])
        record.rejection = self._redact(reason or f"not a known failure class: {str(value)[:60]!r}")
        return TriageOutcome(calls=calls + [record])
