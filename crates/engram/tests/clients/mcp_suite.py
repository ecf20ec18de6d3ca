"""engram's MCP server driven by the official MCP Python SDK (PyPI `mcp`, pinned in
scripts/setup.sh), over Streamable HTTP (`/mcp` on the running server), over stdio relaying to
it (`engram mcp --url`), and over stdio on a data directory of its own (`engram mcp`). Every
tool is called and its answer checked; a wrong key is refused, a restricted key sees only its
database, and errors come back as tool errors carrying the spec's codes.

Run by the end-to-end test `clients::mcp_clients_use_every_tool` with ENGRAM_URL, ENGRAM_KEY,
ENGRAM_RESTRICTED_KEY (restricted to the database `agents`), ENGRAM_READ_KEY (scope `read`), ENGRAM_BIN, and ENGRAM_LOCAL_DIR /
ENGRAM_LOCAL_KEY for the data directory stdio opens itself.
"""

import asyncio
import base64
import os

import httpx2 as httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from suite import step

URL = os.environ["ENGRAM_URL"]
KEY = os.environ["ENGRAM_KEY"]
TOOLS = {
    "list_databases", "list_collections", "search_knowledge", "recall_memories", "add_memories",
    "ingest", "list_sources", "delete_sources", "indexing_status",
}


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(session, tool, args):
    result = await session.call_tool(tool, args)
    assert not result.is_error, (tool, text_of(result))
    return text_of(result)


async def call_error(session, tool, args):
    result = await session.call_tool(tool, args)
    assert result.is_error, (tool, text_of(result))
    return text_of(result)


async def until_indexed(session, db, ids, collection=None):
    args = {"database": db, "ids": ids}
    if collection:
        args["collection"] = collection
    for _ in range(300):
        answer = await call(session, "indexing_status", args)
        if answer.count(": completed") == len(ids):
            return answer
        await asyncio.sleep(0.2)
    raise AssertionError(f"not indexed: {answer}")


async def exercise(session, label, db):
    step(f"{label}: tools are listed with descriptions and schemas")
    tools = (await session.list_tools()).tools
    assert {t.name for t in tools} == TOOLS, [t.name for t in tools]
    for tool in tools:
        assert tool.description and tool.input_schema.get("type") == "object", tool

    step(f"{label}: every tool")
    assert db in (await call(session, "list_databases", {})).splitlines()
    accepted = await call(session, "ingest", {
        "database": db, "id": "note-1", "title": "Reactor note",
        "text": "The gamma reactor is cooled by helium gas and inspected every spring.",
    })
    assert "1 accepted" in accepted and "note-1" in accepted, accepted
    doc = base64.b64encode(b"# Pumps\n\nThe feed pump is replaced every five years.\n").decode()
    accepted = await call(session, "ingest", {
        "database": db, "id": "pumps", "document_base64": doc, "filename": "pumps.md",
    })
    assert "pumps" in accepted, accepted
    await until_indexed(session, db, ["note-1", "pumps"])
    found = await call(session, "search_knowledge", {"database": db, "query": "how is the gamma reactor cooled?"})
    assert found.startswith("[1] Reactor note (id: note-1") and "helium" in found, found
    found = await call(session, "search_knowledge", {"database": db, "query": "feed pump replacement", "max_results": 1, "mode": "fast"})
    assert "(id: pumps" in found and "[2]" not in found, found
    cut = await call(session, "search_knowledge", {"database": db, "query": "reactor", "token_budget": 5})
    assert "cut at the token budget of 5" in cut and len(cut) < 200, cut

    remembered = await call(session, "add_memories", {"database": db, "user": "ana", "memories": [
        {"text": "Ana drinks green tea every morning."},
        {"user_message": "I moved to Porto last year.", "assistant_message": "Noted, Porto."},
    ]})
    assert "2 accepted" in remembered, remembered
    ids = [line.split(":")[0].lstrip("- ") for line in remembered.splitlines()[1:]]
    await until_indexed(session, db, ids, collection="ana")
    recalled = await call(session, "recall_memories", {"database": db, "user": "ana", "query": "what does ana drink?"})
    assert recalled.startswith("[1]") and "green tea" in recalled.split("[2]")[0], recalled
    assert "ana" in (await call(session, "list_collections", {"database": db})).splitlines()
    listed = await call(session, "list_sources", {"database": db})
    assert listed.startswith("2 in all") and "- note-1 (Reactor note; completed)" in listed, listed
    memories = await call(session, "list_sources", {"database": db, "collection": "ana", "kind": "memory"})
    assert memories.startswith("2 in all"), memories
    deleted = await call(session, "delete_sources", {"database": db, "ids": ["note-1", "missing"]})
    assert deleted == "note-1: deleted\nmissing: not found", deleted

    step(f"{label}: errors are tool errors with the spec's codes")
    missing = await call_error(session, "search_knowledge", {"database": "nowhere", "query": "x"})
    assert missing.startswith("DATABASE_NOT_FOUND:"), missing
    bad = await call_error(session, "ingest", {"database": db, "text": "x", "document_base64": "eA=="})
    assert bad.startswith("INVALID_PARAMETERS:"), bad
    bad = await call_error(session, "ingest", {"database": db, "document_base64": "not base64!", "filename": "a.md"})
    assert bad.startswith("INVALID_PARAMETERS:"), bad
    status = await call_error(session, "indexing_status", {"database": db, "ids": ["never"]})
    assert status.startswith("FILE_NOT_FOUND:"), status


def http_client(key):
    return create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})


async def over_http(db):
    async with streamable_http_client(f"{URL}/mcp", http_client=http_client(KEY)) as (read, write):
        async with ClientSession(read, write) as session:
            info = await session.initialize()
            assert "engram" in (info.instructions or ""), info
            await exercise(session, "HTTP", db)


async def restricted():
    step("HTTP: a restricted key sees only its database; a wrong key is refused")
    key = os.environ["ENGRAM_RESTRICTED_KEY"]
    async with streamable_http_client(f"{URL}/mcp", http_client=http_client(key)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            assert (await call(session, "list_databases", {})).splitlines() == ["agents"]
            refused = await call_error(session, "search_knowledge", {"database": "agents-relay", "query": "x"})
            assert refused.startswith("FORBIDDEN:"), refused
    step("HTTP: a read-only key searches and lists, and every tool that changes something is refused")
    async with streamable_http_client(f"{URL}/mcp", http_client=http_client(os.environ["ENGRAM_READ_KEY"])) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await call(session, "search_knowledge", {"database": "agents", "query": "x"})
            await call(session, "list_sources", {"database": "agents"})
            for tool, args in [
                ("add_memories", {"database": "agents", "user": "ana", "memories": [{"text": "Prefers tea."}]}),
                ("ingest", {"database": "agents", "id": "ro", "title": "t", "text": "Read only."}),
                ("delete_sources", {"database": "agents", "ids": ["ro"]}),
            ]:
                refused = await call_error(session, tool, args)
                assert refused.startswith("FORBIDDEN:") and "needs `write`" in refused, (tool, refused)
    wrong = httpx.post(
        f"{URL}/mcp", headers={"Authorization": "Bearer ek_nope.nope", "Accept": "application/json, text/event-stream"},
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
    )
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "UNAUTHORIZED", wrong.text
    try:
        async with streamable_http_client(f"{URL}/mcp", http_client=http_client("ek_nope.nope")) as (read, write):
            async with ClientSession(read, write) as session:
                await asyncio.wait_for(session.initialize(), 20)
        raise AssertionError("a wrong key connected")
    except AssertionError:
        raise
    except BaseException:  # the SDK surfaces the 401 as its own error
        pass


async def over_stdio(db, args, env, label):
    params = StdioServerParameters(command=os.environ["ENGRAM_BIN"], args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await exercise(session, label, db)


async def main():
    await over_http("agents")
    await restricted()
    base_env = {k: v for k, v in os.environ.items() if k.startswith(("ENGRAM_EMBEDDING", "ENGRAM_STORAGE", "PATH", "HOME"))}
    await over_stdio("agents-relay", ["mcp", "--url", URL], {**base_env, "ENGRAM_API_KEY": KEY}, "stdio relay")
    await over_stdio(
        "local",
        ["mcp", "--data-dir", os.environ["ENGRAM_LOCAL_DIR"]],
        {**base_env, "ENGRAM_API_KEY": os.environ["ENGRAM_LOCAL_KEY"]},
        "stdio on a data directory",
    )
    print("mcp suite: all steps passed", flush=True)


asyncio.run(main())
