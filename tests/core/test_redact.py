"""Credential redaction (oma/redact.py)."""

from __future__ import annotations

import pytest

from oma.core.rules.redact import redact, redact_values, secret_values


def test_text_without_credentials_is_unchanged() -> None:
    text = "Traceback: task-runner failed; max_tokens: 100, input_tokens=5, sk-short"

    assert redact(text) == text


@pytest.mark.parametrize(
    "key",
    [
        "sk-ant-api03-abcdefGHIJ_klmn-0123456789",
        "sk-proj-AbCdEf0123456789xyz",
        "sk-0123456789abcdefghij",
    ],
)
def test_sk_style_keys_are_redacted(key: str) -> None:
    assert redact(f"using key {key} now") == "using key [redacted] now"


def test_bearer_token_is_redacted_keeping_the_header() -> None:
    assert redact("Authorization: Bearer xyz.abc-123") == "Authorization: Bearer [redacted]"


def test_bearer_token_in_json_headers_is_redacted() -> None:
    assert redact('{"authorization": "bearer abc123"}') == '{"authorization": "bearer [redacted]"}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2 next", "password=[redacted] next"),
        ("PASSWORD: hunter2", "PASSWORD: [redacted]"),
        ("api_key=abc123&page=2", "api_key=[redacted]&page=2"),
        ("apikey = 'abc 123'", "apikey = '[redacted]'"),
        ('{"token": "abc123", "n": 1}', '{"token": "[redacted]", "n": 1}'),
        ("Secret:s3cr3t;", "Secret:[redacted];"),
        ("GITHUB_TOKEN=ghp_0123", "GITHUB_TOKEN=[redacted]"),
        ("client_secret: 'xyz'", "client_secret: '[redacted]'"),
    ],
)
def test_assignment_values_are_redacted_keeping_the_key(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_pem_private_key_block_is_redacted() -> None:
    text = (
        "before\n"
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "MIIEowIBAAKCAQEA0123456789abcdef\n"
        "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n"
        "-----END RSA PRIVATE KEY-----\n"
        "after"
    )

    assert redact(text) == "before\n[redacted]\nafter"


def test_unterminated_pem_private_key_is_redacted_to_the_end() -> None:
    assert redact("x\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq") == "x\n[redacted]"


def test_pem_private_key_whose_begin_was_cut_off_is_redacted() -> None:
    text = "MIIEvQIBADANBgkq\nQUJDREVG==\n-----END PRIVATE KEY-----\nexit 1"

    assert redact(text) == "[redacted]\nexit 1"


def test_public_key_is_not_redacted() -> None:
    text = "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----"

    assert redact(text) == text


def test_redacting_twice_changes_nothing_more() -> None:
    once = redact("token=abc Authorization: Bearer xyz sk-ant-api03-abcdefghijk")

    assert once == "token=[redacted] Authorization: Bearer [redacted] [redacted]"
    assert redact(once) == once


def test_secret_values_are_the_credential_variables_of_the_environment() -> None:
    env = {
        "ANTHROPIC_API_KEY": "value-of-anthropic",
        "GITHUB_TOKEN": "ghp_value_of_github",
        "MY_LLM_CREDS": "value-named-by-an-agent",
        "HOME": "/home/someone-long",
        "DB_PASSWORD": "short",
    }

    assert secret_values(env, extra=["MY_LLM_CREDS"]) == {
        "value-of-anthropic",
        "ghp_value_of_github",
        "value-named-by-an-agent",
    }


def test_codec_keys_are_redacted_entry_by_entry() -> None:
    env = {"OMA_CODEC_KEYS": "a:QUFBQUFBQUFBQUFB,b:QkJCQkJCQkJCQkJC"}

    text = redact_values("using b:QkJCQkJCQkJCQkJC and QUFBQUFBQUFBQUFB", secret_values(env))

    assert text == "using [redacted] and [redacted]"


def test_redact_values_replaces_the_longest_value_whole() -> None:
    assert redact_values("x abcdefgh12 y", {"abcdefgh", "abcdefgh12"}) == "x [redacted] y"
