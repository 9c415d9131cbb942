"""Write: create or replace a file with the given text, atomically.

Missing parent directories are created (the model asked for that path; making it name a
directory first only costs a round). The content is encoded as UTF-8 and lands through
`textfile.write_atomically`: a reader sees the old file or the new one, an existing file keeps
its permission bits, and a symlink is written through. Refused, as failed results: a directory
or special file at the path, a parent that is not a directory, an OS error (permission, disk
full), and content that cannot be encoded (a lone surrogate).
"""

from __future__ import annotations

from typing import Annotated

import trio
from msgspec import Meta, Struct

from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.sandbox.confinement import Confinement, SandboxUnavailable
from robotad.tools.paths import canonical_path
from robotad.tools.textfile import FileRefused, describe_os_error, write_atomically

__all__ = ["WriteArguments", "WriteTool", "count_lines"]


class WriteArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Create or overwrite a file with exactly this content."""

    file_path: Annotated[
        str,
        Meta(
            min_length=1,
            description="The file to write; relative paths are taken from the session's cwd.",
        ),
    ]
    content: Annotated[str, Meta(description="The complete new content of the file.")]


def count_lines(text: str) -> int:
    """Lines as an editor counts them: a final line without a newline still counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


class WriteTool(TypedTool[WriteArguments]):
    """The built-in Write tool (risk ``modify``; permission argument ``file_path``, a path)."""

    name = "Write"
    description = (
        "Write a file to the local file system, replacing it if it exists. Creates missing "
        "parent directories. The write is atomic and keeps an existing file's permissions. "
        "Prefer Edit for changing part of an existing file."
    )
    profile = ToolProfile(risk="modify", argument_key="file_path", argument_kind="path")
    Arguments = WriteArguments

    def __init__(self, confinement: Confinement | None = None) -> None:
        self.confinement = confinement or Confinement()

    async def run(self, arguments: WriteArguments, ctx: ToolContext) -> ToolResult:
        try:
            path = canonical_path(arguments.file_path, ctx.cwd)
        except ArgumentError as exc:
            return ToolResult(ok=False, content=f"file_path: {exc}")
        try:
            async with self.confinement.exclusive(ctx.cwd):
                return await self._write(path, arguments, ctx)
        except SandboxUnavailable as exc:
            return ToolResult(ok=False, content=str(exc), metadata={"path": path})

    async def _write(self, path: str, arguments: WriteArguments, ctx: ToolContext) -> ToolResult:
        refusal = await self.confinement.write_refusal(path, ctx.cwd)
        if refusal is not None:
            return ToolResult(ok=False, content=refusal, metadata={"path": path})
        try:
            data = arguments.content.encode("utf-8")
        except UnicodeEncodeError as exc:
            return ToolResult(
                ok=False,
                content=f"content cannot be written as UTF-8 (at character {exc.start})",
                metadata={"path": path},
            )
        try:
            created = await trio.to_thread.run_sync(_write, path, data)
        except FileRefused as exc:
            return ToolResult(ok=False, content=str(exc), metadata={"path": path})
        except OSError as exc:
            return ToolResult(
                ok=False, content=describe_os_error(exc, path), metadata={"path": path}
            )
        lines = count_lines(arguments.content)
        verb = "Created" if created else "Overwrote"
        return ToolResult(
            ok=True,
            content=f"{verb} {path} ({len(data)} bytes, {lines} lines)",
            metadata={"path": path, "bytes": len(data), "lines": lines, "created": created},
        )


def _write(path: str, data: bytes) -> bool:
    return write_atomically(path, data, make_parents=True)
