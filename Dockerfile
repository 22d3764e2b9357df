# The OMA worker image: connects to the Temporal cluster named by TEMPORAL_ADDRESS and runs
# the TeamRun/AgentRun workflows and their activities. See docker-compose.yml.
FROM python:3.11-slim

# Logs reach `docker logs` immediately; no .pyc files written at run time.
# OMA_PATH: the worker imports a team's custom tools, hooks and evaluators from /app/team
# (docs/tools.md, "Custom tools"); docker-compose.yml mounts the team's code there, a derived
# image copies it in.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    OMA_PATH=/app/team

WORKDIR /app

# Only what the package needs to build and run (.dockerignore keeps the rest out).
COPY pyproject.toml README.md ./
COPY oma ./oma
COPY worker.py ./
COPY examples ./examples

# pip compiles the installed package's bytecode: the Temporal sandbox re-imports the
# workflow modules for every workflow run, and without .pyc files it recompiles them each time.
RUN pip install --no-cache-dir '.[otel,s3]'

# Run as an unprivileged user. It owns the working directory, so run-time state (.oma/) can
# be written there, and scratch/, where the examples' agents work (their `cwd` is relative to
# the worker's working directory); the code, and team/, stay root-owned.
RUN useradd --create-home --uid 10001 oma \
    && mkdir -p scratch team \
    && chown oma:oma . scratch
USER oma

# `oma worker`, not `python worker.py`: it adds OMA_PATH and the working directory to the
# import path (the installed package stays first), and ends cleanly on SIGTERM (`docker stop`).
CMD ["oma", "worker"]
