"""``glob``: the files whose path matches a pattern, sorted."""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict, Field

from oma.activities.tools._glob_pattern import compile_glob
from oma.activities.tools._progress import Work, in_thread
from oma.activities.tools.sandbox import SKIPPED_DIRS, resolve_in_sandbox, shown, walk_files
from oma.activities.tools.tool import BuiltinTool, ToolContext, ToolError, ToolOutput

MAX_GLOB_RESULTS = 500
"""The most paths ``glob`` returns (the first ones in sorted order)."""


class GlobInput(BaseModel):
    """Input of ``glob``."""

    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        description="The glob pattern, matched against file paths relative to `path`: "
        "'**/*.py' (every .py file, at any depth), '*.md' (in `path` itself only), "
        "'src/**/test_*.py', '*.{ts,tsx}'.",
    )
    path: str | None = Field(
        default=None,
        description="The directory to search, relative to the working directory (default: "
        "the working directory itself).",
    )


DESCRIPTION = f"""\
Find files by name: list the files under a directory whose path (relative to \
that directory) matches a glob pattern. `**` matches any number of \
directories, `*` any characters except `/`, `?` one character, `[abc]` one of \
a set, `{{a,b}}` either alternative; so '*.py' matches only in the directory \
itself and '**/*.py' at any depth. Returns matching file paths relative to \
the working directory, one per line, sorted, at most {MAX_GLOB_RESULTS} (a \
last line says how many more matched). Does not descend into \
{", ".join(sorted(SKIPPED_DIRS))} (give one as `path` to search it), does not \
follow symlinked directories, and skips symlinks that lead outside the working \
directory. Use grep to search inside files. `path` is relative to the working \
directory and may not lead outside it."""


async def glob(args: GlobInput, ctx: ToolContext) -> ToolOutput:
    """The first ``MAX_GLOB_RESULTS`` matching paths in sorted order, one per
    line, relative to ``ctx.cwd``; ``"No files match ..."`` when none does."""
    regex = compile_glob(args.pattern)
    root = ctx.cwd.resolve()
    base = resolve_in_sandbox(ctx.cwd, args.path or ".")
    where = shown(root, base)

    def search(work: Work) -> ToolOutput:
        if not base.exists():
            raise ToolError(f"{args.path}: no such directory")
        if not base.is_dir():
            raise ToolError(f"{args.path} is a file; glob's path must be a directory")
        found = 0

        def matches() -> Iterator[str]:
            nonlocal found
            for rel, _ in walk_files(root, base, work):
                if regex.fullmatch(rel):
                    found += 1
                    work.note = f"glob: {found} files match so far"
                    yield os.path.normpath(os.path.join(where, rel))

        first = heapq.nsmallest(MAX_GLOB_RESULTS, matches())
        if not first:
            return ToolOutput(content=f"No files match {args.pattern!r} under {where}.")
        content = "\n".join(first)
        if found > len(first):
            content += (
                f"\n\n(showing the first {len(first)} of {found} matching files; narrow "
                "the pattern or the path to see the others)"
            )
        return ToolOutput(content=content, truncated=found > len(first))

    return await in_thread(ctx, f"glob {args.pattern}", search)


GLOB = BuiltinTool(name="glob", description=DESCRIPTION, input_model=GlobInput, execute=glob)
