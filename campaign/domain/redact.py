"""Keep secrets out of everything that is recorded (database, journal, logs, handles).

Every command line and environment that leaves the process for a record passes
through here.  Redaction is by name (env vars and flags that look secret), by shape
(tokens with well-known prefixes, URLs with a password, JWTs) and by value: every
value a `${NAME}` reference brought in from the controller's environment is masked
wherever it shows up, whatever the variable is called (a server may echo `MY_PAT`).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"

#: environment variable names whose values are secrets.
SECRET_ENV = re.compile(
    r"^(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|OPENAI_API_KEY|PGPASSWORD"
    r"|.*_(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS)"
    r"|.*(APIKEY|API_KEY|ACCESS_KEY|SECRET_KEY|AUTH_TOKEN))$",
    re.IGNORECASE,
)

#: command-line flags whose value is a secret (`--api-key X`, `--hf-token=X`).
#: Anchored at the end so `--max-num-batched-tokens` is not taken for a token.
SECRET_FLAG = re.compile(
    r"^--?[\w-]*?(api[-_]?key|access[-_]key|secret[-_]key|token|secret|password|passwd)$", re.IGNORECASE
)

#: secrets recognisable by their shape alone.
SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),  # OpenAI-style keys
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),  # Hugging Face tokens
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),  # GitHub fine-grained tokens
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),  # JWTs
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in a URL
    re.compile(r"(?<=Bearer )[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE),
    re.compile(r"(?<=Authorization: )(?!Bearer )\S{8,}", re.IGNORECASE),
)

#: the shapes a literal in a playbook is refused for (the Authorization ones need context)
TOKEN_SHAPES = SECRET_PATTERNS[:7]

#: values shorter than this are not replaced inside free text: replacing every "1"
#: or "on" in a log would destroy it without protecting anything.
_MIN_SECRET_LEN = 6

#: values this process brought in through `${NAME}` (or was told are secret): masked by value
_REMEMBERED: set[str] = set()


def remember_secret(value: str) -> None:
    """Mask `value` in everything this process redacts from now on."""
    if value and len(value) >= _MIN_SECRET_LEN:
        _REMEMBERED.add(value)


def token_shape(value: str) -> bool:
    """Whether `value` holds a recognisable credential (sk-, hf_, github_pat_, ghp_, AWS
    key ids, JWTs, a URL with a password)."""
    return any(p.search(value) for p in TOKEN_SHAPES)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_ENV.match(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` with the values of secret-looking variables masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}


def _secret_values(secrets: Mapping[str, str] | Iterable[str] | None) -> list[str]:
    values = [v for k, v in os.environ.items() if is_secret_name(k)] + list(_REMEMBERED)
    if isinstance(secrets, Mapping):
        values += [v for k, v in secrets.items() if is_secret_name(k)]
    elif secrets is not None:
        values += list(secrets)
    # longest first, so a secret containing another is replaced whole
    return sorted({v for v in values if v and len(v) >= _MIN_SECRET_LEN}, key=len, reverse=True)


def redact_text(text: str, secrets: Mapping[str, str] | Iterable[str] | None = None) -> str:
    """Mask known secret values (from os.environ and `secrets`) and secret-shaped tokens.

    `secrets` is either an environment (only its secret-named values count) or a
    plain list of values to mask.
    """
    for value in _secret_values(secrets):
        text = text.replace(value, MASK)
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact_argv_tokens(argv: Sequence[str], secrets: Mapping[str, str] | Iterable[str] | None = None) -> list[str]:
    """The argv with secret flag values, secret `NAME=value` assignments and
    secret-shaped tokens masked."""
    out: list[str] = []
    mask_next = False
    for token in argv:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        name, eq, _value = token.partition("=")
        if token.startswith("-") and SECRET_FLAG.match(name):
            out.append(f"{name}={MASK}" if eq else token)
            mask_next = not eq
            continue
        if eq and not token.startswith("-") and is_secret_name(name):
            out.append(f"{name}={MASK}")
            continue
        out.append(redact_text(token, secrets))
    return out


def redact_argv(argv: Sequence[str], secrets: Mapping[str, str] | Iterable[str] | None = None) -> str:
    """A shell-quoted, redacted command line for the record."""
    return shlex.join(redact_argv_tokens(argv, secrets))


#: `${NAME}`: an env value taken from the controller's environment at launch, so the
#: playbook, the record and the checkpoints hold the reference, never the secret.
ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class MissingEnvRef(LookupError):
    """A `${NAME}` reference whose variable is not set in the controller's environment."""


def expand_env_refs(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` with every `${NAME}` value replaced by NAME from `environ` (default os.environ)."""
    source = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, value in env.items():
        m = ENV_REF.match(value)
        if m is None:
            out[key] = value
        elif m.group(1) in source:
            out[key] = source[m.group(1)]
            remember_secret(out[key])
        else:
            raise MissingEnvRef(
                f"{key}: ${{{m.group(1)}}} is not set in the controller's environment "
                f"(fix: export {m.group(1)} before `campaign run` or `campaign resume`)"
            )
    return out
