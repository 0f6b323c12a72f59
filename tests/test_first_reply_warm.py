"""The first reply after a start is as warm as the next: what a reply's path loads lazily (litellm and
the OpenAI SDK for the model, wordfreq for recall's ranking of a question's words) is loaded by the
start's warm-up thread (bot.cli.warm_up), and every SQL statement the reply runs was compiled by the
chat's warm-up (ChatService.warm_up) before its prompt; that warm-up keeps nothing."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sqlalchemy import select

from models import Message
from models.database import create_engine, create_sessionmaker
from testkit.llm_server import LLMTestServer
from tests.test_chat_cli import environment, personae

REPLY = "Roses like the sun."

# `personae`, watched: the imports of the lazy packages made on the event loop's thread, and the SQL
# statements compiled (SQLAlchemy logs "[generated in ...]" for those not in its cache) from the first
# line read (after the banner and a greeting) until the first reply's first words.
WATCHED = """
import atexit, logging, sys, threading

LAZY = ("litellm", "openai", "wordfreq")
on_the_loop, compiled = set(), []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in LAZY and threading.current_thread() is threading.main_thread():
            on_the_loop.add(name.split(".")[0])
        return None

class Compiled(logging.Handler):
    statement = ""
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("[generated in"):
            compiled.append(self.statement)
        self.statement = " ".join(message.split())[:120]

sql = logging.getLogger("sqlalchemy.engine.Engine")
sql.addHandler(Compiled())

class Keyboard:
    def __init__(self, keys):
        self.keys = keys
    def readline(self):
        if not hasattr(self, "read_before"):
            self.read_before = sql.setLevel(logging.INFO)
        return self.keys.readline()
    def __getattr__(self, name):
        return getattr(self.keys, name)

class Screen:
    def __init__(self, out):
        self.out = out
    def write(self, text):
        if "REPLY" in text:
            sql.setLevel(logging.WARNING)
        return self.out.write(text)
    def __getattr__(self, name):
        return getattr(self.out, name)

sys.stdin, sys.stdout = Keyboard(sys.stdin), Screen(sys.stdout)
sys.meta_path.insert(0, Watch())
atexit.register(lambda: print("imported on the event loop:", sorted(on_the_loop), file=sys.stderr))
atexit.register(lambda: print("compiled for the first reply:", compiled, file=sys.stderr))
from bot.cli import main
sys.exit(main(sys.argv[1:]))
""".replace("REPLY", REPLY.split()[0])


async def test_the_first_reply_loads_and_compiles_nothing_and_the_warm_up_keeps_nothing(
    scratch_database_url: str, llm_server: LLMTestServer, tmp_path: Path
) -> None:
    llm_server.responder = lambda body: REPLY
    env = environment(
        scratch_database_url, tmp_path, CHAT_MODEL="openai/test-chat", CHAT_API_BASE=llm_server.base_url
    )
    env["PYTHONPATH"] = str(Path(__file__).parents[1])
    assert (await personae("personality", "create", "Sage", env=env, cwd=tmp_path))[0] == 0
    script = tmp_path / "watched.py"
    script.write_text(WATCHED)
    # A question of several words: recall ranks them by how rare they are (wordfreq's tables).
    typed = b"What do my garden roses need in winter?\n/quit\n"
    chat = await asyncio.create_subprocess_exec(
        *(sys.executable, str(script), "chat", "--personality", "sage", "--user", "42"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    out, err = (text.decode() for text in await asyncio.wait_for(chat.communicate(typed), timeout=180))
    assert chat.returncode == 0, err
    assert REPLY in out
    assert "imported on the event loop: []" in err, err
    assert "compiled for the first reply: []" in err, err
    engine = create_engine(scratch_database_url)
    try:
        async with create_sessionmaker(engine)() as session:
            stored = (await session.scalars(select(Message.content).order_by(Message.id))).all()
    finally:
        await engine.dispose()
    assert stored == ["What do my garden roses need in winter?", REPLY]  # the warm-up's message undone
