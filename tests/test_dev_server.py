"""The embedded dev server: one server per SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from oma.core.schema.errors import TemporalUnavailableError
from oma.runtime.dev_server import DevServer, free_port, is_listening

pytestmark = pytest.mark.e2e


def test_a_second_server_on_the_same_database_is_refused_naming_the_first(
    tmp_path: Path,
) -> None:
    db = tmp_path / ".oma" / "temporal.db"
    with DevServer(port=free_port(), db_file=db) as first:
        second = DevServer(port=free_port(), db_file=db)
        with pytest.raises(TemporalUnavailableError) as info:
            second.start()
        assert first.address in info.value.message
        assert f"TEMPORAL_ADDRESS={first.address}" in info.value.message
        assert not is_listening(second.address)
    # the first one stopped: the file is free again
    with DevServer(port=free_port(), db_file=db) as third:
        assert is_listening(third.address)
