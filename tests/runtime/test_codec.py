"""The AES-GCM payload codec (``oma.runtime.codec``), its key list, and the codec
server's HTTP surface (``oma.runtime.codec_server``, served on 127.0.0.1 and called
with a real aiohttp client as the Web UI calls it)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload

from oma.core.schema.errors import CodecKeyMissingError, CodecKeysInvalidError
from oma.runtime.codec import AesGcmCodec, WorkerCodec, keys_from_env, new_key, parse_keys
from oma.runtime.codec_server import codec_app, serve
from oma.runtime.dev_server import free_port

pytestmark = pytest.mark.e2e

UI = "http://localhost:8233"
TOKEN = "t0ken"


def json_payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("", "OMA_CODEC_KEYS holds no key; run `oma codec-key` for one"),
        ("nokey", "entry 1 of OMA_CODEC_KEYS is not key_id:base64_key"),
        ("a:!!!", "the key of entry 1 ('a') of OMA_CODEC_KEYS is not base64"),
        ("a:QUFB", "the key of entry 1 ('a') of OMA_CODEC_KEYS is 3 bytes; AES-256 needs 32"),
    ],
)
def test_a_malformed_key_list_is_refused_with_the_entry_named(keys: str, message: str) -> None:
    with pytest.raises(CodecKeysInvalidError) as caught:
        parse_keys(keys)

    assert caught.value.code == "CODEC_KEYS_INVALID"
    assert caught.value.message.startswith(message)


def test_a_repeated_key_id_is_refused() -> None:
    with pytest.raises(CodecKeysInvalidError, match="names key id 'a' twice"):
        parse_keys(f"{new_key('a')},{new_key('a')}")


def test_keys_come_from_the_file_oma_codec_keys_file_names(tmp_path: object) -> None:
    path = f"{tmp_path}/keys"
    with open(path, "w") as f:
        f.write(f"{new_key('new')}\n{new_key('old')}\n")

    keys = keys_from_env({"OMA_CODEC_KEYS_FILE": path})

    assert [k.key_id for k in keys or []] == ["new", "old"]
    assert keys_from_env({}) is None


async def test_the_first_key_encrypts_and_every_key_decrypts() -> None:
    old = parse_keys(new_key("old"))
    rotated = AesGcmCodec([*parse_keys(new_key("new")), *old])

    sealed_old = (await AesGcmCodec(old).encode([json_payload('"x"')]))[0]
    sealed_new = (await rotated.encode([json_payload('"y"')]))[0]

    assert sealed_new.metadata["encryption-key-id"] == b"new"
    assert b'"y"' not in sealed_new.data
    assert [p.data for p in await rotated.decode([sealed_old, sealed_new])] == [b'"x"', b'"y"']


async def test_a_payload_that_does_not_decrypt_comes_back_marked_not_raised() -> None:
    a = AesGcmCodec(parse_keys(new_key("a")))
    other_a = AesGcmCodec(parse_keys(new_key("a")))
    sealed = (await a.encode([json_payload("1")]))[0]

    back = (await other_a.decode([sealed]))[0]

    # another process may hold the right key under that id: a key missing here
    assert back.data == sealed.data
    assert back.metadata["oma-missing-key"].startswith(
        b"the payload does not decrypt with the key OMA_CODEC_KEYS holds as key id 'a'"
    )


async def test_a_plaintext_payload_comes_back_as_it_is() -> None:
    plain = json_payload('{"written": "before encryption was turned on"}')

    back = (await AesGcmCodec(parse_keys(new_key("k"))).decode([plain]))[0]

    assert back == plain


@pytest.mark.parametrize("worker_keys", [None, "other"], ids=["no-key", "other-key"])
async def test_a_worker_codec_raises_codec_key_missing_naming_the_key_id(
    worker_keys: str | None,
) -> None:
    sealed = (await AesGcmCodec(parse_keys(new_key("k1"))).encode([json_payload("1")]))[0]
    inner = AesGcmCodec(parse_keys(new_key(worker_keys))) if worker_keys else None

    with pytest.raises(CodecKeyMissingError) as caught:
        await WorkerCodec(inner).decode([json_payload("2"), sealed])

    assert str(caught.value).startswith(
        "CODEC_KEY_MISSING: the payload is encrypted with key id 'k1'"
    )
    assert "the workflow task is retried until one takes it" in str(caught.value)


async def test_a_worker_codec_reads_plaintext_and_leaves_a_malformed_ciphertext_marked() -> None:
    keys = parse_keys(new_key("k"))
    plain, short = json_payload("1"), sealed_as("k", b"\x01\x02\x03")
    sealed = (await AesGcmCodec(keys).encode([plain]))[0]

    back = await WorkerCodec(AesGcmCodec(keys)).decode([plain, sealed, short])
    keyless = await WorkerCodec(None).decode([plain, short])

    assert back[:2] == [plain, plain]
    assert back[2].metadata["oma-decode-error"].startswith(b"the payload encrypted with key id")
    assert keyless[0] == plain
    assert keyless[1] == short  # unmarked: no key can read it, whoever looks


async def test_a_worker_codec_does_not_take_a_clients_own_reason_for_a_missing_key() -> None:
    forged = sealed_as("nobody", b"\x00" * 40)
    forged.metadata["oma-missing-key"] = b"click here"

    with pytest.raises(CodecKeyMissingError) as caught:
        await WorkerCodec(None).decode([forged])

    assert "click here" not in str(caught.value)
    assert "encrypted with key id 'nobody'" in str(caught.value)


def test_oma_codec_key_prints_a_usable_entry() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "oma.cli", "codec-key", "--key-id", "prod-2"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()

    assert [k.key_id for k in parse_keys(out)] == ["prod-2"]


@pytest.mark.parametrize("key_id", ["a,b", "a:b", "", " padded", "two\nlines"])
def test_oma_codec_key_refuses_an_id_oma_codec_keys_could_not_read_back(key_id: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "oma.cli", "codec-key", "--key-id", key_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (proc.returncode, proc.stdout) == (2, "")
    assert f"CODEC_KEYS_INVALID: {key_id!r} cannot be a key id" in proc.stderr


@pytest.fixture
async def codec_endpoint() -> AsyncIterator[tuple[str, AesGcmCodec]]:
    """The codec server's app on 127.0.0.1 with a key of its own:
    ``(its URL, its codec)``."""
    codec = AesGcmCodec(parse_keys(new_key("k")))
    port = free_port()
    runner = await serve(codec_app(codec, ui_origin=UI, token=TOKEN), "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}", codec
    finally:
        await runner.cleanup()


def wire(payload: Payload) -> dict[str, object]:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
        "data": base64.b64encode(payload.data).decode(),
    }


async def test_the_codec_server_decodes_for_a_caller_with_the_token(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, codec = codec_endpoint
    sealed = (await codec.encode([json_payload('{"a":1}')]))[0]
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default", "Origin": UI}

    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/decode", json={"payloads": [wire(sealed)]}, headers=headers) as r,
    ):
        body = await r.json()
        allowed = r.headers.get("Access-Control-Allow-Origin")

    assert (r.status, allowed) == (200, UI)
    assert body == {
        "payloads": [
            {
                "metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
                "data": base64.b64encode(b'{"a":1}').decode(),
            }
        ]
    }


async def test_the_codec_server_refuses_a_caller_without_the_token(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/encode", json={"payloads": []}) as r:
            status = r.status
        async with http.post(
            f"{url}/encode", json={"payloads": []}, headers={"Authorization": "Bearer wrong"}
        ) as r:
            wrong = r.status

    assert (status, wrong) == (401, 401)


async def test_the_codec_server_answers_the_ui_preflight_for_its_origin_only(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    asks = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-namespace",
    }
    async with aiohttp.ClientSession() as http:
        async with http.options(f"{url}/decode", headers={"Origin": UI, **asks}) as r:
            ours = (r.status, dict(r.headers))
        async with http.options(f"{url}/decode", headers={"Origin": "http://evil", **asks}) as r:
            theirs = (r.status, dict(r.headers))

    assert ours[0] == 204
    assert ours[1]["Access-Control-Allow-Origin"] == UI
    assert ours[1]["Access-Control-Allow-Credentials"] == "true"
    assert "X-Namespace" in ours[1]["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Origin" not in theirs[1]


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8233", "http://[::1]:8233"])
async def test_a_localhost_ui_origin_admits_the_same_ui_at_127_0_0_1(
    codec_endpoint: tuple[str, AesGcmCodec], origin: str
) -> None:
    url, _ = codec_endpoint
    asks = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-namespace",
    }
    async with aiohttp.ClientSession() as http:
        async with http.options(f"{url}/decode", headers={"Origin": origin, **asks}) as r:
            allowed = r.headers.get("Access-Control-Allow-Origin")
        async with http.options(
            f"{url}/decode", headers={"Origin": "http://127.0.0.1:9999", **asks}
        ) as r:
            other_port = r.headers.get("Access-Control-Allow-Origin")

    assert (allowed, other_port) == (origin, None)


async def test_a_refused_ui_request_is_a_401_the_ui_cannot_take_for_payloads(
    codec_endpoint: tuple[str, AesGcmCodec], caplog: pytest.LogCaptureFixture
) -> None:
    url, codec = codec_endpoint
    sealed = (await codec.encode([json_payload('"x"')]))[0]
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/decode", json={"payloads": [wire(sealed)]}, headers={"Origin": UI}) as r,
    ):
        status, kind, text = r.status, r.content_type, await r.text()
        allowed = r.headers.get("Access-Control-Allow-Origin")

    # the Web UI reads any JSON answer as the decoded payloads (null each)
    assert (status, kind, allowed) == (401, "text/plain", UI)
    assert text.startswith("no Authorization header") and "--codec-auth" in text
    assert [r.getMessage() for r in caplog.records if r.name == "oma.codec_server"] == [
        f"refused POST /decode (401): {text}"
    ]


async def test_a_loopback_codec_server_refuses_a_request_for_another_host_name() -> None:
    codec = AesGcmCodec(parse_keys(new_key("k")))
    port = free_port()
    runner = await serve(codec_app(codec, loopback_only=True), "127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as http:
            statuses = []
            for host in ("rebound.example.com", f"localhost:{port}", f"127.0.0.1:{port}"):
                async with http.post(
                    f"http://127.0.0.1:{port}/encode",
                    json={"payloads": []},
                    headers={"Host": host},
                ) as r:
                    statuses.append(r.status)
    finally:
        await runner.cleanup()

    assert statuses == [403, 200, 200]


async def test_the_codec_server_says_what_is_wrong_with_a_bad_body(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/decode", data="not json", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as r,
    ):
        status, text = r.status, await r.text()

    assert status == 400
    assert text.startswith('expected {"payloads": [...]} of protobuf JSON payloads')


def sealed_as(key_id: str, data: bytes) -> Payload:
    """A payload marked encrypted under ``key_id`` carrying ``data`` as it is."""
    return Payload(
        metadata={"encoding": b"binary/encrypted", "encryption-key-id": key_id.encode()},
        data=data,
    )


@pytest.mark.parametrize("size", [0, 1, 7, 8, 11, 12, 27])
async def test_a_ciphertext_too_short_to_be_one_comes_back_marked_not_raised(size: int) -> None:
    codec = AesGcmCodec(parse_keys(new_key("k")))

    back = (await codec.decode([sealed_as("k", b"\x01" * size)]))[0]

    assert back.data == b"\x01" * size
    assert back.metadata["oma-decode-error"].decode() == (
        f"the payload encrypted with key id 'k' is {size} bytes, shorter than a nonce and "
        "a tag (28 bytes): it is not one OMA's codec wrote"
    )


async def test_a_ciphertext_whose_plaintext_is_not_a_payload_comes_back_marked() -> None:
    keys = parse_keys(new_key("k"))
    nonce = b"\x00" * 12
    sealed = AESGCM(keys[0].key).encrypt(nonce, b"\xff\xff\xff", None)

    back = (await AesGcmCodec(keys).decode([sealed_as("k", nonce + sealed)]))[0]

    assert back.metadata["oma-decode-error"].decode() == (
        "the payload decrypts with key id 'k' but holds no Temporal payload: "
        "it is not one OMA's codec wrote"
    )


async def test_the_codec_server_gives_back_a_malformed_ciphertext_as_it_is(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    short = sealed_as("k", b"\x01\x02\x03")
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/decode",
            json={"payloads": [wire(short)]},
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as r,
    ):
        status, body = r.status, await r.json()

    assert (status, body) == (200, {"payloads": [wire(short)]})


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "YWJj!!!!"}, "data"),
        ({"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "\u00e9"}, "data"),
        ({"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "YWJjZ"}, "data"),
        ({"metadata": {"encoding": "anNvbi9w bGFpbg=="}, "data": "MQ=="}, "metadata 'encoding'"),
    ],
    ids=["punctuation", "non-ascii", "one-char-group", "metadata"],
)
async def test_the_codec_server_refuses_data_or_metadata_that_is_not_base64(
    codec_endpoint: tuple[str, AesGcmCodec], payload: dict[str, object], named: str
) -> None:
    url, _ = codec_endpoint
    body = {"payloads": [wire(json_payload("1")), payload]}
    async with aiohttp.ClientSession() as http:
        for path in ("/decode", "/encode"):
            async with http.post(
                f"{url}{path}", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r:
                status, text = r.status, await r.text()

            assert (status, text) == (
                400,
                f'expected {{"payloads": [...]}} of protobuf JSON payloads: the {named} of '
                "payload 1 is not base64",
            )


async def test_the_codec_server_reads_url_safe_and_unpadded_base64(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    # protobuf JSON accepts either alphabet, with or without padding
    body = {"payloads": [{"metadata": {"encoding": "anNvbi9wbGFpbg"}, "data": "-_8"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/decode", json=body, headers={"Authorization": f"Bearer {TOKEN}"}) as r,
    ):
        status, answer = r.status, await r.json()

    assert status == 200
    assert answer["payloads"][0]["data"] == base64.b64encode(b"\xfb\xff").decode()


async def test_the_codec_server_refuses_a_non_ascii_token_as_a_wrong_one(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/encode",
            json={"payloads": []},
            headers={"Authorization": "Bearer t\u00f6ken"},
        ) as r,
    ):
        status = r.status

    assert status == 401


async def test_a_codec_server_with_a_non_ascii_token_accepts_it() -> None:
    token = "t\u00f6ken-\u2603"
    port = free_port()
    codec = AesGcmCodec(parse_keys(new_key("k")))
    runner = await serve(codec_app(codec, token=token), "127.0.0.1", port)
    try:
        async with aiohttp.ClientSession() as http:
            statuses = []
            for given in (token, "t\u00f6ken-x"):
                async with http.post(
                    f"http://127.0.0.1:{port}/encode",
                    json={"payloads": []},
                    headers={"Authorization": f"Bearer {given}"},  # sent as UTF-8
                ) as r:
                    statuses.append(r.status)
    finally:
        await runner.cleanup()

    assert statuses == [200, 401]


async def test_the_codec_server_says_a_body_that_is_not_utf8_is_not_utf8(
    codec_endpoint: tuple[str, AesGcmCodec],
) -> None:
    url, _ = codec_endpoint
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/decode",
            data=b'{"payloads": [\xff]}',
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        ) as r,
    ):
        status, text = r.status, await r.text()

    assert (status, text) == (400, "the body is not UTF-8 text")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--token", ""], {}, "--token is empty"),
        (["--token", "   "], {}, "--token is empty"),
        ([], {"OMA_CODEC_SERVER_TOKEN": ""}, "OMA_CODEC_SERVER_TOKEN is empty"),
    ],
    ids=["flag", "blank-flag", "env"],
)
def test_oma_codec_server_refuses_an_empty_token_rather_than_serve_without_one(
    args: list[str], env: dict[str, str], message: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "oma.cli", "codec-server", "--port", str(free_port()), *args],
        env={**os.environ, "OMA_CODEC_KEYS": new_key("k"), "OMA_FORKSERVER": "0", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 2, proc.stdout
    assert message in proc.stderr
    assert "OMA codec server at" not in proc.stdout
