"""Events from a step to its caller: ctx.emit in the handler, ref.ask_stream in the caller."""

import actorlog
import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import MemoryStore


@actorlog.message(name="research")
@attrs.define
class Research:
    topic: str


@actorlog.message(name="research_notes")
@attrs.define
class Notes:
    done: list[str] = attrs.Factory(list)


@tool(name="search", effect="read")
async def search(topic: str) -> list[str]:
    return [f"{topic} result {i}" for i in range(12)]


class Researcher(Actor[Notes], name="streaming_researcher"):
    async def receive(self, ctx: Context, msg: Research) -> str:
        ctx.emit("searching")
        found = await ctx.call(search, msg.topic)
        ctx.emit({"found": len(found)})
        ctx.emit("drafting")
        self.state.done.append(msg.topic)
        return f"a draft about {msg.topic} from {len(found)} results"


async def main() -> None:
    async with ActorSystem(MemoryStore(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r-1")
        stream = ref.ask_stream(Research("lisbon"), message_id="q-1")
        async for ev in stream:
            print(ev.number, ev.data)  # 1 searching / 2 {'found': 12} / 3 drafting
        print(stream.reply)  # a draft about lisbon from 12 results


if __name__ == "__main__":
    anyio.run(main)
