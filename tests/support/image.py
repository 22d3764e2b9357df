"""The worker image without a container engine: the Dockerfile's steps carried
out on a temporary directory that stands in for its WORKDIR.

Where the suite runs there is no Docker engine and no registry (the base
image, ``python:3.11-slim``, comes from one), so the image is rebuilt as a
layout: each COPY copies what the build context holds, less what
``.dockerignore`` leaves out; each RUN step is one this module knows (an
unknown one raises, so a new step is modelled here before it is relied on):
``pip install`` builds and installs the project, not editable, into a fresh
virtual environment, ``mkdir`` makes directories, ``useradd`` and ``chown``
are recorded; ENV becomes the environment of the CMD, which runs in the
layout. What the layout cannot show is what the base image and the engine
do: the interpreter is this one (the project's dependencies, which pip would
download, are this environment's, through a ``.pth`` file), and ownership is
recorded rather than enforced.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tests.support.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass(frozen=True)
class Dockerfile:
    """A Dockerfile's instructions, ``(KEYWORD, arguments)`` in order, with
    comments dropped and continuation lines joined."""

    instructions: tuple[tuple[str, str], ...]

    @classmethod
    def read(cls, path: Path = DOCKERFILE) -> Dockerfile:
        text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
        found = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                keyword, _, args = stripped.partition(" ")
                found.append((keyword.upper(), args.strip()))
        return cls(tuple(found))

    def args(self, keyword: str) -> list[str]:
        """The arguments of every ``keyword`` instruction, in order."""
        return [args for kw, args in self.instructions if kw == keyword]

    @property
    def base(self) -> str:
        return self.args("FROM")[0]

    @property
    def workdir(self) -> PurePosixPath:
        return PurePosixPath(self.args("WORKDIR")[-1])

    @property
    def user(self) -> str | None:
        users = self.args("USER")
        return users[-1] if users else None

    @property
    def cmd(self) -> list[str]:
        result: list[str] = json.loads(self.args("CMD")[-1])
        return result

    @property
    def env(self) -> dict[str, str]:
        """Every ``ENV NAME=value`` (the ``NAME=value`` form, several per line)."""
        found = {}
        for args in self.args("ENV"):
            for pair in shlex.split(args):
                name, _, value = pair.partition("=")
                found[name] = value
        return found

    @property
    def copies(self) -> list[tuple[list[str], str]]:
        """Each COPY as (sources in the build context, destination)."""
        found = []
        for args in self.args("COPY"):
            *sources, dest = shlex.split(args)
            found.append((sources, dest))
        return found

    def run_steps(self) -> list[list[str]]:
        """Each command of each RUN (``a && b`` is two), as an argument list."""
        return [shlex.split(step) for args in self.args("RUN") for step in args.split("&&")]


def ignored(relative: PurePosixPath, patterns: list[str]) -> bool:
    """Whether ``.dockerignore``'s ``patterns`` leave ``relative`` (a path in
    the build context) out: a pattern matches from the context's root
    (``**`` any number of directories), and a directory left out takes what
    it holds with it. ``!`` exceptions are not modelled (the file has none)."""
    assert not any(p.startswith("!") for p in patterns), "model .dockerignore's ! exceptions"
    parts = relative.parts
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(re.fullmatch(_pattern(p), prefix) for p in patterns for prefix in prefixes)


def _pattern(pattern: str) -> str:
    out = []
    for token in re.split(r"(\*\*/|\*|\?)", pattern.strip().strip("/")):
        out.append({"**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token)))
    return "".join(out)


def dockerignore(path: Path = DOCKERIGNORE) -> list[str]:
    """The patterns of ``.dockerignore``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@dataclass
class Layout:
    """The image rebuilt under ``root`` (its WORKDIR): what RUN made of it."""

    dockerfile: Dockerfile
    root: Path
    users: list[str] = field(default_factory=list)
    owners: dict[PurePosixPath, str] = field(default_factory=dict)
    """Paths given to a user (``chown``), as image paths."""
    venv: Path | None = None
    """Where ``pip install`` installed the project (the image's interpreter)."""

    def local(self, image_path: str | PurePosixPath) -> Path:
        """Where an image path (absolute, or relative to WORKDIR) is in the layout."""
        path = self.dockerfile.workdir / image_path
        relative = path.relative_to(self.dockerfile.workdir)  # only WORKDIR is modelled
        return self.root / relative

    def owner(self, image_path: str | PurePosixPath) -> str:
        """Who owns an image path: the user a ``chown`` gave it to, else root."""
        return self.owners.get(PurePosixPath(self.dockerfile.workdir / image_path), "root")

    def environment(self) -> dict[str, str]:
        """The CMD's environment: the image's ENV (paths under WORKDIR as
        paths in the layout), and a PATH that finds the installed console
        scripts and interpreter first, as the image's does."""
        assert self.venv is not None, "install() the layout first"
        workdir = str(self.dockerfile.workdir)
        env = {
            "PATH": f"{self.venv / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root.parent / "home"),
            "LANG": "C.UTF-8",
        }
        for name, value in self.dockerfile.env.items():
            env[name] = re.sub(rf"^{re.escape(workdir)}(?=/|$)", str(self.root), value)
        return env

    def command(self, env: dict[str, str]) -> list[str]:
        """The CMD, its program found on ``env``'s PATH."""
        program, *args = self.dockerfile.cmd
        found = shutil.which(program, path=env["PATH"])
        assert found is not None, f"the image's CMD runs {program!r}, which is not on its PATH"
        return [found, *args]


def build_layout(root: Path, dockerfile: Dockerfile | None = None) -> Layout:
    """Carry out the Dockerfile's COPY and RUN steps (but ``pip install``,
    left to ``install``) with ``root`` as WORKDIR."""
    layout = Layout(dockerfile or Dockerfile.read(), root)
    root.mkdir(parents=True)
    patterns = dockerignore()
    for sources, dest in layout.dockerfile.copies:
        for source in sources:
            _copy(ROOT / source, layout.local(dest), patterns, into=dest.endswith("/"))
    for step in layout.dockerfile.run_steps():
        _run_step(layout, step)
    return layout


def _copy(source: Path, dest: Path, patterns: list[str], *, into: bool) -> None:
    relative = PurePosixPath(source.relative_to(ROOT).as_posix())
    assert source.exists() or source.is_symlink(), f"COPY {relative}: not in the build context"
    assert not ignored(relative, patterns), f"COPY {relative}: .dockerignore leaves it out"
    if source.is_dir() and not source.is_symlink():
        # a directory's contents, not the directory, go to dest (Docker's rule)

        def leave_out(directory: str, names: list[str]) -> list[str]:
            base = PurePosixPath(Path(directory).relative_to(ROOT).as_posix())
            return [n for n in names if ignored(base / n, patterns)]

        shutil.copytree(source, dest, symlinks=True, ignore=leave_out, dirs_exist_ok=True)
    else:
        target = dest / source.name if into else dest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def _run_step(layout: Layout, step: list[str]) -> None:
    program, *args = step
    if program == "pip" and args[:1] == ["install"]:
        return  # install() runs it
    if program == "useradd":
        layout.users.append(args[-1])
    elif program == "mkdir":
        for name in (a for a in args if not a.startswith("-")):
            layout.local(name).mkdir(parents=True, exist_ok=True)
    elif program == "chown":
        owner, *paths = [a for a in args if not a.startswith("-")]
        for path in paths:
            assert layout.local(path).exists(), f"chown {path}: not in the image"
            user = owner.split(":")[0]
            assert user in layout.users, f"chown to {user!r}, a user the image does not create"
            layout.owners[PurePosixPath(layout.dockerfile.workdir / path)] = user
    elif step[:3] == ["python", "-m", "compileall"]:
        paths = [layout.local(a) for a in args[2:] if not a.startswith("-")]
        subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, paths)], check=True)
    else:
        raise AssertionError(
            f"a RUN step tests/support/image.py does not model: {shlex.join(step)}"
        )


def install(layout: Layout, venv: Path) -> None:
    """The Dockerfile's ``pip install`` steps, run in the layout's WORKDIR
    into a fresh virtual environment (``venv``): the project is built from
    what the COPY steps brought and installed as a package, not editable.
    Its dependencies are this environment's (``deps.pth``): pip is told
    ``--no-deps`` and ``--no-build-isolation`` so that nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # a plain path entry: the editable install of this checkout (its own .pth) stays out
    Path(site, "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    env = os.environ | layout.dockerfile.env  # ENV applies to the RUN steps after it
    # (as in the image: bytecode beside the sources, not under a prefix `make test` sets)
    env.pop("PYTHONPYCACHEPREFIX", None)
    for step in layout.dockerfile.run_steps():
        if step[:2] == ["pip", "install"]:
            subprocess.run(
                [*pip, "--no-deps", "--no-build-isolation", "--quiet", *step[2:]],
                cwd=layout.root,
                env=env,
                check=True,
            )
    layout.venv = venv
