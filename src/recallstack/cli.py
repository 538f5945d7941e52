"""The `recallstack` command: the demo, and what a user needs around the library."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import click
from rich.console import Console
from rich.table import Table

from recallstack.core.runtime.registry import Backend, registry

DEFAULT_EMBEDDER = "local/all-MiniLM-L6-v2"
INGEST_BATCH = 500
"""Messages `ingest` saves per call, one progress step each."""


EXIT_FAILURE = 1
"""Bad input or data: an invalid input file, a backend's error, something that does
not exist, drift doctor found, messages not indexed."""
EXIT_USAGE = 2
"""Bad usage: an unknown command or option, an invalid argument, a path that cannot
be read or written. Nothing was opened or created."""
EXIT_BUG = 3
"""An unexpected error: a bug in recallstack or a plugin; --debug shows the traceback."""
DEBUG_ENV = "RECALLSTACK_DEBUG"
PYTEST_EXITS = {0: 0, 1: EXIT_FAILURE, 2: EXIT_FAILURE, 3: EXIT_BUG, 4: EXIT_USAGE, 5: EXIT_FAILURE}
"""`conformance`'s exit codes from pytest's: failures, an interruption and no tests
collected (5) fail; pytest's usage errors are ours."""
ISSUES = "https://github.com/recallstack/recallstack/issues"


class Commands(click.Group):
    """Every failure ends in one line on stderr and a documented exit code (click's
    own usage errors too); the traceback only with --debug (or RECALLSTACK_DEBUG=1)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False  # click's errors are printed here, in one line
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
            sys.exit(EXIT_USAGE)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx else "recallstack"
            say(f"{exc.format_message()} (see `{command} --help`)")
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            say(exc.format_message())
            sys.exit(exc.exit_code)
        except click.Abort:
            say("interrupted")
            sys.exit(EXIT_FAILURE)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        from recallstack.core.errors import RecallstackError

        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as exc:
            if ctx.params.get("debug") or os.environ.get(DEBUG_ENV):
                raise
            if isinstance(exc, RecallstackError):
                say(one_line(exc))
                ctx.exit(EXIT_FAILURE)
            click.echo(
                f"recallstack: unexpected {type(exc).__name__}: {one_line(exc)}. This is a "
                f"bug: please report it at {ISSUES} (--debug shows the traceback)",
                err=True,
            )
            ctx.exit(EXIT_BUG)


def say(message: str) -> None:
    """An error, as the one line on stderr every failure ends in."""
    click.echo(f"recallstack: error: {' '.join(message.split())}", err=True)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@click.group(cls=Commands)
@click.option("--debug", is_flag=True, help="Show the traceback of a failure.")
@click.version_option(package_name="recallstack")
def main(debug: bool) -> None:
    """Long-term conversational memory for AI agents.

    Exit codes: 0 done; 1 bad input or data (an invalid input file, a backend
    error, not found, drift, not indexed); 2 bad usage (an unknown option, an
    invalid argument, a path that cannot be read or written: nothing was opened);
    3 an unexpected error (a bug: please report it; --debug shows it).
    """


def an_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A thread or resource id, checked as the library checks ids."""
    from recallstack.core.errors import InvalidInputError
    from recallstack.core.inputs import check_id

    if value is None:
        return None
    try:
        return check_id(value, param.name or "id")
    except InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from None


def writable_file(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A file this command may create or replace: its folder exists and is writable."""
    if value is None or value == "-":
        return value
    path = os.path.abspath(value)
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise click.BadParameter(f"{value!r} is a folder")
    if not os.path.isdir(folder):
        raise click.BadParameter(f"the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise click.BadParameter(f"{value!r} cannot be written")
    return value


def memory_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--db / --storage / --vector / --embedder, shared by the commands that open a Memory."""

    @click.option(
        "--db",
        default="local.db",
        show_default=True,
        callback=writable_file,
        help="LibSQL file for both stores.",
    )
    @click.option(
        "--storage", envvar="RECALLSTACK_STORAGE", help="Storage URL (default: the --db file)."
    )
    @click.option(
        "--vector", envvar="RECALLSTACK_VECTOR", help="Vector store URL (default: the --db file)."
    )
    @click.option(
        "--embedder", envvar="RECALLSTACK_EMBEDDER", default=DEFAULT_EMBEDDER, show_default=True
    )
    @functools.wraps(command)
    def wrapper(db: str, storage: str | None, vector: str | None, embedder: str, **kw: Any) -> Any:
        url = f"libsql:///{db}"
        for kind, option, spec in (
            ("storage", "--storage", storage),
            ("vector", "--vector", vector),
            ("embedder", "--embedder", embedder),
        ):
            if spec is not None:
                known_backend(kind, spec, option)
        return command(stores=Stores(storage or url, vector or url, embedder), **kw)

    return wrapper


class Stores(NamedTuple):
    """The backends a command opens, from --db / --storage / --vector / --embedder."""

    storage: str
    vector: str
    embedder: str

    def existing(self, option: str = "--db", vector: bool = True) -> Stores:
        """These stores, for a command that reads them (`vector`: the vector store too):
        a LibSQL file of theirs that does not exist is refused rather than made."""
        from recallstack.adapters.libsql.database import parse_url
        from recallstack.core.errors import InvalidInputError

        for url in (self.storage, self.vector) if vector else (self.storage,):
            try:
                path = parse_url(url).path if url.startswith("libsql:") else ""
            except InvalidInputError as exc:
                raise click.BadParameter(one_line(exc), param_hint=f"'{option}'") from None
            if path not in ("", ":memory:") and not os.path.exists(path):
                raise click.BadParameter(f"no database at {path!r}", param_hint=f"'{option}'")
        return self


def known_backend(kind: Any, spec: str, option: str) -> None:
    """A URL or embedder name some installed backend answers (nothing is opened)."""
    from recallstack.core.errors import InvalidInputError, UnknownBackendError

    try:
        registry().find(kind, spec)
    except (InvalidInputError, UnknownBackendError) as exc:
        raise click.BadParameter(one_line(exc), param_hint=f"'{option}'") from None


def open_storage(url: str) -> Any:
    """A storage alone, closed when the command ends (refused as `open_memory` does)."""
    from recallstack.core.errors import InvalidInputError, UnknownBackendError

    try:
        storage = registry().storage(url)
    except (InvalidInputError, UnknownBackendError) as exc:
        raise click.UsageError(one_line(exc)) from None
    click.get_current_context().call_on_close(storage.close)
    return storage


def open_memory(stores: Stores, options: dict[str, Any] | None = None) -> Any:
    """A Memory on the stores, closed when the command ends. A URL or embedder name the
    library refuses is a usage error: it is refused before any file is made."""
    from recallstack.core.api.memory import Memory
    from recallstack.core.errors import InvalidInputError, UnknownBackendError

    try:
        memory = Memory(*stores, options or {"semantic_recall": True})
    except (InvalidInputError, UnknownBackendError) as exc:
        raise click.UsageError(one_line(exc)) from None
    click.get_current_context().call_on_close(memory.close)
    return memory


@main.command()
@memory_options
def demo(stores: Stores) -> None:
    """Write a sample user's conversations and show what semantic recall finds."""
    from recallstack import demo as demo_module

    console = Console()
    with console.status("loading the embedding model"):
        memory = open_memory(stores, demo_module.OPTIONS)
    outcomes = demo_module.run(memory, console)
    console.print(f"[bold]{demo_module.summary(outcomes)}")


@main.command()
@memory_options
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.argument("jsonl", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def ingest(stores: Stores, jsonl: str, quiet: bool) -> None:
    """Save messages from a JSONL file (one message object per line).

    Each line needs thread_id, role and content; resource_id creates the thread
    when it does not exist yet; id, created_at and metadata are optional. The
    whole file is checked first: if any line is invalid, nothing is written.
    """
    from recallstack.core.errors import InvalidInputError
    from recallstack.core.inputs import json_line
    from recallstack.core.messages import Message

    raw = sys.stdin.buffer.read() if jsonl == "-" else open(jsonl, "rb").read()  # noqa: SIM115
    messages: list[Message] = []
    for number, line in enumerate(raw.splitlines(), start=1):
        data = json_line(line, number)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise InvalidInputError(f"line {number}: expected a JSON object")
        try:
            messages.append(Message.model_validate(data))
        except InvalidInputError as exc:
            raise InvalidInputError(f"line {number}: {exc}") from exc
    memory = open_memory(stores)
    missing: dict[str, str] = {}
    for number, message in enumerate(messages, start=1):
        if message.thread_id in missing or memory.get_thread(message.thread_id) is not None:
            continue
        if not message.resource_id:
            raise InvalidInputError(
                f"message {number}: thread {message.thread_id!r} does not exist; give resource_id"
            )
        missing[message.thread_id] = message.resource_id
    for thread_id, resource_id in missing.items():
        memory.create_thread(resource_id, thread_id=thread_id)
    saved = indexed = 0
    not_indexed: list[str] = []
    error = None
    with progress_of("ingest", quiet) as progress:
        for start in range(0, len(messages), INGEST_BATCH):
            result = memory.save_messages(messages[start : start + INGEST_BATCH])
            saved += len(result.messages)
            indexed += len(result.indexed)
            not_indexed += result.not_indexed
            error = error or result.error
            progress(saved, len(messages))
    click.echo(f"saved {saved} messages, indexed {indexed}")
    if not_indexed:
        click.echo(
            f"not indexed: {len(not_indexed)} ({error}); run `recallstack reindex`", err=True
        )
        sys.exit(EXIT_FAILURE)


@main.command()
@memory_options
@click.option("--thread", "thread_id", required=True, callback=an_id)
@click.option("--resource", "resource_id", callback=an_id)
@click.option("--query", required=True, help="What to search for.")
@click.option("--top-k", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--scope", type=click.Choice(["thread", "resource"]), default="resource")
@click.option("--json", "as_json", is_flag=True)
def recall(
    stores: Stores,
    thread_id: str,
    resource_id: str | None,
    query: str,
    top_k: int,
    scope: str,
    as_json: bool,
) -> None:
    """Recall messages similar to a query, from a thread or from all of its resource's threads."""
    from recallstack.core.errors import NotFoundError

    if not query.strip():
        raise click.BadParameter("is empty", param_hint="'--query'")
    memory = open_memory(stores.existing(), {"semantic_recall": {"top_k": top_k, "scope": scope}})
    if memory.get_thread(thread_id) is None:
        raise NotFoundError(f"thread {thread_id!r} does not exist")
    result = memory.recall(
        thread_id, resource_id=resource_id, vector_search_string=query, per_page=0
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "hits": [h.__dict__ for h in result.hits],
                    "messages": [m.model_dump(mode="json") for m in result.messages],
                },
                indent=2,
            )
        )
        return
    scores = {h.message_id: h.score for h in result.hits}
    table = Table("score", "thread", "role", "message")
    for m in result.messages:
        score = f"{scores[m.id]:.3f}" if m.id in scores else ""
        table.add_row(score, m.thread_id, m.role, m.text)
    Console().print(table)


@main.command()
@memory_options
@click.option("--resource", "resource_id", required=True, callback=an_id)
def threads(stores: Stores, resource_id: str) -> None:
    """List a resource's threads, newest first."""
    memory = open_memory(stores.existing(), {})
    table = Table("id", "title", "created", "messages")
    for t in memory.list_threads(resource_id).items:
        count = memory.storage.list_messages(t.id, per_page=0).total
        table.add_row(t.id, t.title or "", t.created_at.isoformat(timespec="seconds"), str(count))
    Console().print(table)


@contextmanager
def progress_of(label: str, quiet: bool) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback: a bar with rate and ETA on a terminal, a plain
    line per step on stderr otherwise, nothing with --quiet."""
    err = Console(stderr=True)
    if quiet:
        yield lambda done, total: None
    elif err.is_terminal:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            Task,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.text import Text

        class Rate(ProgressColumn):
            def render(self, task: Task) -> Text:
                return Text(f"{task.speed:,.0f}/s" if task.speed else "")

        columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), Rate())
        with Progress(*columns, TimeRemainingColumn(), console=err) as bar:
            task = bar.add_task(label, total=None)
            yield lambda done, total: bar.update(task, completed=done, total=total)
    else:
        yield lambda done, total: click.echo(f"{label}: {done:,} of {total:,}", err=True)


@main.command()
@memory_options
@click.option(
    "--batch-size",
    default=256,
    show_default=True,
    type=click.IntRange(min=1),
    help="Messages per embedder call.",
)
@click.option("--quiet", is_flag=True, help="No progress output.")
def reindex(stores: Stores, batch_size: int, quiet: bool) -> None:
    """Index every message not yet indexed under the current embedder."""
    memory = open_memory(stores.existing())
    with progress_of("reindex", quiet) as progress:
        result = memory.reindex(batch_size=batch_size, progress=progress)
    click.echo(f"indexed {result.indexed} messages")
    if result.failed:
        shown = ", ".join(result.failed_ids[:5])
        click.echo(
            f"recallstack: error: {result.failed} failed ({shown}): {result.error}", err=True
        )
        sys.exit(EXIT_FAILURE)


@main.command()
@memory_options
@click.option("--repair", is_flag=True, help="Fix what is found, then check again.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--quiet", is_flag=True, help="No progress output.")
def doctor(stores: Stores, repair: bool, as_json: bool, quiet: bool) -> None:
    """Check that every vector, index record and word entry agrees with its message:
    messages recorded as indexed without vectors, vectors without a message, stale
    contextual vectors, keyword-index drift. Exits 1 when any is left (after --repair,
    when the repair could not fix it)."""
    memory = open_memory(stores.existing())
    with progress_of("doctor", quiet) as progress:
        found = memory.doctor(progress=progress)
    fixed = memory.doctor(repair=True) if repair and not found.ok else None
    final = fixed or found
    if as_json:
        click.echo(
            json.dumps({"found": found.summary(), "after_repair": fixed and fixed.summary()})
        )
    else:
        click.echo(_checkup_line(found))
        if fixed is not None:
            click.echo(f"after repair: {_checkup_line(fixed)}")
        for left in final.left:
            click.echo(f"left: {left}")
    if not final.ok:
        sys.exit(EXIT_FAILURE)


def _checkup_line(found: Any) -> str:
    figures = found.summary()
    parts = [
        f"{sum(figures[key].values())} {label}"
        for key, label in (
            ("missing_vectors", "messages without their vectors"),
            ("orphan_vectors", "vectors without a message"),
            ("stale_vectors", "stale vectors"),
        )
    ]
    waiting = sum(figures["not_indexed"].values())
    return (
        f"{figures['messages']} messages in {len(figures['indexes'])} "
        f"{'index' if len(figures['indexes']) == 1 else 'indexes'}: "
        f"{', '.join(parts)}, {figures['word_drift']} word-index entries drifted; "
        f"{'no drift' if found.ok else f'drift {found.drift}'}"
        + (f" ({waiting} not indexed yet: run `recallstack reindex`)" if waiting else "")
    )


@main.command()
@memory_options
@click.option("--output", "-o", callback=writable_file, help="A file instead of stdout.")
@click.option(
    "--vectors", is_flag=True, help="Also write the vectors of --embedder's index, for import."
)
def export(stores: Stores, output: str | None, vectors: bool) -> None:
    """Write every resource, thread and message as JSON lines; with --vectors, their
    vectors too (an import of the same model writes them instead of embedding)."""
    from recallstack.core.api.migration import VectorSource, export_lines
    from recallstack.core.errors import NotFoundError

    stores = stores.existing(vector=vectors)
    source = None
    if vectors:
        memory = open_memory(stores)
        source = VectorSource.of(memory, memory)
        if source is None:
            raise NotFoundError(f"{stores[1]} holds no vectors of {stores[2]}")
        storage = memory.storage
    else:
        storage = open_storage(stores.storage)
    out = open(output, "w", encoding="utf-8") if output else sys.stdout  # noqa: SIM115
    try:
        for line in export_lines(storage, source):
            out.write(line + "\n")
    finally:
        if output:
            out.close()


@main.command("import")
@memory_options
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.argument("dump", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def import_(stores: Stores, dump: str, quiet: bool) -> None:
    """Save what `export` wrote, with its vectors where they are of --embedder's index,
    embedding the messages otherwise. The whole file is checked first: if any line
    is invalid, nothing is written."""
    from recallstack.core.api.migration import import_records, parse_lines

    raw = sys.stdin.buffer.read() if dump == "-" else open(dump, "rb").read()  # noqa: SIM115
    found = parse_lines(raw.splitlines())
    memory = open_memory(stores)
    with progress_of("import", quiet) as progress:
        saved = import_records(memory, found, progress)
    records = sum(kind in ("resource", "thread") for kind, _, _ in found)
    click.echo(
        f"imported {records} threads and resources, {saved.messages} messages "
        f"({saved.with_vectors} with the dump's vectors)"
    )


@main.command()
@click.option("--from", "source", required=True, help="The URL to copy from (storage and vectors).")
@click.option("--to", "target", required=True, help="The URL to copy to (storage and vectors).")
@click.option(
    "--embedder", envvar="RECALLSTACK_EMBEDDER", default=DEFAULT_EMBEDDER, show_default=True
)
@click.option("--quiet", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def migrate(source: str, target: str, embedder: str, quiet: bool, as_json: bool) -> None:
    """Copy a memory to another backend, with its vectors (both sides use --embedder);
    run it again to resume after an interruption. Ends with a check: the same
    messages in every thread, and the same hits for a few searches."""
    from recallstack.core.api.migration import describe
    from recallstack.core.api.migration import migrate as run

    read = Stores(source, source, embedder).existing("--from")
    source_memory = open_memory(read)
    target_memory = open_memory(Stores(target, target, embedder))
    with progress_of("migrate", quiet) as progress:
        result = run(source_memory, target_memory, progress)
    figures = describe(result)
    if as_json:
        click.echo(json.dumps(figures))
    else:
        click.echo(
            f"{result.threads} threads, {result.messages} messages; copied "
            f"{result.copied_messages} messages ({result.copied_vectors} with their vectors) "
            f"in {result.seconds:.1f} s "
            f"({figures['messages_per_second']:,.0f}/s); "
            f"verified: counts and {result.sampled} searches"
            if result.verified
            else "verification failed"
        )
    if not result.verified:
        for problem in result.problems:
            click.echo(f"recallstack: error: {problem}", err=True)
        sys.exit(EXIT_FAILURE)


def _describe(backend: Backend[Any]) -> dict[str, Any]:
    caps = backend.capabilities
    return {
        "kind": backend.kind,
        "name": backend.name,
        "schemes": list(backend.schemes),
        "plugin": backend.plugin,
        "description": backend.description,
        "installed": backend.missing_module() is None,
        "install": f'pip install "recallstack[{backend.extra}]"' if backend.extra else None,
        "capabilities": None if caps is None else json.loads(caps.model_dump_json()),
    }


@main.command()
@memory_options
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--keys",
    "keys_file",
    type=click.Path(exists=True, dir_okay=False),
    help='API keys: a JSON file {"key": "resource_id"} (else RECALLSTACK_API_KEYS).',
)
@click.option("--no-auth", is_flag=True, help="No keys: every request acts for --resource.")
@click.option("--resource", "resource_id", callback=an_id, help="The resource under --no-auth.")
def serve(
    stores: Stores,
    host: str,
    port: int,
    keys_file: str | None,
    no_auth: bool,
    resource_id: str | None,
) -> None:
    """Serve the memory over HTTP: a JSON API under /v1, its OpenAPI at /openapi.json
    (docs/server.md). Each API key acts for one resource."""
    from recallstack.core.errors import InvalidInputError

    try:
        import uvicorn

        from recallstack.server.app import create_app
        from recallstack.server.keys import Keys
    except ImportError:
        extra = 'pip install "recallstack[server]"'
        raise click.UsageError(f"serve needs the server extra: {extra}") from None
    if no_auth:
        if keys_file is not None or resource_id is None:
            raise click.UsageError("--no-auth takes one --resource, and no --keys")
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise click.UsageError("--no-auth serves this machine only: --host 127.0.0.1")
    elif resource_id is not None:
        raise click.UsageError("--resource goes with --no-auth; with keys, each key names one")
    try:
        keys = Keys.from_file(keys_file) if keys_file else None if no_auth else Keys.from_env()
    except InvalidInputError as exc:
        raise click.UsageError(one_line(exc)) from None
    if keys is None and not no_auth:
        raise click.UsageError(
            "serve needs API keys: --keys FILE or RECALLSTACK_API_KEYS "
            "(or --no-auth --resource ID, for this machine only)"
        )
    memory = open_async_memory(stores)
    app = create_app(memory, keys=keys, resource=resource_id, owns_memory=True, host=host)
    uvicorn.run(app, host=host, port=port, log_level="info")


@main.command()
@click.argument("db_url", default="local.db")
@click.option(
    "--embedder", envvar="RECALLSTACK_EMBEDDER", default=DEFAULT_EMBEDDER, show_default=True
)
@click.option(
    "--resource",
    "resource_id",
    callback=an_id,
    help="The resource to inspect (default: the only one the database holds).",
)
@click.option("--port", default=0, type=click.IntRange(0, 65535), help="0 (default): a free one.")
def inspect(db_url: str, embedder: str, resource_id: str | None, port: int) -> None:
    """Open the memory inspector on this machine: DB_URL is a LibSQL file or a storage URL
    (the vector store beside it). Listens on 127.0.0.1 only, with a key made for this run,
    and prints the page's address (docs/inspector.md)."""
    import secrets
    import socket

    try:
        import uvicorn

        from recallstack.server.app import create_app
        from recallstack.server.keys import Keys
    except ImportError:
        extra = 'pip install "recallstack[server]"'
        raise click.UsageError(f"inspect needs the server extra: {extra}") from None
    url = db_url if "://" in db_url else f"libsql:///{db_url}"
    for kind, spec, where in (("storage", url, "DB_URL"), ("embedder", embedder, "--embedder")):
        known_backend(kind, spec, where)
    stores = Stores(url, url, embedder).existing("DB_URL")
    resource_id = resource_id or only_resource(open_storage(stores.storage))
    key = secrets.token_urlsafe(24)
    listening = socket.socket()
    listening.bind(("127.0.0.1", port))
    listening.listen(128)  # connections wait from now on, before the server takes them
    memory = open_async_memory(stores)
    app = create_app(memory, keys=Keys({key: resource_id}), owns_memory=True)
    address = f"http://127.0.0.1:{listening.getsockname()[1]}/inspect#key={key}"
    click.echo(f"inspecting resource {resource_id!r} at {address}", err=True)
    click.echo(
        "the key in that address is this run's only: it ends when you stop (Ctrl-C)", err=True
    )
    config = uvicorn.Config(app, log_level="warning")
    uvicorn.Server(config).run(sockets=[listening])


def only_resource(storage: Any) -> str:
    """The one resource whose threads the storage holds; several or none is a usage error
    that names some of them."""
    found: set[str] = set()
    after = None
    while threads := storage.all_threads(after=after, limit=1000):
        found |= {t.resource_id for t in threads}
        if len(found) > 1:
            shown = ", ".join(repr(r) for r in sorted(found)[:5])
            raise click.UsageError(
                f"the database holds several resources ({shown}): choose one with --resource"
            )
        after = threads[-1].id
    if not found:
        raise click.UsageError("the database holds no threads yet: nothing to inspect")
    return found.pop()


@main.command()
@memory_options
@click.option(
    "--resource", "resource_id", callback=an_id, required=True, help="The resource it acts for."
)
def mcp(stores: Stores, resource_id: str) -> None:
    """Serve the memory to an MCP client over stdio, for one resource (docs/server.md).
    Over HTTP, `serve` has it at /mcp behind the API keys."""
    import asyncio

    try:
        from recallstack.server.mcp_server import CALLER, create_mcp
    except ImportError:
        extra = 'pip install "recallstack[server]"'
        raise click.UsageError(f"mcp needs the server extra: {extra}") from None
    memory = open_async_memory(stores)

    async def run() -> None:
        CALLER.set(resource_id)
        try:
            await create_mcp(memory).run_stdio_async()
        finally:
            await memory.aclose()

    asyncio.run(run())


@main.group(name="eval")
def evaluations() -> None:
    """Benchmarks on your own backend and embedder."""


@evaluations.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--storage", help="Storage URL (default: a LibSQL file in a temporary folder).")
@click.option("--vector", help="Vector store URL (default: beside the storage).")
@click.option("--embedder", default=DEFAULT_EMBEDDER, show_default=True)
@click.option(
    "--options",
    "options_json",
    default='{"semantic_recall": true}',
    show_default=True,
    help="The memory's options, as JSON.",
)
@click.option("--conversations", type=click.IntRange(1), help="Only the first N of the file.")
@click.option("--keep", is_flag=True, help="Leave the conversations in the store afterwards.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--quiet", is_flag=True, help="No progress output.")
def locomo(
    file: str,
    storage: str | None,
    vector: str | None,
    embedder: str,
    options_json: str,
    conversations: int | None,
    keep: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """LoCoMo retrieval on this backend and embedder: recall@5/10/25/50 of each question's
    evidence turns (and recall-any, recall-all), with search latency, beside the paper's
    DRAGON (docs/guide.md). FILE is a LoCoMo JSON file (the benchmark's locomo10.json).
    The conversations are written as resources named by their sample_id and deleted
    afterwards; a store that already holds one is refused."""
    import tempfile

    from recallstack import locomo as benchmark

    try:
        options = json.loads(options_json)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg})", param_hint="'--options'") from None
    for kind, spec, where in (
        ("storage", storage, "--storage"),
        ("vector", vector or storage, "--vector"),
        ("embedder", embedder, "--embedder"),
    ):
        if spec is not None:
            known_backend(kind, spec, where)
    data = benchmark.load(file)[:conversations]
    with tempfile.TemporaryDirectory(prefix="recallstack-locomo-") as folder:
        url = storage or f"libsql:///{os.path.join(folder, 'locomo.db')}"
        memory = open_memory(Stores(url, vector or url, embedder), options)
        benchmark.refuse_taken(memory, data)
        try:
            with progress_stages(quiet) as progress:
                result = benchmark.evaluate(memory, data, progress)
        finally:
            if not keep and storage is not None:
                for thread in (t for sample in data for t in benchmark.threads_of(sample)):
                    memory.delete_thread(thread)
        memory.close()
    summary = result.summary()
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    where = storage or "a temporary LibSQL file"
    click.echo(
        f"LoCoMo: {len(data)} conversations, {result.turns:,} turns, {len(result.questions)} "
        f"questions (categories 1-4) on {where}, {embedder}, options {options_json}"
    )
    rate, search = summary["ingest_turns_per_second"], summary["search_ms"]
    click.echo(
        f"saved {rate:,.0f} turns/s; search p50 {search['p50']:.1f} ms, "
        f"p95 {search['p95']:.1f} ms (query embedding included)"
    )
    ks = " | ".join(f"@{k}" for k in benchmark.KS)
    click.echo(f"| questions | n | measure | {ks} |\n|---|---|---|" + "---|" * len(benchmark.KS))
    rows = [("all", len(result.questions), result.rows())]
    for number, name in benchmark.CATEGORIES.items():
        asked = sum(q.category == number for q in result.questions)
        rows.append((f"{number} {name}", asked, result.rows(number)))
    for label, n, figures in rows:
        for measure in ("recall", "any", "all"):
            cells = " | ".join(f"{v:.1f}" for v in figures[measure])
            shown = {"recall": "R", "any": "recall-any", "all": "recall-all"}[measure]
            click.echo(f"| {label} | {n} | {shown} | {cells} |")
    dragon = " | ".join(f"{v:.1f}" for v in benchmark.DRAGON)
    click.echo(f"| DRAGON (the paper, all ten conversations) | | R | {dragon} |")


@contextmanager
def progress_stages(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A `progress(stage, done, total)` callback: one `progress_of` bar per stage, moved
    at most a hundred times."""
    with contextlib.ExitStack() as stack:
        bars: dict[str, Callable[[int, int], None]] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                bars.clear()
                stack.close()
                bars[stage] = stack.enter_context(progress_of(stage, quiet))
            if done == total or done % max(1, total // 100) == 0:
                bars[stage](done, total)

        yield update


def open_async_memory(stores: Stores) -> Any:
    """An AsyncMemory on the stores, refused as `open_memory` refuses."""
    from recallstack.core.api.async_memory import AsyncMemory
    from recallstack.core.errors import InvalidInputError, UnknownBackendError

    try:
        return AsyncMemory(*stores, {"semantic_recall": True})
    except (InvalidInputError, UnknownBackendError) as exc:
        raise click.UsageError(one_line(exc)) from None


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def backends(as_json: bool) -> None:
    """List the registered backends, their URL schemes and capabilities."""
    rows = [_describe(b) for b in registry().all()]
    if as_json:
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    table = Table("kind", "name", "schemes", "plugin", "installed", "capabilities")
    for row in rows:
        caps = row["capabilities"]
        summary = row["description"]
        if caps is not None:
            summary += (
                f"\noperators: {' '.join(sorted(caps['operators']))}"
                f"\nmetrics: {', '.join(sorted(caps['metrics']))}; "
                f"{'exact' if caps['exact'] else 'approximate'} search"
            )
            if caps["stand_in"]:
                summary += f"\ntested against a stand-in: {caps['stand_in']}"
        separator = "/" if row["kind"] == "embedder" else ":"
        table.add_row(
            row["kind"],
            row["name"],
            ", ".join(s + separator for s in row["schemes"]),
            row["plugin"],
            "yes" if row["installed"] else f"no: {row['install']}",
            summary,
        )
    Console().print(table)


@main.command()
@click.option("--backend", "backends_", multiple=True, help="A backend name (throwaway instance).")
@click.option("--url", "urls", multiple=True, help="A deployment URL (cleans up what it made).")
@click.option(
    "--report", callback=writable_file, help="Write FILE.json or FILE.md (by its suffix)."
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def conformance(
    backends_: tuple[str, ...],
    urls: tuple[str, ...],
    report: str | None,
    pytest_args: tuple[str, ...],
) -> None:
    """Run the conformance suite on backends; extra arguments go to pytest."""
    try:
        import pytest
    except ImportError as exc:
        raise click.ClickException(
            'the suite needs: pip install "recallstack[conformance]"'
        ) from exc
    from recallstack.conformance.plugin import CASES

    if not backends_ and not urls:
        raise click.UsageError("name at least one --backend or --url")
    known = sorted({t.backend for t in registry().targets})
    for name in backends_:
        if name not in known:
            raise click.BadParameter(
                f"no backend {name!r}; known: {', '.join(known)}", param_hint="'--backend'"
            )
    args = ["-p", "no:cacheprovider", "-q", str(CASES), *pytest_args]
    for name in backends_:
        args += ["--recallstack-backend", name]
    for url in urls:
        args += ["--recallstack-url", url]
    if report:
        args += ["--recallstack-report", report]
    raise SystemExit(PYTEST_EXITS.get(int(pytest.main(args)), EXIT_BUG))
