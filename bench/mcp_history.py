"""How an agent's MCP listing weighs on its history, against one embedded dev
server and one in-process worker: an ``AgentRun`` of an ``anthropic`` agent
(the model played by the local Messages API server of the tests,
``tests/support/anthropic_server.py``) with a system prompt and one stdio MCP server
that lists ``--tools`` tools (``tests/support/mcp_server.py --tools``), whose model
calls one of them per turn for ``--turns`` turns.

Prints the history's bytes (the events' stored size) against the JSON of the
conversation and of the listing, and the history's bytes per turn. Every byte
that repeats across turns (the listing with its schemas, the system prompt)
should be in the history once per run: the history grows with the
conversation, not with turns times the listing (target: the history at most
3x the conversation plus the listing). The last line is::

    mcp_history_bytes=… conversation_bytes=… listing_bytes=… history_per_turn_bytes=…

Run from the repository root, with the venv active: ``python bench/mcp_history.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from oma.core.contracts.names import WorkflowName  # noqa: E402
from oma.core.schema.results import AgentRunResult  # noqa: E402
from oma.runtime.connection import Connection  # noqa: E402
from oma.runtime.dev_server import DevServer, free_port  # noqa: E402
from oma.worker import build_worker  # noqa: E402
from tests.support.anthropic_server import AnthropicServer  # noqa: E402
from tests.support.runs import worker_activities  # noqa: E402

QUEUE = "oma-bench-mcp-history"
SYSTEM_PROMPT = "You are the archivist. " + "Search the shelves before you answer. " * 50


async def measure(turns: int, tools: int) -> dict[str, int]:
    with DevServer(port=free_port()) as server, AnthropicServer() as api:
        for n in range(turns):
            api.reply_tool_use("shelves__tool0007", {"query": f"query {n}"}, id=f"toolu_{n:04d}")
        api.reply_text("every shelf searched")
        agent = {
            "name": "archivist",
            "provider": "anthropic",
            "system_prompt": SYSTEM_PROMPT,
            "max_turns": turns + 1,
            "mcp_servers": [
                {
                    "name": "shelves",
                    "command": sys.executable,
                    "args": ["-m", "tests.support.mcp_server", "--tools", str(tools)],
                    "cwd": ROOT,
                }
            ],
        }
        client = await Connection.local(server.address, QUEUE).connect()
        async with build_worker(client, QUEUE, worker_activities(QUEUE, api.base_url)):
            workflow_id = f"bench-mcp-history-{uuid.uuid4().hex[:8]}"
            result: AgentRunResult = await client.execute_workflow(
                WorkflowName.AGENT_RUN,
                {"agent": agent, "input": "search every shelf"},
                id=workflow_id,
                task_queue=QUEUE,
                result_type=AgentRunResult,
            )
            assert result.status == "completed" and result.turns == turns + 1, result.error
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        listing = api.requests[0].body["tools"]
    return {
        # the events as the server stores them (protobuf), not their JSON
        # export, whose base64 payloads are a third larger
        "history": sum(event.ByteSize() for event in history.events),
        "conversation": len(json.dumps([m.model_dump(mode="json") for m in result.messages])),
        "listing": len(json.dumps(listing)),
        "tools": len(listing),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="model turns with a tool call")
    parser.add_argument("--tools", type=int, default=1000, help="tools the MCP server lists")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load}", flush=True)
    size = asyncio.run(measure(args.turns, args.tools))
    per_turn = size["history"] // (args.turns + 1)
    print(
        f"{args.turns + 1} turns, {size['tools']} tools: history {size['history']:,} bytes, "
        f"conversation {size['conversation']:,} bytes, listing {size['listing']:,} bytes "
        f"(history / (conversation + listing) "
        f"{size['history'] / (size['conversation'] + size['listing']):.2f}), "
        f"{per_turn:,} history bytes per turn",
        flush=True,
    )
    print(
        f"mcp_history_bytes={size['history']} conversation_bytes={size['conversation']} "
        f"listing_bytes={size['listing']} history_per_turn_bytes={per_turn}",
        flush=True,
    )


if __name__ == "__main__":
    main()
