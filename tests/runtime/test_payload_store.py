"""The payload store (``OMA_PAYLOAD_STORE``, ``oma.runtime.payload_store``)
without Temporal: its configuration, the directory store's files, the S3
store on a real S3-compatible server (``s3_server``: moto's server mode), the
data converter that keeps payloads there, and the codec server that reads
them back. tests/runtime/test_stored_runs.py runs them on the dev server."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import aiohttp
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from oma.core.contracts.encoding import ENCRYPTED_ENCODING
from oma.core.schema.errors import (
    OMAError,
    PayloadStoreInvalidError,
    PayloadStoreMissingError,
    PayloadStoreUnavailableError,
    StoredPayloadInvalidError,
    StoredPayloadMissingError,
)
from oma.runtime.codec import AesGcmCodec, new_key, parse_keys
from oma.runtime.codec_server import codec_app, serve
from oma.runtime.converter import data_converter
from oma.runtime.dev_server import free_port
from oma.runtime.payload_store import (
    THRESHOLD_BYTES,
    PayloadStore,
    reference_of,
    store_from_env,
)
from tests.support.s3_server import S3Server

KEYS = parse_keys(new_key("store-key"))
BIG = "x" * (THRESHOLD_BYTES + 1024)
"""A value whose payload is past the threshold."""

NO_TARGET = StorageDriverStoreContext()
"""The store context of a payload no workflow or activity is named for."""


def payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=data)


async def retrieve(store: PayloadStore, claim: dict[str, str]) -> Payload:
    [found] = await store.driver.retrieve(
        StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data=claim)]
    )
    return found


def files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


# -- configuration --------------------------------------------------------------


def test_the_store_is_a_directory_or_a_bucket_with_a_prefix() -> None:
    directory = PayloadStore.parse("file:///srv/oma/payloads")
    bucket = PayloadStore.parse("s3://oma-payloads/prod/runs/")
    bare = PayloadStore.parse("s3://oma-payloads")

    assert (directory.kind, directory.directory, directory.url) == (
        "file",
        Path("/srv/oma/payloads"),
        "file:///srv/oma/payloads",
    )
    assert (bucket.kind, bucket.bucket, bucket.prefix) == ("s3", "oma-payloads", "prod/runs/")
    assert (bare.bucket, bare.prefix, bare.url) == ("oma-payloads", "", "s3://oma-payloads/")
    assert directory.threshold_bytes == THRESHOLD_BYTES == 256 * 1024


def test_no_store_is_configured_by_an_unset_or_empty_variable() -> None:
    assert store_from_env({}) is None
    assert store_from_env({"OMA_PAYLOAD_STORE": " "}) is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("/srv/oma/payloads", "is not a payload store"),
        ("file://srv/oma/payloads", "names the host 'srv': write three slashes"),
        ("file:relative/dir", "is not an absolute path"),
        ("s3://", "names the bucket '', which is not an S3 bucket name"),
        ("s3://Bad_Bucket/p", "names the bucket 'Bad_Bucket'"),
        ("s3://oma-payloads/a/../b", "has an empty, '.' or '..' segment in its prefix"),
        ("s3://oma-payloads/a//b", "has an empty, '.' or '..' segment in its prefix"),
        ("s3://oma-payloads/p?versioning=1", "has a query, a fragment"),
        ("https://s3.amazonaws.com/oma-payloads", "is not a payload store"),
    ],
)
def test_a_malformed_store_is_refused_naming_the_variable_and_the_forms(
    value: str, why: str
) -> None:
    with pytest.raises(PayloadStoreInvalidError) as raised:
        store_from_env({"OMA_PAYLOAD_STORE": value})

    assert raised.value.code == "PAYLOAD_STORE_INVALID"
    assert raised.value.message.startswith(f"OMA_PAYLOAD_STORE={value!r} {why}")
    assert raised.value.message.endswith(
        "give file:///absolute/path (a directory every client and worker can read) or "
        "s3://bucket/prefix (S3 or an S3-compatible server; endpoint and credentials "
        "from the AWS_* variables)"
    )


def test_a_store_with_credentials_in_it_is_refused_without_repeating_them() -> None:
    with pytest.raises(PayloadStoreInvalidError) as raised:
        PayloadStore.parse("s3://AKIAEXAMPLE:wJalrXUtnFEMI@oma-payloads/p")

    assert "wJalrXUtnFEMI" not in raised.value.message
    assert "a URL with a user or password" in raised.value.message


def test_the_embedded_store_is_the_payloads_directory_beside_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = PayloadStore.beside(Path(".oma") / "temporal.db")

    assert store.directory == tmp_path / ".oma" / "payloads"
    assert store.url == f"file://{tmp_path}/.oma/payloads"


# -- the directory store --------------------------------------------------------------


async def test_the_directory_store_writes_one_file_per_payload_named_by_its_sha256(
    tmp_path: Path,
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    stored = payload(BIG.encode())
    digest = hashlib.sha256(stored.SerializeToString()).hexdigest()

    claims = await store.driver.store(NO_TARGET, [stored, stored])

    assert [c.claim_data for c in claims] == [{"key": f"sha256/{digest[:2]}/{digest}"}] * 2
    assert files(tmp_path) == [tmp_path / "sha256" / digest[:2] / digest]  # no temporary left
    assert (tmp_path / claims[0].claim_data["key"]).read_bytes() == stored.SerializeToString()
    assert await retrieve(store, dict(claims[0].claim_data)) == stored


async def test_storing_a_payload_again_keeps_its_file_and_makes_it_recent(
    tmp_path: Path,
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    [claim] = await store.driver.store(NO_TARGET, [payload(b"1")])
    path = tmp_path / claim.claim_data["key"]
    os.utime(path, (1_000_000, 1_000_000))

    await store.driver.store(NO_TARGET, [payload(b"1")])

    assert path.stat().st_mtime > 1_000_000
    assert files(tmp_path) == [path]


@pytest.mark.parametrize(
    "key",
    [
        "../outside",
        "/etc/passwd",
        "sha256/ab/../../../outside",
        "sha256/cd/ab" + "0" * 62,  # its directory is not its digest's first two
        "sha256/ab/AB" + "0" * 62,
        "",
    ],
)
async def test_the_directory_store_refuses_a_key_it_does_not_write(
    tmp_path: Path, key: str
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path / 'store'}")
    (tmp_path / "outside").write_bytes(payload(b"secret").SerializeToString())

    with pytest.raises(StoredPayloadInvalidError) as raised:
        await retrieve(store, {"key": key})

    assert raised.value.code == "STORED_PAYLOAD_INVALID"
    assert f"names the key {key!r}, which is not one the payload store" in raised.value.message


async def test_a_payload_missing_from_the_directory_store_names_the_file_and_the_store(
    tmp_path: Path,
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    [claim] = await store.driver.store(NO_TARGET, [payload(b"gone")])
    path = tmp_path / claim.claim_data["key"]
    path.unlink()

    with pytest.raises(StoredPayloadMissingError) as raised:
        await retrieve(store, dict(claim.claim_data))

    assert str(raised.value) == (
        f"STORED_PAYLOAD_MISSING: the payload store file://{tmp_path} has no file {path}, "
        "which a reference in this history names: it was deleted, or stored in another "
        "store (every client and worker must have the same OMA_PAYLOAD_STORE)"
    )


async def test_an_altered_file_of_the_directory_store_is_refused(tmp_path: Path) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    [claim] = await store.driver.store(NO_TARGET, [payload(b"kept")])
    (tmp_path / claim.claim_data["key"]).write_bytes(payload(b"forged").SerializeToString())

    with pytest.raises(StoredPayloadInvalidError, match="its SHA-256 differs"):
        await retrieve(store, dict(claim.claim_data))


async def test_a_configured_directory_that_is_not_there_is_not_made(tmp_path: Path) -> None:
    store = PayloadStore.parse(f"file://{tmp_path / 'not-mounted'}")

    with pytest.raises(PayloadStoreUnavailableError, match="is not a directory this process"):
        await store.driver.store(NO_TARGET, [payload(b"1")])

    assert not (tmp_path / "not-mounted").exists()


async def test_the_embedded_directory_is_made_at_the_first_payload(tmp_path: Path) -> None:
    store = PayloadStore.beside(tmp_path / ".oma" / "temporal.db")

    await store.driver.store(NO_TARGET, [payload(b"1")])

    assert len(files(tmp_path / ".oma" / "payloads")) == 1


# -- the S3 store, on a real S3-compatible server ------------------------------------


async def test_the_s3_store_keeps_a_payload_under_its_prefix(s3_server: S3Server) -> None:
    store = PayloadStore.parse(f"s3://{s3_server.bucket}/unit/")
    stored = payload(BIG.encode())

    [claim] = await store.driver.store(NO_TARGET, [stored])

    key = claim.claim_data["key"]
    assert claim.claim_data["bucket"] == s3_server.bucket
    assert key.startswith("v0/d/sha256/")
    kept = s3_server.client().get_object(Bucket=s3_server.bucket, Key=f"unit/{key}")
    assert kept["Body"].read() == stored.SerializeToString()
    assert await retrieve(store, dict(claim.claim_data)) == stored


async def test_the_s3_store_follows_no_reference_into_another_bucket(
    s3_server: S3Server,
) -> None:
    store = PayloadStore.parse(f"s3://{s3_server.bucket}/unit/")
    claim = {"bucket": "someone-elses", "key": "v0/d/sha256/00", "hash_algorithm": "sha256"}

    with pytest.raises(StoredPayloadMissingError) as raised:
        await retrieve(store, {**claim, "hash_value": "00"})

    assert raised.value.message == (
        "a payload of this history is stored in the bucket 'someone-elses' (key "
        f"'v0/d/sha256/00') and this process's payload store is s3://{s3_server.bucket}/unit/: "
        "give every client and worker the same OMA_PAYLOAD_STORE"
    )


@pytest.mark.parametrize("key", ["../other-prefix/v0/x", "v0/../../x", "v0//x", "other/x"])
async def test_the_s3_store_refuses_a_key_outside_what_it_writes(
    s3_server: S3Server, key: str
) -> None:
    store = PayloadStore.parse(f"s3://{s3_server.bucket}/unit/")
    claim = {"bucket": s3_server.bucket, "key": key, "hash_algorithm": "sha256"}

    with pytest.raises(StoredPayloadInvalidError, match="which is not one the payload store"):
        await retrieve(store, {**claim, "hash_value": "00"})


async def test_a_payload_missing_from_the_s3_store_names_the_bucket_and_the_key(
    s3_server: S3Server,
) -> None:
    store = PayloadStore.parse(f"s3://{s3_server.bucket}/unit/")
    [claim] = await store.driver.store(NO_TARGET, [payload(b"gone")])
    key = claim.claim_data["key"]
    s3_server.client().delete_object(Bucket=s3_server.bucket, Key=f"unit/{key}")

    with pytest.raises(StoredPayloadMissingError) as raised:
        await retrieve(store, dict(claim.claim_data))

    assert raised.value.message == (
        f"the payload store s3://{s3_server.bucket}/unit/ cannot give "
        f"s3://{s3_server.bucket}/unit/{key}, which a reference in this history names: "
        "there is no such object: it was deleted, or stored in another store (every client "
        "and worker must have the same OMA_PAYLOAD_STORE)"
    )


async def test_an_s3_store_whose_bucket_does_not_exist_cannot_store(
    s3_server: S3Server,
) -> None:
    store = PayloadStore.parse("s3://no-such-bucket/p")

    with pytest.raises(PayloadStoreUnavailableError) as raised:
        await store.driver.store(NO_TARGET, [payload(b"1")])

    assert raised.value.message.startswith(
        "cannot look up s3://no-such-bucket/p/v0/d/sha256/"
    ) or raised.value.message.startswith("cannot write s3://no-such-bucket/p/v0/d/sha256/")
    assert "NoSuchBucket" in raised.value.message


# -- the data converter ----------------------------------------------------------------


async def test_the_converter_stores_what_the_codec_encrypted(tmp_path: Path) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    converter = data_converter(KEYS, store)

    [sent] = await converter.encode([BIG])

    reference = reference_of(sent)
    assert reference is not None and reference.driver_name == "oma.file"
    [kept] = files(tmp_path)
    on_disk = Payload.FromString(kept.read_bytes())
    assert on_disk.metadata["encoding"] == ENCRYPTED_ENCODING
    assert BIG[:64].encode() not in kept.read_bytes()
    assert await converter.decode([sent], [str]) == [BIG]


async def test_a_payload_under_the_threshold_stays_in_the_history(tmp_path: Path) -> None:
    converter = data_converter(KEYS, PayloadStore.parse(f"file://{tmp_path}"))

    [sent] = await converter.encode(["x" * (THRESHOLD_BYTES - 1024)])

    assert reference_of(sent) is None
    assert files(tmp_path) == []


@pytest.mark.parametrize("has", [None, "s3"])
async def test_a_process_without_the_store_says_which_store_it_needs(
    tmp_path: Path, has: str | None, s3_server: S3Server
) -> None:
    writer = data_converter(None, PayloadStore.parse(f"file://{tmp_path}"))
    [sent] = await writer.encode([BIG])
    reader_store = PayloadStore.parse(f"s3://{s3_server.bucket}/x") if has else None

    with pytest.raises(PayloadStoreMissingError) as raised:
        await data_converter(None, reader_store).decode([sent], [str])

    key = reference_of(sent).claim_data["key"]  # type: ignore[union-attr]
    have = (
        f"this process's payload store is s3://{s3_server.bucket}/x/"
        if has
        else "this process has no payload store"
    )
    assert str(raised.value) == (
        f"PAYLOAD_STORE_MISSING: a payload of this history is kept in a directory payload "
        f"store (key {key!r}) and {have}: set OMA_PAYLOAD_STORE to the store every client "
        "and worker of the namespace shares (file:///path or s3://bucket/prefix; "
        'docs/orchestration.md, "Where large payloads go")'
    )


# -- the codec server ------------------------------------------------------------------


def wire(p: Payload) -> dict[str, object]:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
        "data": base64.b64encode(p.data).decode(),
    }


async def decode_by_codec_server(
    store: PayloadStore, codec: AesGcmCodec | None, sent: Payload
) -> dict[str, object]:
    port = free_port()
    runner = await serve(codec_app(codec, store=store), "127.0.0.1", port)
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"http://127.0.0.1:{port}/decode", json={"payloads": [wire(sent)]}) as answer,
        ):
            assert answer.status == 200
            body: dict[str, object] = await answer.json()
            return body
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_the_codec_server_gives_a_stored_payload_back_decoded(
    tmp_path: Path, encrypted: bool
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    [sent] = await data_converter(KEYS if encrypted else None, store).encode([BIG])

    body = await decode_by_codec_server(store, AesGcmCodec(KEYS) if encrypted else None, sent)

    [plain] = await data_converter(None).encode([BIG])
    assert body == {"payloads": [wire(plain)]}


async def test_the_codec_server_gives_a_reference_it_cannot_follow_back_as_it_is(
    tmp_path: Path,
) -> None:
    store = PayloadStore.parse(f"file://{tmp_path}")
    [sent] = await data_converter(None, store).encode([BIG])
    for kept in files(tmp_path):
        kept.unlink()

    body = await decode_by_codec_server(store, None, sent)

    assert body == {"payloads": [wire(sent)]}


def test_every_store_error_has_a_code_of_its_own() -> None:
    errors: list[type[OMAError]] = [
        PayloadStoreInvalidError,
        PayloadStoreUnavailableError,
        PayloadStoreMissingError,
        StoredPayloadMissingError,
        StoredPayloadInvalidError,
    ]
    assert [e.code for e in errors] == [
        "PAYLOAD_STORE_INVALID",
        "PAYLOAD_STORE_UNAVAILABLE",
        "PAYLOAD_STORE_MISSING",
        "STORED_PAYLOAD_MISSING",
        "STORED_PAYLOAD_INVALID",
    ]
