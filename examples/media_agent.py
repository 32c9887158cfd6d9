"""Media: send an image and a PDF to an agent; a tool returns an image; a text-only model
gets the PDF as text through an adapter.

Runs without an API key (scripted models stand in): ``python examples/media_agent.py``.
The run stores only references (key, type, size, SHA-256); the bytes stay in the host's
storage, here a folder, and are read and checked before each model call.
"""

from __future__ import annotations

import asyncio
import tempfile
import zlib
from pathlib import Path

import steadyrun as sr
from steadyrun.chat import MediaPart, TextPart
from steadyrun.media import MediaOptions, MediaRef, media_ref
from steadyrun.testing import ScriptedModel, text, tool_calls


class FolderMedia:
    """The host's media storage: files in a folder, by key. Any blob store works the same."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, key: str, data: bytes, mime: str) -> MediaRef:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return media_ref(key, data, mime)

    async def read(self, ref: MediaRef) -> bytes:
        return await asyncio.to_thread((self.root / ref.key).read_bytes)


def tiny_png() -> bytes:
    """A 1x1 red PNG, made here so the example needs no files."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


PDF = b"%PDF-1.4\n% an invoice: 2 x widgets, total 42.00 EUR\n%%EOF\n"


def pdf_to_text(ref: MediaRef, data: bytes) -> str:
    """A document-to-text adapter (a real host would run a PDF extractor or OCR here)."""
    return data.decode("latin-1").splitlines()[1].lstrip("% ")


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        media = FolderMedia(Path(folder))
        screenshot = media.put("tickets/7/screenshot.png", tiny_png(), "image/png")
        invoice = media.put("tickets/7/invoice.pdf", PDF, "application/pdf")

        @sr.tool
        async def render_chart(ctx: sr.ToolContext) -> str:
            """Draw the customer's spending as a chart.

            Args:
                ctx: The call's context, filled by the runtime.
            """
            ctx.attach(media.put("charts/spending.png", tiny_png(), "image/png"))
            return "chart attached"

        options = MediaOptions(reader=media.read, adapters={"pdf": pdf_to_text})
        message = sr.Message(
            role="user",
            parts=[
                TextPart(text="Why was I charged this? See the screenshot and the invoice."),
                MediaPart(ref=screenshot),
                MediaPart(ref=invoice),
            ],
        )

        vision = ScriptedModel(
            [tool_calls(("render_chart", {})), text("The invoice shows 2 widgets.")],
            input_modalities={"image", "pdf"},
        )
        runtime = sr.Runtime(sr.SqliteStore(Path(folder) / "runs.db"), media=options)
        agent = sr.Agent(name="billing", model=vision, tools=[render_chart])
        result = await runtime.run(agent, run_id="ticket-7", input=message)
        print("answer:", result.text)
        for i, received in enumerate(vision.media, start=1):
            shown = ", ".join(f"{k} ({len(v)} bytes)" for k, v in received.items())
            print(f"model call {i} received: {shown}")
        print("stored on the tool's record:", [r.key for r in result.call("m1.c1").media])

        text_only = ScriptedModel([text("Your invoice totals 42 EUR.")], input_modalities=())
        plain = sr.Agent(name="billing-text", model=text_only)
        await runtime.run(plain, run_id="ticket-7-text", input=message)
        for m in text_only.requests[0].messages:
            for part in m.parts:
                if isinstance(part, TextPart):
                    print("text-only model read:", part.text.replace("\n", " | "))
        await runtime.store.close()


if __name__ == "__main__":
    asyncio.run(main())
