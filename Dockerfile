# The OMA worker image: connects to the Temporal cluster named by TEMPORAL_ADDRESS and runs
# the TeamRun/AgentRun workflows and their activities. See docker-compose.yml.
FROM python:3.11-slim

# Logs reach `docker logs` immediately; no .pyc files written at run time.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /app

# Only what the package needs to build and run (.dockerignore keeps the rest out).
COPY pyproject.toml README.md ./
COPY oma ./oma
COPY activities ./activities
COPY workflows ./workflows
COPY worker.py ./
COPY examples ./examples

RUN pip install --no-cache-dir '.[otel]'
# Bytecode at build time: the Temporal sandbox re-imports the workflow modules
# for every workflow run, and without .pyc files it recompiles them each time.
RUN python -m compileall -q /app

# Run as an unprivileged user; it owns the working directory so run-time state (.oma/,
# scratch files of process agents) can be written there, while the code stays root-owned.
RUN useradd --create-home --uid 10001 oma \
    && chown oma:oma /app
USER oma

CMD ["python", "worker.py"]
