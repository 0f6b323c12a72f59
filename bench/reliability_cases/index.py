"""Index: the Qdrant Edge folder deleted or corrupted while personae is stopped, and stale points.

PostgreSQL holds the memories; the index can always be rebuilt from it. Start-up (here `personae
recall`, which opens the runtime as `personae run` does) must say in one line that the index is gone or
damaged and that `personae reindex` rebuilds it; the rebuild must leave no drift; and a point the index
should not hold must never bring back a forgotten memory or show one user another's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.reliability_cases import Outcome, Scale, case, check
from bench.reliability_cases.common import figures, run_command
from bench.reliability_cases.lab import EMBEDDING_MODEL, CliResult, Lab, prepare_database, rows_at

if TYPE_CHECKING:
    from bot.runtime import Runtime

ALICE, BOB = "2001", "2002"


def _transcript(path: Path, exchanges: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for i in range(exchanges):
            user = ALICE if i % 2 == 0 else BOB
            secret = f"locker{i}code{i * 37 % 1000}"
            lines = [
                {"id": f"q{i}", "role": "user", "content": f"Remember my {secret} please.", "user_id": user},
                {
                    "id": f"r{i}",
                    "role": "assistant",
                    "content": f"I will keep {secret} safe.",
                    "reply_to": f"q{i}",
                },
            ]
            out.writelines(json.dumps(line) + "\n" for line in lines)


async def _deployment(lab: Lab, name: str, exchanges: int) -> dict[str, Any]:
    """A database and data folder with `exchanges` memories of two users, formed by the import handler."""
    env: dict[str, Any] = {
        "database_url": await lab.cluster.create_database(f"{lab.name}_{name}"),
        "personae_data_dir": lab.workdir / f"index-{name}",
    }
    await prepare_database(env["database_url"], "keeper")
    transcript = lab.workdir / f"index-{name}.jsonl"
    _transcript(transcript, exchanges)
    async with lab.open_runtime(**env) as rt:
        code, _, err = await run_command(rt, "import", str(transcript), "--personality", "keeper")
    if code != 0:
        raise RuntimeError(f"import failed: {err}")
    return env


def _startup_lines(result: CliResult) -> list[str]:
    """What start-up said about the index: stderr lines naming it."""
    return [line for line in result.err.splitlines() if "index" in line.lower()]


async def _recall(rt: Runtime, user: str, query: str) -> list[dict[str, Any]]:
    code, out, _ = await run_command(rt, "recall", query, "--personality", "keeper", "--user", user, "--json")
    return json.loads(out)["memories"] if code == 0 and out.strip() else []


async def _check_and_recall(
    lab: Lab, env: dict[str, Any], user: str, query: str
) -> tuple[str, list[dict[str, Any]]]:
    """`reindex --check`'s verdict and a recall, in one runtime on the deployment."""
    try:
        async with lab.open_runtime(**env) as rt:
            _, out, err = await run_command(rt, "reindex", "--check")
            return (out.strip().splitlines() or [err])[-1], await _recall(rt, user, query)
    except Exception as exc:
        return f"cannot open: {type(exc).__name__}: {str(exc)[:100]}", []


async def _lost_index(lab: Lab, scale: Scale, damage: str) -> Outcome:
    exchanges = scale.pick(20, 200)
    env = await _deployment(lab, damage, exchanges)
    folder = Path(env["personae_data_dir"]) / "qdrant"
    if damage == "deleted":
        shutil.rmtree(folder)
    else:
        # Every file of the shard keeps its name and loses its content, as a bad disk or a partial copy.
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "personae.lock"):
            path.write_bytes(b"\x00garbage\xff" * 8)
    # Start-up as a process of its own (what `personae run` and every memory command open first).
    startup = await lab.cli("recall", "locker0code0", "--personality", "keeper", "--user", ALICE, **env)
    said = _startup_lines(startup)
    # The rebuild is checked by what it leaves (in this process at the quick scale).
    rebuilt = await lab.command(scale, "reindex", **env)
    verdict, after = await _check_and_recall(lab, env, ALICE, "locker0code0")
    found = any("locker0code0" in m["content"] for m in after)
    ok = (
        not startup.traceback
        and len(said) == 1
        and "reindex" in said[0]
        and rebuilt.code == 0
        and verdict == "no drift"
        and found
    )
    startup_said = said[0][-160:] if len(said) == 1 else f"{len(said)} lines about the index"
    rebuild_said = rebuilt.out.strip()[:80] or rebuilt.one_line()[:120]
    return check(
        ok,
        f"start-up exit {startup.code}{' with a traceback' if startup.traceback else ''}, said: "
        f"{startup_said!r}; reindex exit {rebuilt.code} ({rebuild_said}); check: {verdict}; "
        f"memory recalled after: {found}",
        figures(memories=exchanges),
    )


def _lost_index_case(damage: str, *, did: str, expected: str) -> None:
    """The case `index/folder-DAMAGE`: the folder deleted or corrupted, then start-up and a rebuild."""

    async def run(lab: Lab, scale: Scale) -> Outcome:
        return await _lost_index(lab, scale, damage)

    case("index", f"folder-{damage}", did=did, expected=expected)(run)


_lost_index_case(
    "deleted",
    did="memories imported, personae stopped, the Qdrant Edge folder deleted; then start-up, "
    "`personae reindex`, `personae reindex --check`, a recall",
    expected="start-up says in one line that the index is missing and `personae reindex` rebuilds it; "
    "the rebuild leaves 0 drift; the memory is recalled again",
)
_lost_index_case(
    "corrupted",
    did="memories imported, personae stopped, every file of the Qdrant Edge shard overwritten with "
    "garbage; then start-up, `personae reindex`, `personae reindex --check`, a recall",
    expected="start-up says in one line that the index is damaged and `personae reindex` rebuilds it "
    "(no traceback); the rebuild leaves 0 drift; the memory is recalled again",
)


@case(
    "index",
    "stale-points",
    did="an index copy taken before Alice forgot a memory is put back after the forget; a point "
    "carrying Alice's memory id with Bob as its owner is written into the index; then recalls of "
    "that memory's words as Alice and as Bob, `reindex --check`, `reindex`",
    expected="the forgotten memory is recalled 0 times, Bob never gets Alice's memory; the check reports "
    "the stale points and the rebuild leaves 0 drift",
)
async def stale_points(lab: Lab, scale: Scale) -> Outcome:
    from memory.recall.edge import EdgeVectorIndex
    from memory.recall.embedders import make_embedder
    from memory.recall.store import POINT_FIELDS, memory_point

    exchanges = scale.pick(10, 100)
    env = await _deployment(lab, "stale", exchanges)
    folder = Path(env["personae_data_dir"]) / "qdrant"
    snapshot = lab.workdir / "qdrant-before-forget"
    shutil.copytree(folder, snapshot, ignore=shutil.ignore_patterns("personae.lock"))
    url = env["database_url"]
    [forgotten] = await rows_at(
        url, "SELECT id FROM memories WHERE user_id = :u AND content LIKE '%locker0code0%'", u=ALICE
    )
    async with lab.open_runtime(**env) as rt:
        await rt.memory.forget(user_id=ALICE, memory_ids=[forgotten["id"]])
    shutil.rmtree(folder)
    shutil.copytree(snapshot, folder)

    # A point whose payload says Bob for a memory of Alice's (another user's memory, by a stale payload).
    [alice] = await rows_at(
        url, "SELECT * FROM memories WHERE user_id = :u AND content LIKE '%locker2code74%'", u=ALICE
    )
    embedder = make_embedder(EMBEDDING_MODEL, api_base=lab.llm.base_url, api_key="test")
    index = EdgeVectorIndex(folder)
    try:
        await index.ensure_collection(embedder.dimension)
        [vector] = await embedder.embed([alice["content"]])
        fields = {name: alice[name] for name in POINT_FIELDS} | {"user_id": BOB}
        await index.upsert([memory_point(fields, vector)])
    finally:
        await index.close()

    async with lab.open_runtime(**env) as rt:
        as_alice = await _recall(rt, ALICE, "locker0code0")
        as_bob = await _recall(rt, BOB, "locker2code74")
        _, before, _ = await run_command(rt, "reindex", "--check")
        rebuilt, _, _ = await run_command(rt, "reindex")
    after, _ = await _check_and_recall(lab, env, ALICE, "x")
    revived = sum("locker0code0" in m["content"] for m in as_alice)
    leaked = sum("locker2code74" in m["content"] for m in as_bob)
    reported = "stale in index: 0" not in before and "no drift" not in before
    ok = revived == 0 and leaked == 0 and reported and rebuilt == 0 and after == "no drift"
    return check(
        ok,
        f"forgotten memory recalled {revived} times, Alice's memory shown to Bob {leaked} times; check "
        f"before the rebuild: {' / '.join(before.strip().splitlines()[1:2])}; after: {after}",
        figures(memories=exchanges, revived=revived, leaked=leaked),
    )
