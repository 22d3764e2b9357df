"""A run input's file, read as JSON the way ``oma run`` reads one and
``oma acp`` its team file, with the reason a file cannot be read said in one
line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from oma.core.schema.errors import InvalidRunInputError


def run_input_json(file: Path) -> Any:
    """The JSON value in FILE (a run input, or ``oma acp``'s team file).

    Raises ``InvalidRunInputError`` saying why it cannot be read: the file's
    error, not UTF-8, not JSON (where), nested too deep."""
    try:
        return json.loads(file.read_text())
    except OSError as e:
        raise InvalidRunInputError(f"cannot read {file}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidRunInputError(f"{file} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise InvalidRunInputError(f"{file} is not valid JSON: {e}") from None
    except RecursionError:
        raise InvalidRunInputError(f"{file} nests its JSON too deep to read") from None
