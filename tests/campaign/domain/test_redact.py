from __future__ import annotations

import pytest

from campaign.domain.redact import MASK, SECRET_ENV, redact_argv, redact_env, redact_text


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "WANDB_API_KEY",
        "DB_PASSWORD",
        "MY_SECRET",
        "GITHUB_TOKEN",
        "hf_token",
        "PGPASSWORD",
    ],
)
def test_secret_names(name: str) -> None:
    assert SECRET_ENV.match(name)


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_ALGO",
        "CUDA_VISIBLE_DEVICES",
        "NCCL_MIN_NCHANNELS",
        "TOKENIZERS_PARALLELISM",
        "VLLM_CPU_KVCACHE_SPACE",
        "MAX_TOKENS",
    ],
)
def test_ordinary_names(name: str) -> None:
    assert not SECRET_ENV.match(name)


def test_redact_env_masks_only_secret_values() -> None:
    env = {"HF_TOKEN": "hf_abc", "NCCL_ALGO": "Tree", "OPENAI_API_KEY": "sk-x"}
    assert redact_env(env) == {"HF_TOKEN": MASK, "NCCL_ALGO": "Tree", "OPENAI_API_KEY": MASK}
    assert env["HF_TOKEN"] == "hf_abc"  # the input is not modified


def test_redact_text_uses_environment_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plainvalue42")
    text = "connecting with plainvalue42 to the hub"
    assert redact_text(text) == f"connecting with {MASK} to the hub"


def test_redact_text_given_secrets_and_shapes() -> None:
    text = (
        "key sk-proj-ABCDEFGHIJKLMNOPQRSTUV hf_abcdefghijklmnopqrstuvwx "
        "Authorization: Bearer eyJhbGciOi.payload.sig custom-pass-123 and 1"
    )
    out = redact_text(text, secrets=["custom-pass-123", "1"])
    assert "sk-proj" not in out and "hf_abcdef" not in out and "eyJhbGciOi" not in out
    assert "custom-pass-123" not in out
    assert out.endswith("and 1")  # too-short values are not secrets worth destroying text for
    assert redact_text("x", secrets={"NCCL_ALGO": "Tree"}) == "x"
    assert redact_text("uses Tree", secrets={"NCCL_ALGO": "Treeeee", "A_TOKEN": "uses Tree"}) == MASK


def test_redact_argv() -> None:
    argv = [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--api-key",
        "s3cr3t-value",
        "--hf-token=hf_zzz",
        "--max-num-batched-tokens",
        "8192",
        "HF_TOKEN=abc",
        "--served-model-name",
        "m x",
    ]
    out = redact_argv(argv)
    assert "s3cr3t-value" not in out and "hf_zzz" not in out and "abc" not in out
    assert "--max-num-batched-tokens 8192" in out
    assert "--api-key '***'" in out and "'--hf-token=***'" in out and "'HF_TOKEN=***'" in out
    assert "'m x'" in out


@pytest.mark.parametrize(
    "token",
    [
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)
def test_known_token_shapes_are_masked_and_flagged(token: str) -> None:
    from campaign.domain.redact import token_shape

    assert token_shape(token) and token not in redact_text(f"echo {token} done")


def test_a_url_password_is_masked_and_the_rest_kept() -> None:
    assert redact_text("dsn=postgres://app:db58secret@db:5432/app") == "dsn=postgres://***@db:5432/app"
    assert redact_text("see https://example.com/a:b/c@d") == "see https://example.com/a:b/c@d"


def test_a_remembered_value_is_masked_whatever_its_name() -> None:
    from campaign.domain.redact import expand_env_refs

    value = "plain-looking-" + "v" * 10
    assert redact_text(f"x={value}") == f"x={value}"
    assert expand_env_refs({"DB_DSN": "${SOME_VAR}"}, {"SOME_VAR": value}) == {"DB_DSN": value}
    assert redact_text(f"x={value}") == "x=***"
