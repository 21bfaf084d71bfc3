"""The agent of docs/tutorial.md: a researcher that answers questions with a search tool and
e-mails each answer. ``CRASH=1`` kills the process (SIGKILL) in the middle of the second
e-mail; running it again resumes where it stopped."""

from __future__ import annotations

import os
import signal

import actorlog
import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool


@actorlog.message(name="ask")
@attrs.define
class Ask:
    question: str


@actorlog.message(name="notes")
@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)


@tool(name="search", effect="read")  # safe to repeat: re-run if a crash leaves it in doubt
async def search(query: str) -> str:
    print(f"    [tool ran] search({query!r})")
    return f"the best answer to {query!r}"


emails_sent = 0


@tool(name="send_email", effect="write", idempotent=True)  # re-run with the same key if in doubt
async def send_email(to: str, body: str, *, idempotency_key: str) -> None:
    global emails_sent
    emails_sent += 1
    print(f"    [tool ran] send_email({to!r}) key={idempotency_key}")
    if os.environ.get("CRASH") == "1" and emails_sent == 2:
        print("    *** killed (SIGKILL) while sending ***", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


class Researcher(Actor[Notes], name="researcher"):
    snapshot_every = 2  # steps between snapshots

    async def receive(self, ctx: Context, msg: Ask) -> str:
        found = await ctx.call(search, msg.question)  # intent logged, run, result logged
        self.state.answers.append(found)
        await ctx.call(send_email, "ops@example.com", found)
        return found  # the reply, logged with the step


QUESTIONS = ["hotels in Lisbon", "trains to Porto", "museums in Porto"]


async def main() -> None:
    async with ActorSystem("sqlite:///tutorial.db", actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "run-42")  # resumes run-42 if it exists
        for i, question in enumerate(QUESTIONS):
            # the same message_id on every run: a question already answered is not asked
            # again; its recorded answer comes back
            answer = await ref.ask(Ask(question), message_id=f"q-{i}")
            print(f"q-{i}: {answer}")


if __name__ == "__main__":
    anyio.run(main)
