"""A loopback emulator of Pinecone's REST API, for the tests and the conformance suite.

The control plane (`/indexes`) and, per index, a data plane on a port of its
own (`/vectors/upsert`, `/query`, `/vectors/fetch`, `/vectors/update`,
`/vectors/delete`, `/describe_index_stats`, `/vectors/list`), JSON over HTTP
on 127.0.0.1, so that the real SDK's HTTP code talks to it. It enforces the
service's documented limits and metadata rules, and its filter semantics:

- metadata values are strings, finite numbers, booleans and lists of strings;
  no nulls, no objects; at most 40 KB of metadata per record;
- `{k: v}` and `$eq` match a value of the same type, or a list holding it;
  `$ne`, `$nin` match a present value that does not (a missing field matches
  neither); ranges compare numbers only; `$in`, `$exists`, `$and`, `$or`;
- at most 1,000 records per upsert, fetch or delete, 2 MB per request,
  `topK` up to 10,000 (1,000 with metadata or values); ids of 1 to 512
  characters; index names of lowercase letters, digits and `-`, at most 45;
- serverless: no delete by filter.

Search is exact; scores are cosine similarity, the dot product, or the squared
euclidean distance (smallest first). `fail(status, times)` scripts failures.
Not a product component: it is how a backend with no local engine is tested.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

API_KEY = "emulator-key"
MAX_BATCH = 1_000
MAX_REQUEST = 2 * 1024 * 1024
MAX_METADATA = 40 * 1024
MAX_TOP_K, MAX_TOP_K_WITH_DATA = 10_000, 1_000
MAX_ID = 512
NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,43}[a-z0-9])?")
OPERATORS = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists"}


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Index:
    name: str
    dimension: int
    metric: str
    cloud: str
    region: str
    server: ThreadingHTTPServer | None = None
    namespaces: dict[str, dict[str, tuple[list[float], dict[str, Any]]]] = field(
        default_factory=dict
    )

    def model(self) -> dict[str, Any]:
        assert self.server is not None
        return {
            "name": self.name,
            "host": f"http://127.0.0.1:{self.server.server_address[1]}",
            "status": {"ready": True, "state": "Ready"},
            "schema": {
                "fields": {
                    "_values": {
                        "type": "dense_vector",
                        "dimension": self.dimension,
                        "metric": self.metric,
                    }
                }
            },
            "deployment": {
                "deployment_type": "managed",
                "cloud": self.cloud,
                "region": self.region,
            },
            "deletion_protection": "disabled",
            "tags": None,
        }


class Emulator:
    """The service's state; `start()` serves it."""

    def __init__(self) -> None:
        self.indexes: dict[str, Index] = {}
        self.lock = threading.RLock()
        self.failures: list[int] = []
        self.requests = 0

    def fail(self, status: int, times: int = 1) -> None:
        """Answer the next `times` requests with `status` (429 carries Retry-After: 0)."""
        with self.lock:
            self.failures += [status] * times

    @contextmanager
    def start(self) -> Iterator[str]:
        """Serve the control plane on a free loopback port; yield its URL."""
        server = _serve(self, None)
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            for index in list(self.indexes.values()):
                _stop(index)

    # ---- control plane --------------------------------------------------------

    def control(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if parts == ["indexes"] and method == "GET":
            return 200, {"indexes": [i.model() for i in self.indexes.values()]}
        if parts == ["indexes"] and method == "POST":
            return 201, self._create(body)
        if len(parts) == 2 and parts[0] == "indexes":
            index = self.indexes.get(parts[1])
            if index is None:
                raise Refused(404, f"Resource {parts[1]} not found")
            if method == "GET":
                return 200, index.model()
            if method == "DELETE":
                del self.indexes[index.name]
                _stop(index)
                return 202, None
        raise Refused(404, f"no route {method} {path}")

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name", "")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise Refused(
                400,
                "Name must consist of lower case alphanumeric characters or '-', "
                "and be at most 45 characters",
            )
        if name in self.indexes:
            raise Refused(409, f"Resource {name} already exists")
        fields = body.get("schema", {}).get("fields", {})
        dense = [f for f in fields.values() if f.get("type") == "dense_vector"]
        if len(dense) != 1 or not 1 <= int(dense[0].get("dimension", 0)) <= 20_000:
            raise Refused(400, "the schema must declare one dense_vector field")
        metric = dense[0].get("metric") or "cosine"
        if metric not in ("cosine", "euclidean", "dotproduct"):
            raise Refused(400, f"unknown metric {metric}")
        deployment = body.get("deployment", {})
        index = Index(
            name,
            int(dense[0]["dimension"]),
            metric,
            deployment.get("cloud", "aws"),
            deployment.get("region", "us-east-1"),
        )
        index.server = _serve(self, index)
        self.indexes[name] = index
        return index.model()

    # ---- data plane -------------------------------------------------------------

    def data(
        self, index: Index, method: str, path: str, body: Any, query: dict[str, list[str]]
    ) -> Any:
        if self.indexes.get(index.name) is not index:
            raise Refused(404, f"index {index.name} not found")
        namespace = (body or {}).get("namespace", query.get("namespace", [""])[0]) or ""
        records = index.namespaces.setdefault(namespace, {})
        if path == "/vectors/upsert" and method == "POST":
            vectors = body.get("vectors", [])
            _check_count(vectors, "vectors")
            checked = [_record(index, v) for v in vectors]
            records.update(checked)
            return {"upsertedCount": len(checked)}
        if path == "/query" and method == "POST":
            return {"matches": self._query(index, records, body), "namespace": namespace}
        if path == "/vectors/fetch" and method == "GET":
            ids = query.get("ids", [])
            _check_count(ids, "ids")
            found = {
                i: {"id": i, "values": records[i][0], "metadata": records[i][1]}
                for i in ids
                if i in records
            }
            return {"vectors": found, "namespace": namespace}
        if path == "/vectors/update" and method == "POST":
            id_ = body.get("id")
            if id_ in records:
                values, metadata = records[id_]
                if "values" in body:
                    values = _values(index, body["values"])
                if "setMetadata" in body:
                    merged = {**metadata, **body["setMetadata"]}
                    metadata = _record(index, {"id": id_, "values": values, "metadata": merged})[1][
                        1
                    ]
                records[id_] = (values, metadata)
            return {}
        if path == "/vectors/delete" and method == "POST":
            if body.get("filter") is not None:
                raise Refused(
                    400, "Serverless and Starter indexes do not support deleting by metadata"
                )
            if body.get("deleteAll"):
                records.clear()
                return {}
            ids = body.get("ids", [])
            _check_count(ids, "ids")
            for i in ids:
                records.pop(i, None)
            return {}
        if path == "/describe_index_stats" and method == "POST":
            counts = {ns: {"vectorCount": len(r)} for ns, r in index.namespaces.items() if r}
            return {
                "namespaces": counts,
                "dimension": index.dimension,
                "indexFullness": 0.0,
                "totalVectorCount": sum(c["vectorCount"] for c in counts.values()),
                "metric": index.metric,
                "vectorType": "dense",
            }
        if path == "/vectors/list" and method == "GET":
            prefix = query.get("prefix", [""])[0]
            limit = int(query.get("limit", ["100"])[0])
            after = query.get("paginationToken", [""])[0]
            ids = sorted(i for i in records if i.startswith(prefix) and i > after)
            page = ids[:limit]
            result: dict[str, Any] = {"vectors": [{"id": i} for i in page], "namespace": namespace}
            if len(ids) > limit:
                result["pagination"] = {"next": page[-1]}
            return result
        raise Refused(404, f"no route {method} {path}")

    def _query(
        self, index: Index, records: dict[str, Any], body: dict[str, Any]
    ) -> list[dict[str, Any]]:
        top_k = body.get("topK")
        with_data = bool(body.get("includeValues") or body.get("includeMetadata"))
        largest = MAX_TOP_K_WITH_DATA if with_data else MAX_TOP_K
        if not isinstance(top_k, int) or not 1 <= top_k <= largest:
            raise Refused(400, f"topK must be between 1 and {largest}")
        vector = _values(index, body.get("vector"))
        flt = body.get("filter")
        if flt is not None:
            _check_filter(flt)
        hits = [(i, r) for i, r in records.items() if flt is None or _matches(flt, r[1])]
        if not hits:
            return []
        matrix = np.array([r[0] for _, r in hits], dtype=np.float64)
        q = np.array(vector, dtype=np.float64)
        if index.metric == "cosine":
            scores = matrix @ q / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(q))
            order = np.argsort(-scores, kind="stable")
        elif index.metric == "dotproduct":
            scores = matrix @ q
            order = np.argsort(-scores, kind="stable")
        else:
            scores = ((matrix - q) ** 2).sum(axis=1)
            order = np.argsort(scores, kind="stable")
        matches = []
        for n in order[:top_k]:
            id_, (values, metadata) = hits[n]
            match: dict[str, Any] = {"id": id_, "score": float(scores[n])}
            if body.get("includeValues"):
                match["values"] = values
            if body.get("includeMetadata"):
                match["metadata"] = metadata
            matches.append(match)
        return matches


def _check_count(items: Any, what: str) -> None:
    if not isinstance(items, list) or len(items) > MAX_BATCH:
        raise Refused(400, f"at most {MAX_BATCH} {what} per request")


def _record(index: Index, vector: dict[str, Any]) -> tuple[str, tuple[list[float], dict[str, Any]]]:
    id_ = vector.get("id")
    if not isinstance(id_, str) or not 1 <= len(id_) <= MAX_ID:
        raise Refused(400, f"Vector ID must be 1 to {MAX_ID} characters")
    values = _values(index, vector.get("values"))
    metadata = vector.get("metadata") or {}
    if len(json.dumps(metadata).encode()) > MAX_METADATA:
        raise Refused(400, f"Metadata size exceeds the limit of {MAX_METADATA} bytes per vector")
    for key, value in metadata.items():
        ok = (
            isinstance(value, str | bool)
            or (isinstance(value, int | float) and math.isfinite(value))
            or (isinstance(value, list) and all(isinstance(x, str) for x in value))
        )
        if not ok:
            raise Refused(
                400,
                f"Metadata value for field {key} must be a string, number, boolean "
                "or list of strings",
            )
    return id_, (values, metadata)


def _values(index: Index, values: Any) -> list[float]:
    """A vector of the index's dimension, of finite numbers."""
    if not isinstance(values, list) or len(values) != index.dimension:
        size = len(values) if isinstance(values, list) else 0
        raise Refused(
            400, f"Vector dimension {size} does not match the index's dimension {index.dimension}"
        )
    if not all(isinstance(x, int | float) and math.isfinite(x) for x in values):
        raise Refused(400, "Vector values must be finite numbers")
    return [float(x) for x in values]


def _check_filter(flt: Any) -> None:
    if not isinstance(flt, dict):
        raise Refused(400, "a filter must be an object")
    for key, value in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise Refused(400, f"{key} takes a non-empty list")
            for child in value:
                _check_filter(child)
        elif key.startswith("$"):
            raise Refused(400, f"unsupported operator {key}")
        elif isinstance(value, dict):
            for op, operand in value.items():
                if op not in OPERATORS:
                    raise Refused(400, f"unsupported operator {op}")
                if op in ("$gt", "$gte", "$lt", "$lte") and (
                    isinstance(operand, bool) or not isinstance(operand, int | float)
                ):
                    raise Refused(400, f"{op} takes a number")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return bool(a == b)


def _matches(flt: dict[str, Any], metadata: dict[str, Any]) -> bool:
    for key, value in flt.items():
        if key == "$and":
            ok = all(_matches(c, metadata) for c in value)
        elif key == "$or":
            ok = any(_matches(c, metadata) for c in value)
        else:
            conditions = value if isinstance(value, dict) else {"$eq": value}
            ok = all(
                _condition(metadata.get(key), key in metadata, op, operand)
                for op, operand in conditions.items()
            )
        if not ok:
            return False
    return True


def _condition(value: Any, present: bool, op: str, operand: Any) -> bool:
    if op == "$exists":
        return present is bool(operand)
    if not present:
        return False
    items = value if isinstance(value, list) else [value]
    if op == "$eq":
        return any(_same(x, operand) for x in items)
    if op == "$ne":
        return not any(_same(x, operand) for x in items)
    if op == "$in":
        return any(_same(x, o) for x in items for o in operand)
    if op == "$nin":
        return not any(_same(x, o) for x in items for o in operand)
    number = not isinstance(value, bool) and isinstance(value, int | float)
    return (
        number
        and {
            "$gt": value > operand,
            "$gte": value >= operand,
            "$lt": value < operand,
            "$lte": value <= operand,
        }[op]
    )


def _serve(emulator: Emulator, index: Index | None) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms stall

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            parts = urlsplit(self.path)
            status, payload = 200, None
            try:
                with emulator.lock:
                    emulator.requests += 1
                    if self.headers.get("Api-Key") != API_KEY:
                        raise Refused(401, "Invalid API Key")
                    if emulator.failures:
                        raise Refused(emulator.failures.pop(0), "scripted failure")
                    if length > MAX_REQUEST:
                        raise Refused(
                            413, f"Request size {length} exceeds the limit of {MAX_REQUEST} bytes"
                        )
                    body = json.loads(raw) if raw else None
                    query = parse_qs(parts.query)
                    if index is None:
                        status, payload = emulator.control(method, parts.path, body)
                    else:
                        payload = emulator.data(index, method, parts.path, body, query)
            except Refused as exc:
                status, payload = (
                    exc.status,
                    {"error": {"code": str(exc.status), "message": str(exc)}, "status": exc.status},
                )
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                status, payload = (
                    400,
                    {"error": {"code": "INVALID_ARGUMENT", "message": str(exc)}, "status": 400},
                )
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def do_DELETE(self) -> None:
            self._answer("DELETE")

        def do_PATCH(self) -> None:
            self._answer("PATCH")

    server = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def _stop(index: Index) -> None:
    if index.server is not None:
        index.server.shutdown()
        index.server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
