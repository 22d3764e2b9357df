"""The built-in tools (``oma.activities.tools``) against real temporary
directories and real ``bash`` processes; no Temporal."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import oma.activities.tools.glob as glob_module
import oma.activities.tools.grep as grep_module
from oma.activities.tools import (
    BUILTIN_TOOLS,
    PRESETS,
    ToolContext,
    ToolOutput,
    cap_output,
    resolve_in_sandbox,
    run_builtin,
)
from oma.activities.tools.sandbox import PathOutsideSandboxError
from tests.support.procs import alive

PAUSE = f"{sys.executable} -c 'import signal; signal.pause()'"


@pytest.fixture
def outside(cwd: Path) -> Path:
    return cwd.parent / "outside"


async def call(cwd: Path, name: str, **raw: Any) -> ToolOutput:
    return await run_builtin(name, raw, ToolContext(cwd=cwd))


def ok(text: str) -> ToolOutput:
    return ToolOutput(content=text)


def error(text: str) -> ToolOutput:
    return ToolOutput(content=text, is_error=True)


async def wait_for_file(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was not written")


async def wait_dead(*pids: int, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


# -- the registry ------------------------------------------------------------


def test_the_builtin_tools_and_presets() -> None:
    assert list(BUILTIN_TOOLS) == ["bash", "file_read", "file_write", "file_edit", "glob", "grep"]
    assert PRESETS == {
        "readonly": ("file_read", "glob", "grep"),
        "readwrite": ("file_read", "glob", "grep", "file_write", "file_edit"),
        "full": ("file_read", "glob", "grep", "file_write", "file_edit", "bash"),
    }


async def test_an_unknown_tool_is_a_key_error(cwd: Path) -> None:
    with pytest.raises(KeyError):
        await call(cwd, "rm_rf")


def test_the_context_wants_an_absolute_cwd() -> None:
    with pytest.raises(ValueError, match="absolute"):
        ToolContext(cwd=Path("relative"))


# -- input schemas -------------------------------------------------------------


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_has_key(v, key) for v in value)
    return False


@pytest.mark.parametrize("name", list(BUILTIN_TOOLS))
def test_input_schema_has_the_messages_api_shape(name: str) -> None:
    schema = BUILTIN_TOOLS[name].input_schema()

    assert list(schema) == ["type", "properties", "required", "additionalProperties"]
    assert (schema["type"], schema["additionalProperties"]) == ("object", False)
    assert set(schema["required"]) <= set(schema["properties"])
    assert not _has_key(schema, "title") and not _has_key(schema, "$defs")
    assert not _has_key(schema, "anyOf")
    for prop in schema["properties"].values():
        assert prop["type"] in {"string", "integer", "number", "boolean"}
        assert prop["description"]


def test_file_read_input_schema() -> None:
    schema = BUILTIN_TOOLS["file_read"].input_schema()

    assert schema["required"] == ["path"]
    assert {
        k: {p: v for p, v in s.items() if p != "description"}
        for k, s in schema["properties"].items()
    } == {
        "path": {"type": "string", "minLength": 1},
        "offset": {"type": "integer", "minimum": 1, "default": 1},
        "limit": {"type": "integer", "minimum": 1},
    }


def test_the_required_fields_of_each_tool() -> None:
    required = {name: tool.input_schema()["required"] for name, tool in BUILTIN_TOOLS.items()}

    assert required == {
        "bash": ["command"],
        "file_read": ["path"],
        "file_write": ["path", "content"],
        "file_edit": ["path", "old_string", "new_string"],
        "glob": ["pattern"],
        "grep": ["pattern"],
    }


# -- invalid input -------------------------------------------------------------


async def test_invalid_input_names_each_bad_field(cwd: Path) -> None:
    out = await call(cwd, "file_read", offset=0, limit="many", mode="fast")

    assert out == error(
        "invalid input for file_read:\n"
        "- path: Field required\n"
        "- offset: Input should be greater than or equal to 1\n"
        "- limit: Input should be a valid integer, unable to parse string as an integer\n"
        "- mode: Extra inputs are not permitted\n"
        "file_read takes: path (string, required), offset (integer), limit (integer)"
    )


async def test_a_bash_timeout_over_the_maximum_is_invalid(cwd: Path) -> None:
    out = await call(cwd, "bash", command="true", timeout=601)

    assert out.is_error
    assert out.content.splitlines()[1] == "- timeout: Input should be less than or equal to 600"


# -- output cap ----------------------------------------------------------------


def test_cap_output_keeps_the_start_and_says_how_much_was_left_out() -> None:
    out = cap_output(ToolOutput(content="x" * 150, is_error=True), 100)

    assert out == ToolOutput(
        content="x" * 100 + "\n[output truncated: 50 of 150 characters left out]",
        is_error=True,
        truncated=True,
    )


def test_cap_output_leaves_output_that_fits() -> None:
    out = ToolOutput(content="x" * 100)

    assert cap_output(out, 100) is out


async def test_run_builtin_caps_the_content(cwd: Path) -> None:
    for i in range(40):
        (cwd / f"file{i:02}.txt").write_text("")
    ctx = ToolContext(cwd=cwd, max_output_chars=100)

    out = await run_builtin("glob", {"pattern": "*.txt"}, ctx)

    listing = "\n".join(f"file{i:02}.txt" for i in range(40))
    assert out == ToolOutput(
        content=listing[:100] + f"\n[output truncated: {len(listing) - 100} of "
        f"{len(listing)} characters left out]",
        truncated=True,
    )


# -- file_read -----------------------------------------------------------------


async def test_file_read_numbers_lines_like_cat_n(cwd: Path) -> None:
    (cwd / "notes.txt").write_text("first\n\tindented\nlast\n")

    out = await call(cwd, "file_read", path="notes.txt")

    assert out == ok("     1\tfirst\n     2\t\tindented\n     3\tlast")


async def test_file_read_shows_a_last_line_without_line_end_and_crlf_without_cr(
    cwd: Path,
) -> None:
    (cwd / "dos.txt").write_bytes(b"one\r\ntwo")

    out = await call(cwd, "file_read", path="dos.txt")

    assert out == ok("     1\tone\n     2\ttwo")


async def test_file_read_offset_and_limit_show_a_slice_and_where_to_continue(cwd: Path) -> None:
    (cwd / "ten.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))

    out = await call(cwd, "file_read", path="ten.txt", offset=3, limit=2)

    assert out == ok("     3\tline 3\n     4\tline 4\n\n(lines 3-4 of 10; continue with offset=5)")


async def test_file_read_offset_to_the_end(cwd: Path) -> None:
    (cwd / "ten.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))

    out = await call(cwd, "file_read", path="ten.txt", offset=9)

    assert out == ok("     9\tline 9\n    10\tline 10\n\n(lines 9-10 of 10)")


async def test_file_read_counts_the_lines_of_a_file_larger_than_a_read(cwd: Path) -> None:
    lines = [f"{i:07}" for i in range(1, 100_001)]  # 800 KB: several reads
    (cwd / "big.txt").write_text("\n".join(lines) + "\n")

    out = await call(cwd, "file_read", path="big.txt", offset=50_000, limit=1)

    assert out == ok(" 50000\t0050000\n\n(lines 50000-50000 of 100000; continue with offset=50001)")


async def test_file_read_stops_at_the_output_limit_on_a_line_boundary(cwd: Path) -> None:
    (cwd / "long.txt").write_text("".join(f"{'x' * 92}\n" for _ in range(100)))  # 100-char lines
    ctx = ToolContext(cwd=cwd, max_output_chars=1200)  # 1000 after the room for the note

    out = await run_builtin("file_read", {"path": "long.txt"}, ctx)

    shown = "\n".join(f"{i:>6}\t{'x' * 92}" for i in range(1, 11))  # 999 characters
    assert out == ToolOutput(
        content=shown + "\n\n(lines 1-10 of 100; the output limit was reached; "
        "continue with offset=11)",
        truncated=True,
    )


async def test_file_read_cuts_a_line_longer_than_the_output_limit(cwd: Path) -> None:
    (cwd / "minified.js").write_text("y" * 5000 + "\nnext\n")
    ctx = ToolContext(cwd=cwd, max_output_chars=1200)

    out = await run_builtin("file_read", {"path": "minified.js"}, ctx)

    assert out == ToolOutput(
        content="     1\t" + "y" * 993 + "\n\n(lines 1-1 of 2; line 1 is longer than the "
        "output limit and was cut; continue with offset=2)",
        truncated=True,
    )


async def test_file_read_of_an_empty_file_says_so(cwd: Path) -> None:
    (cwd / "empty.txt").write_text("")

    assert await call(cwd, "file_read", path="empty.txt") == ok("(empty.txt is empty)")


async def test_file_read_offset_past_the_end_is_an_error(cwd: Path) -> None:
    (cwd / "two.txt").write_text("a\nb\n")

    out = await call(cwd, "file_read", path="two.txt", offset=3)

    assert out == error("two.txt has 2 lines; offset 3 is past its end")


async def test_file_read_of_a_missing_file_is_an_error(cwd: Path) -> None:
    assert await call(cwd, "file_read", path="nope.txt") == error("nope.txt: no such file")


async def test_file_read_of_a_directory_is_an_error(cwd: Path) -> None:
    (cwd / "src").mkdir()

    out = await call(cwd, "file_read", path="src")

    assert out == error("src is a directory, not a file (list it with glob)")


async def test_file_read_of_a_binary_file_is_an_error(cwd: Path) -> None:
    (cwd / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

    out = await call(cwd, "file_read", path="image.png")

    assert out == error("image.png is a binary file; file_read reads text files")


async def test_file_read_of_non_utf8_text_is_an_error(cwd: Path) -> None:
    (cwd / "latin1.txt").write_bytes("ok\ncafé\n".encode("latin-1"))

    out = await call(cwd, "file_read", path="latin1.txt")

    assert out == error(
        "latin1.txt is not UTF-8 text (line 2 has a byte that is not UTF-8); read it with "
        "bash (e.g. iconv or xxd)"
    )


async def test_file_read_takes_an_absolute_path_inside_cwd(cwd: Path) -> None:
    (cwd / "a.txt").write_text("hi\n")

    assert await call(cwd, "file_read", path=str(cwd / "a.txt")) == ok("     1\thi")


async def test_file_read_follows_a_symlink_that_stays_inside(cwd: Path) -> None:
    (cwd / "real.txt").write_text("hi\n")
    (cwd / "alias.txt").symlink_to("real.txt")

    assert await call(cwd, "file_read", path="alias.txt") == ok("     1\thi")


# -- file_write ----------------------------------------------------------------


async def test_file_write_creates_the_file_and_its_parents(cwd: Path) -> None:
    out = await call(cwd, "file_write", path="src/pkg/mod.py", content="é = 1\n")

    assert out == ok("wrote 7 bytes to src/pkg/mod.py (new file)")
    assert (cwd / "src" / "pkg" / "mod.py").read_text() == "é = 1\n"


async def test_file_write_replaces_a_whole_file(cwd: Path) -> None:
    (cwd / "a.txt").write_text("old content\n")

    out = await call(cwd, "file_write", path="a.txt", content="new\n")

    assert out == ok("wrote 4 bytes to a.txt (replaced 12 bytes)")
    assert (cwd / "a.txt").read_text() == "new\n"


async def test_file_write_to_a_directory_is_an_error(cwd: Path) -> None:
    (cwd / "src").mkdir()

    out = await call(cwd, "file_write", path="src", content="x")

    assert out == error("src is a directory; give the path of a file")


async def test_file_write_under_a_file_is_an_error(cwd: Path) -> None:
    (cwd / "a.txt").write_text("")

    out = await call(cwd, "file_write", path="a.txt/b.txt", content="x")

    assert out == error("cannot create a.txt/b.txt: a.txt is not a directory")


# -- file_edit -----------------------------------------------------------------


async def test_file_edit_replaces_the_unique_occurrence(cwd: Path) -> None:
    (cwd / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 1\n")

    out = await call(
        cwd,
        "file_edit",
        path="m.py",
        old_string="f():\n    return 1",
        new_string="f():\n    return 2",
    )

    assert out == ok("replaced 1 occurrence in m.py")
    assert (cwd / "m.py").read_text() == "def f():\n    return 2\n\ndef g():\n    return 1\n"


async def test_file_edit_replace_all_replaces_every_occurrence(cwd: Path) -> None:
    (cwd / "m.py").write_text("a = old\nb = old\nc = old\n")

    out = await call(
        cwd, "file_edit", path="m.py", old_string="old", new_string="new", replace_all=True
    )

    assert out == ok("replaced 3 occurrences in m.py")
    assert (cwd / "m.py").read_text() == "a = new\nb = new\nc = new\n"


async def test_file_edit_of_a_string_not_in_the_file_is_an_error(cwd: Path) -> None:
    (cwd / "m.py").write_text("x = 1\n")

    out = await call(cwd, "file_edit", path="m.py", old_string="x = 2", new_string="x = 3")

    assert out == error(
        "old_string was not found in m.py; it must match the file exactly, whitespace and "
        "indentation included (read the file with file_read and copy the text without the "
        "line numbers)"
    )
    assert (cwd / "m.py").read_text() == "x = 1\n"


async def test_file_edit_of_a_string_that_is_not_unique_is_an_error(cwd: Path) -> None:
    (cwd / "m.py").write_text("x = 1\nx = 1\n")

    out = await call(cwd, "file_edit", path="m.py", old_string="x = 1", new_string="x = 2")

    assert out == error(
        "old_string occurs 2 times in m.py; include more of the surrounding text to make it "
        "unique, or set replace_all to true to replace every occurrence"
    )
    assert (cwd / "m.py").read_text() == "x = 1\nx = 1\n"


async def test_file_edit_of_a_missing_file_is_an_error(cwd: Path) -> None:
    out = await call(cwd, "file_edit", path="m.py", old_string="a", new_string="b")

    assert out == error("m.py: no such file")


async def test_file_edit_with_the_same_strings_is_an_error(cwd: Path) -> None:
    (cwd / "m.py").write_text("a\n")

    out = await call(cwd, "file_edit", path="m.py", old_string="a", new_string="a")

    assert out == error("old_string and new_string are the same: there is nothing to change")


async def test_file_edit_of_a_non_utf8_file_is_an_error(cwd: Path) -> None:
    (cwd / "latin1.txt").write_bytes("café\n".encode("latin-1"))

    out = await call(cwd, "file_edit", path="latin1.txt", old_string="caf", new_string="bar")

    assert out == error("latin1.txt is not UTF-8 text; file_edit edits UTF-8 files")


async def test_file_edit_matches_lf_text_in_a_crlf_file(cwd: Path) -> None:
    (cwd / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")

    out = await call(cwd, "file_edit", path="dos.txt", old_string="one\ntwo", new_string="1\n2")

    assert out == ok("replaced 1 occurrence in dos.txt")
    assert (cwd / "dos.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_file_edit_with_an_empty_old_string_is_invalid(cwd: Path) -> None:
    out = await call(cwd, "file_edit", path="m.py", old_string="", new_string="x")

    assert out.is_error
    assert out.content.splitlines()[1] == "- old_string: String should have at least 1 character"


# -- the sandbox -----------------------------------------------------------------

ESCAPES = ["../outside/secret.txt", "ABSOLUTE", "link/secret.txt", "secret-link.txt"]


def _escape(cwd: Path, outside: Path, how: str) -> str:
    """A path that leads to ``outside/secret.txt``: through ``..``, as an
    absolute path, through a symlinked directory, through a symlinked file."""
    (cwd / "link").symlink_to(outside)
    (cwd / "secret-link.txt").symlink_to(outside / "secret.txt")
    return str(outside / "secret.txt") if how == "ABSOLUTE" else how


def _refusal(cwd: Path, given: str, outside: Path) -> ToolOutput:
    return error(
        f"path {given!r} is outside the working directory {str(cwd)!r} (it resolves to "
        f"{str(outside / 'secret.txt')!r}); the file tools only reach files under the "
        "working directory: use a path relative to it"
    )


@pytest.mark.parametrize("how", ESCAPES)
async def test_file_read_refuses_a_path_outside_cwd(cwd: Path, outside: Path, how: str) -> None:
    path = _escape(cwd, outside, how)

    assert await call(cwd, "file_read", path=path) == _refusal(cwd, path, outside)


@pytest.mark.parametrize("how", ESCAPES)
async def test_file_write_refuses_a_path_outside_cwd(cwd: Path, outside: Path, how: str) -> None:
    path = _escape(cwd, outside, how)

    out = await call(cwd, "file_write", path=path, content="pwned\n")

    assert out == _refusal(cwd, path, outside)
    assert (outside / "secret.txt").read_text() == "the secret\n"


@pytest.mark.parametrize("how", ESCAPES)
async def test_file_edit_refuses_a_path_outside_cwd(cwd: Path, outside: Path, how: str) -> None:
    path = _escape(cwd, outside, how)

    out = await call(cwd, "file_edit", path=path, old_string="secret", new_string="pwned")

    assert out == _refusal(cwd, path, outside)
    assert (outside / "secret.txt").read_text() == "the secret\n"


async def test_file_write_refuses_a_new_file_under_a_symlink_pointing_out(
    cwd: Path, outside: Path
) -> None:
    (cwd / "link").symlink_to(outside)

    out = await call(cwd, "file_write", path="link/new/file.txt", content="x")

    assert out.is_error and "is outside the working directory" in out.content
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_file_write_refuses_a_dangling_symlink_pointing_out(cwd: Path, outside: Path) -> None:
    (cwd / "dangling.txt").symlink_to(outside / "created.txt")

    out = await call(cwd, "file_write", path="dangling.txt", content="x")

    assert out.is_error and "is outside the working directory" in out.content
    assert not (outside / "created.txt").exists()


@pytest.mark.parametrize("how", ["..", "ABSOLUTE", "link"])
@pytest.mark.parametrize("tool", ["glob", "grep"])
async def test_glob_and_grep_refuse_a_path_outside_cwd(
    cwd: Path, outside: Path, tool: str, how: str
) -> None:
    (cwd / "link").symlink_to(outside)
    path = {"..": "..", "ABSOLUTE": str(outside), "link": "link"}[how]
    target = cwd.parent if how == ".." else outside

    out = await call(cwd, tool, pattern="*" if tool == "glob" else "secret", path=path)

    assert out == error(
        f"path {path!r} is outside the working directory {str(cwd)!r} (it resolves to "
        f"{str(target)!r}); the file tools only reach files under the working directory: "
        "use a path relative to it"
    )


async def test_glob_skips_symlinks_that_point_outside(cwd: Path, outside: Path) -> None:
    (cwd / "mine.txt").write_text("")
    (cwd / "link-dir").symlink_to(outside)
    (cwd / "link-file.txt").symlink_to(outside / "secret.txt")
    (cwd / "inside-link.txt").symlink_to(cwd / "mine.txt")

    out = await call(cwd, "glob", pattern="**/*")

    assert out == ok("inside-link.txt\nmine.txt")


async def test_grep_skips_symlinks_that_point_outside(cwd: Path, outside: Path) -> None:
    (cwd / "mine.txt").write_text("no secret here\n")
    (cwd / "link-dir").symlink_to(outside)
    (cwd / "link-file.txt").symlink_to(outside / "secret.txt")

    out = await call(cwd, "grep", pattern="secret")

    assert out == ok("mine.txt:1:no secret here")


def test_resolve_in_sandbox_returns_the_real_path(cwd: Path) -> None:
    (cwd / "src").mkdir()
    (cwd / "alias").symlink_to(cwd / "src")

    assert resolve_in_sandbox(cwd, "alias/new.py") == cwd / "src" / "new.py"
    assert resolve_in_sandbox(cwd, "src/../src/./x") == cwd / "src" / "x"
    assert resolve_in_sandbox(cwd, "") == cwd


def test_resolve_in_sandbox_refuses_a_sibling_with_the_same_prefix(cwd: Path) -> None:
    (cwd.parent / "work-evil").mkdir()

    with pytest.raises(PathOutsideSandboxError):
        resolve_in_sandbox(cwd, "../work-evil/x")


def test_resolve_in_sandbox_refuses_a_symlink_loop(cwd: Path) -> None:
    (cwd / "loop").symlink_to(cwd / "loop")

    with pytest.raises(Exception, match="cannot resolve path 'loop/x'"):
        resolve_in_sandbox(cwd, "loop/x")


# -- glob ----------------------------------------------------------------------


@pytest.fixture
def tree(cwd: Path) -> Path:
    for name in [
        "README.md",
        "setup.py",
        "src/app.py",
        "src/app.ts",
        "src/web/view.tsx",
        "src/web/deep/util.py",
        "tests/test_app.py",
        ".git/config.py",
        "node_modules/dep/index.ts",
    ]:
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(f"# {name}\n")
    return cwd


async def test_glob_double_star_matches_at_any_depth_sorted(tree: Path) -> None:
    out = await call(tree, "glob", pattern="**/*.py")

    assert out == ok("setup.py\nsrc/app.py\nsrc/web/deep/util.py\ntests/test_app.py")


async def test_glob_single_star_matches_in_the_directory_only(tree: Path) -> None:
    assert await call(tree, "glob", pattern="*.py") == ok("setup.py")


async def test_glob_under_a_path_lists_paths_relative_to_cwd(tree: Path) -> None:
    out = await call(tree, "glob", pattern="**/*.{ts,tsx}", path="src")

    assert out == ok("src/app.ts\nsrc/web/view.tsx")


async def test_glob_descends_into_a_skipped_directory_given_as_path(tree: Path) -> None:
    out = await call(tree, "glob", pattern="**/*.ts", path="node_modules")

    assert out == ok("node_modules/dep/index.ts")


async def test_glob_with_no_match_says_so(tree: Path) -> None:
    out = await call(tree, "glob", pattern="**/*.rs", path="src")

    assert out == ok("No files match '**/*.rs' under src.")


async def test_glob_results_are_cut_and_say_how_many_matched(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(glob_module, "MAX_GLOB_RESULTS", 2)

    out = await call(tree, "glob", pattern="**/*.py")

    assert out == ToolOutput(
        content="setup.py\nsrc/app.py\n\n(showing the first 2 of 4 matching files; narrow the "
        "pattern or the path to see the others)",
        truncated=True,
    )


async def test_glob_path_must_be_an_existing_directory(tree: Path) -> None:
    assert await call(tree, "glob", pattern="*", path="setup.py") == error(
        "setup.py is a file; glob's path must be a directory"
    )
    assert await call(tree, "glob", pattern="*", path="gone") == error("gone: no such directory")


async def test_glob_refuses_an_absolute_pattern(tree: Path) -> None:
    out = await call(tree, "glob", pattern="/etc/*")

    assert out == error(
        "glob pattern '/etc/*' is absolute; give the directory as 'path' and a pattern "
        "relative to it"
    )


# -- grep ----------------------------------------------------------------------


async def test_grep_lists_path_line_and_text(tree: Path) -> None:
    (tree / "src" / "app.py").write_text("import os\n\ndef main():\n    os.exit(0)\n")

    out = await call(tree, "grep", pattern=r"\bos\b")

    assert out == ok("src/app.py:1:import os\nsrc/app.py:4:    os.exit(0)")


async def test_grep_glob_without_slash_matches_file_names_at_any_depth(tree: Path) -> None:
    out = await call(tree, "grep", pattern="#", glob="*.py")

    assert out == ok(
        "setup.py:1:# setup.py\nsrc/app.py:1:# src/app.py\nsrc/web/deep/util.py:1:# "
        "src/web/deep/util.py\ntests/test_app.py:1:# tests/test_app.py"
    )


async def test_grep_glob_with_slash_matches_paths_under_path(tree: Path) -> None:
    out = await call(tree, "grep", pattern="#", path="src", glob="web/**/*.py")

    assert out == ok("src/web/deep/util.py:1:# src/web/deep/util.py")


async def test_grep_searches_one_file(tree: Path) -> None:
    assert await call(tree, "grep", pattern="md", path="README.md") == ok("README.md:1:# README.md")


async def test_grep_skips_binary_files(cwd: Path) -> None:
    (cwd / "blob.bin").write_bytes(b"needle\x00\x01")
    (cwd / "text.txt").write_text("a needle\n")

    assert await call(cwd, "grep", pattern="needle") == ok("text.txt:1:a needle")
    assert await call(cwd, "grep", pattern="needle", path="blob.bin") == ok(
        "No matches: blob.bin is a binary file."
    )


async def test_grep_with_no_match_says_so(tree: Path) -> None:
    assert await call(tree, "grep", pattern="nothing like this") == ok("No matches found.")


async def test_grep_with_an_invalid_regex_is_an_error(tree: Path) -> None:
    out = await call(tree, "grep", pattern="(unclosed")

    assert out == error(
        "invalid regular expression '(unclosed': missing ), unterminated subpattern at position 0"
    )


async def test_grep_stops_after_the_most_matches_and_says_so(
    cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "MAX_GREP_MATCHES", 2)
    (cwd / "a.txt").write_text("hit 1\nhit 2\nhit 3\n")

    out = await call(cwd, "grep", pattern="hit")

    assert out == ToolOutput(
        content="a.txt:1:hit 1\na.txt:2:hit 2\n\n(stopped after 2 matching lines; narrow the "
        "pattern, path or glob to see the others)",
        truncated=True,
    )


async def test_grep_cuts_a_long_line_around_the_match(cwd: Path) -> None:
    (cwd / "min.js").write_text("a" * 1000 + "NEEDLE" + "b" * 1000 + "\n")

    out = await call(cwd, "grep", pattern="NEEDLE")

    assert out == ok("min.js:1:…" + "a" * 100 + "NEEDLE" + "b" * 194 + "…")


async def test_grep_path_missing_is_an_error(cwd: Path) -> None:
    out = await call(cwd, "grep", pattern="x", path="gone")

    assert out == error("gone: no such file or directory")


# -- bash ----------------------------------------------------------------------


async def test_bash_returns_exit_code_and_stdout(cwd: Path) -> None:
    out = await call(cwd, "bash", command="echo hello; printf 'two\\nlines\\n'")

    assert out == ok("exit code 0\n--- stdout ---\nhello\ntwo\nlines")


async def test_bash_runs_in_cwd(cwd: Path) -> None:
    assert await call(cwd, "bash", command="pwd") == ok(f"exit code 0\n--- stdout ---\n{cwd}")


async def test_bash_without_output_says_so(cwd: Path) -> None:
    assert await call(cwd, "bash", command="true") == ok("exit code 0 (no output)")


async def test_bash_nonzero_exit_is_an_error_with_redacted_stderr(cwd: Path) -> None:
    command = (
        "echo partial; echo 'ANTHROPIC_API_KEY=sk-ant-api03-abcdefghij0123456789' >&2; "
        "echo 'boom' >&2; exit 3"
    )

    out = await call(cwd, "bash", command=command)

    assert out == error(
        "exit code 3\n--- stdout ---\npartial\n"
        "--- stderr (redacted) ---\nANTHROPIC_API_KEY=[redacted]\nboom"
    )


async def test_bash_death_by_signal_is_an_error(cwd: Path) -> None:
    out = await call(cwd, "bash", command="kill -SEGV $$")

    assert out == error("killed by signal SIGSEGV (no output)")


async def test_bash_sees_a_minimal_environment(cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-worker-key")
    ctx = ToolContext(cwd=cwd, env={"PROJECT_MODE": "test"})

    out = await run_builtin(
        "bash", {"command": 'echo "${ANTHROPIC_API_KEY:-unset} $PROJECT_MODE $PATH"'}, ctx
    )

    assert out == ok(f"exit code 0\n--- stdout ---\nunset test {os.environ['PATH']}")


async def test_bash_long_stdout_keeps_its_start_and_end(cwd: Path) -> None:
    ctx = ToolContext(cwd=cwd, max_output_chars=1000)

    out = await run_builtin("bash", {"command": "seq 1 100000"}, ctx)

    lines = out.content.splitlines()
    assert out.truncated and not out.is_error
    assert lines[:4] == ["exit code 0", "--- stdout ---", "1", "2"]
    assert lines[-2:] == ["99999", "100000"]
    assert any(line.startswith("[... ") and "bytes of stdout left out" in line for line in lines)
    assert len(out.content) <= 1000


async def test_bash_stdout_just_over_the_cap_is_cut_too(cwd: Path) -> None:
    ctx = ToolContext(cwd=cwd, max_output_chars=1000)

    out = await run_builtin("bash", {"command": "seq 1 400"}, ctx)  # 1492 bytes

    lines = out.content.splitlines()
    assert out.truncated
    # 929 characters for stdout (1000 less the status line and room for the labels)
    assert "[... 563 bytes of stdout left out ...]" in lines
    assert lines[:3] == ["exit code 0", "--- stdout ---", "1"]
    assert lines[-1] == "400"
    assert len(out.content) <= 1000


async def test_bash_timeout_kills_the_whole_tree(cwd: Path) -> None:
    # The shell ignores SIGTERM, and so does the grandchild it leaves in the
    # background: only the SIGKILL to the process group ends them.
    command = f"trap '' TERM; {PAUSE} & echo $! > grandchild.pid; echo $$ > child.pid; wait"

    started = time.monotonic()
    out = await call(cwd, "bash", command=command, timeout=0.5)

    assert time.monotonic() - started < 5
    assert out == error(
        "timed out after 0.5 s: the command and the processes it started were killed (no output)"
    )
    child = int((cwd / "child.pid").read_text())
    grandchild = int((cwd / "grandchild.pid").read_text())
    await wait_dead(child, grandchild)
    assert not alive(child)
    assert not alive(grandchild)


async def test_bash_cancel_kills_the_whole_tree_and_propagates(cwd: Path) -> None:
    command = f"trap '' TERM; {PAUSE} & echo $! > grandchild.pid; echo $$ > child.pid; wait"
    run = asyncio.create_task(call(cwd, "bash", command=command))
    grandchild = int(await wait_for_file(cwd / "grandchild.pid"))
    child = int(await wait_for_file(cwd / "child.pid"))
    assert alive(child) and alive(grandchild)

    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run

    # kill_group has SIGKILLed the group before the cancellation propagated
    assert not alive(child)
    await wait_dead(grandchild, timeout_s=1.0)
    assert not alive(grandchild)


async def test_bash_background_processes_do_not_outlive_the_call(cwd: Path) -> None:
    command = f"{PAUSE} > /dev/null 2>&1 & echo $! > grandchild.pid; echo started"

    out = await call(cwd, "bash", command=command)

    assert out == ok("exit code 0\n--- stdout ---\nstarted")
    grandchild = int((cwd / "grandchild.pid").read_text())
    await wait_dead(grandchild, timeout_s=1.0)
    assert not alive(grandchild)


async def test_bash_heartbeats_with_its_latest_stdout_line(cwd: Path) -> None:
    notes: list[str] = []
    ctx = ToolContext(cwd=cwd, heartbeat=notes.append)

    out = await run_builtin(
        "bash", {"command": "echo compiling; sleep 0.7; echo 'token=abc123'; sleep 0.7"}, ctx
    )

    assert not out.is_error
    assert len(notes) >= 3  # every 0.25 s over 1.4 s
    assert "compiling" in notes
    assert notes[-1] == "token=[redacted]"


async def test_bash_in_a_missing_cwd_is_an_error(tmp_path: Path) -> None:
    out = await call(tmp_path / "gone", "bash", command="true")

    assert out == error(
        f"cannot start bash in {str(tmp_path / 'gone')!r}: No such file or directory"
    )
