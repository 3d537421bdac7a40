"""Reliable checkpoints of a recursive group, resume after a driver death, and recovery after
lost executor blocks.

Every `spark.recsql.checkpointInterval` iterations the state of each CTE of a group is written as
parquet under `<dir>/<fingerprint>/<group>/iter-<N>/<cte>/<part>/`, then `manifest.json` is
written last (to a temporary name, then renamed), so a directory without a manifest is never
read. Only the latest complete checkpoint of a group is kept; a statement that completes removes
its whole `<dir>/<fingerprint>/` tree.

The fingerprint (sha256) covers what decides the answer: the statement text (after `{name}`
placeholders are filled), its `:name` arguments, `spark.recsql.sumTolerance`, and, for every
relation the plan reads, its name, schema and input files with size and modification time (or,
for a relation with no input files, its row count). A checkpoint with another fingerprint lives
in another directory and its manifest is checked again on load: it is never reused.

Manifests, listings and deletions go through `pyarrow.fs` (local paths, file://, s3://, gs://,
hdfs:// where libhdfs is available); the parquet files are written and read by Spark. A path
without a scheme is local (`file:`) for both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from recsql.errors import RecSQLError
from recsql.executor.loop.failures import LOST_BLOCK_MARKERS, BlocksLost, lost_blocks
from recsql.executor.loop.protocols import Loop, Safeguard, Unguarded
from recsql.executor.state.bases import FILES, file_identity, forget, plan_reads, release, row_identity, scope
from recsql.executor.state.relations import ContributorState, RelationState
from recsql.planner.names import TableName

if TYPE_CHECKING:
    from recsql.planner.model import QueryPlan
    from recsql.settings import Settings

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
MAX_RECOVERIES = 3  # reloads after lost blocks per group run before the failure is raised


# -- where checkpoints go -------------------------------------------------------------------


def checkpoint_root(spark: SparkSession, settings: Settings) -> str | None:
    """`spark.recsql.checkpointDir`, else the session's `spark.checkpoint.dir`, else None."""
    root = settings.checkpoint_dir or _conf(spark, "spark.checkpoint.dir")
    if not root:
        return None
    if not urlparse(root).scheme or len(urlparse(root).scheme) == 1:  # plain (or C:) path
        root = "file://" + os.path.abspath(root)
    return root.rstrip("/")


def _conf(spark: SparkSession, key: str) -> str | None:
    try:
        return spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - some Connect servers refuse static keys
        return None


def _fs(uri: str):
    """A pyarrow filesystem and the path inside it."""
    from pyarrow import fs

    if uri.startswith("file://"):
        return fs.LocalFileSystem(), urlparse(uri).path
    return fs.FileSystem.from_uri(uri)


# -- fingerprint ----------------------------------------------------------------------------


def fingerprint(spark: SparkSession, plan: QueryPlan, settings: Settings, args: dict | None,
                frames: dict[str, DataFrame]) -> str:
    digest = hashlib.sha256()

    def add(*parts: Any) -> None:
        digest.update(json.dumps(parts, default=str, sort_keys=True).encode())
        digest.update(b"\0")

    add("recsql-checkpoint", FORMAT_VERSION, plan.sql, args or {}, settings.sum_tolerance)
    names = sorted(read_relations(plan), key=lambda n: n.key)
    if names:  # a name of fewer parts resolves in the current catalog and schema (`USE`)
        add("scope", *scope(spark))
    for name in names:
        try:
            df = spark.table(name.sql)
        except Exception:  # noqa: BLE001 - e.g. a table-valued function: the text covers it
            add("unresolved", name.key)
            continue
        add("table", name.key, *relation_identity(df))
    for binding in sorted(frames):
        add("frame", binding, *relation_identity(frames[binding]))
    return digest.hexdigest()


def read_relations(plan: QueryPlan) -> set[TableName]:
    """Names of the catalog relations (tables, views) the plan reads."""
    from recsql.planner.model import GroupStep, ViewStep

    nodes: list[exp.Expr] = [plan.final]
    names: set[TableName] = set()
    for step in plan.steps:
        if isinstance(step, ViewStep):
            nodes.append(step.query)
        elif isinstance(step, GroupStep):
            for cte in step.ctes:
                for branch in cte.branches:
                    nodes.append(branch.select)
                    names.update(base.table for base in branch.bases)
    for node in nodes:
        for table in node.find_all(exp.Table):
            if isinstance(table.this, exp.Identifier):
                names.add(TableName.of(table))
    return names


def relation_identity(df: DataFrame) -> list[Any]:
    """Schema, then what tells the relation's rows from an earlier version's, as a kept base
    copy is told (`bases._identity`): each input file with its size and mtime where the plan
    reads local files alone, else its rows' hashes (a cache anywhere in the plan: a view of
    files and a cached table lists only the files, and looked unchanged after an INSERT into
    the table), else (rows that cannot be hashed) the row count."""
    files, local = file_identity(df)
    identity: list[Any] = [df.schema.simpleString()]
    if local and plan_reads(df) == FILES:
        return [*identity, *files]
    rows = row_identity(df, "a relation the statement reads")
    return [*identity, *(rows if rows is not None else [("rows", df.count())])]


# -- one statement's checkpoints ------------------------------------------------------------


@dataclass
class Recovery:
    """Checkpoint policy of one statement; `None` root means reliable checkpoints are off."""

    spark: SparkSession
    root: str | None
    interval: int
    resume: bool
    make_fingerprint: Any  # () -> str, computed once, when first needed
    _fingerprint: str | None = field(default=None, init=False)

    @classmethod
    def for_statement(cls, spark: SparkSession, settings: Settings, plan: QueryPlan,
                      args: dict | None, frames: dict[str, DataFrame], resume: bool) -> Recovery:
        root = checkpoint_root(spark, settings)
        if resume and root is None:
            raise RecSQLError(
                "resume needs a checkpoint directory: set spark.recsql.checkpointDir (or the "
                "session's spark.checkpoint.dir) to where the interrupted run wrote its checkpoints",
                condition="RECSQL_RESUME_WITHOUT_CHECKPOINT_DIR",
            )
        return cls(spark, root, settings.checkpoint_interval, resume,
                   lambda: fingerprint(spark, plan, settings, args, frames))

    @property
    def enabled(self) -> bool:
        return self.root is not None and (self.interval > 0 or self.resume)

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.make_fingerprint()
        return self._fingerprint

    @property
    def statement_dir(self) -> str:
        return f"{self.root}/{self.fingerprint[:32]}"

    def group_dir(self, group_run: Loop) -> str:
        return f"{self.statement_dir}/{'-'.join(c.key for c in group_run.group.ctes)}"

    def guard(self, group_run: Loop) -> Safeguard:
        """The safeguard of one group's run (`Context.guard`): its checkpoints, or none."""
        return GroupCheckpoints(self, group_run) if self.enabled else Unguarded()

    def finish(self) -> None:
        """The statement completed: its checkpoints are no longer needed."""
        if self.root is not None and self._fingerprint is not None:
            _delete(self.statement_dir)


class GroupCheckpoints:
    """A group run's `Safeguard`: its latest checkpoint resumed, written every `interval`
    iterations, and reloaded after lost blocks."""

    def __init__(self, recovery: Recovery, group_run: Loop) -> None:
        self.recovery = recovery
        self.run = group_run
        self.latest: int | None = None  # iteration of the latest complete checkpoint written
        self.recoveries = 0

    def resume(self) -> int | None:
        """Restore the latest complete matching checkpoint; its iteration, or None."""
        if not self.recovery.resume:
            return None
        return self._load_latest(self.recovery)

    def kept(self, iteration: int) -> None:
        rec = self.recovery
        if rec.interval <= 0 or iteration % rec.interval:
            return
        group_dir = rec.group_dir(self.run)
        self._write(rec, f"{group_dir}/iter-{iteration}", iteration)
        self.latest = iteration
        for old, _ in _complete_checkpoints(group_dir):
            if old != iteration:
                _delete(f"{group_dir}/iter-{old}")

    def _write(self, rec: Recovery, where: str, iteration: int) -> None:
        """Write a checkpoint; lost blocks become `BlocksLost`. The write reads the iteration's
        `localCheckpoint`ed state, so an executor that dies after the iteration's action and
        before this write (seen on a standalone cluster) fails the write the way it would fail
        the next iteration; left as a raw Py4JJavaError it ended the statement. The partial
        directory has no manifest, so recovery reloads the checkpoint before it."""
        try:
            write_checkpoint(self.run, where, iteration, rec.fingerprint)
        except Exception as error:  # classic (Py4J) and Connect errors alike
            if not lost_blocks(str(error)):
                raise
            marker = next(m for m in LOST_BLOCK_MARKERS if m in str(error))
            raise BlocksLost(f"writing the checkpoint of iteration {iteration} failed: executor "
                             f"blocks were lost ({marker})",
                             condition="RECSQL_BLOCKS_LOST") from None

    def recover(self, error: BlocksLost) -> int:
        """Reload the latest complete checkpoint after lost blocks; its iteration. Re-raises
        `error` when there is none or the retries are used up."""
        rec = self.recovery
        if self.recoveries >= MAX_RECOVERIES:
            raise error
        self.recoveries += 1
        forget(self.run.ctx.spark)  # the pre-partitioned base tables may have died too
        release(self.run.ctx)
        self.run.ctx.bases.clear()
        iteration = self._load_latest(rec)
        if iteration is None:
            raise error
        log.warning("recsql: %s; continuing from the checkpoint of iteration %d (recovery %d/%d)",
                    error, iteration, self.recoveries, MAX_RECOVERIES)
        return iteration

    def _load_latest(self, rec: Recovery) -> int | None:
        group_dir = rec.group_dir(self.run)
        for iteration, manifest in reversed(_complete_checkpoints(group_dir)):
            if manifest.get("fingerprint") != rec.fingerprint or manifest.get(
                    "version") != FORMAT_VERSION:
                log.warning("recsql: refusing checkpoint %s/iter-%d: it belongs to another query "
                            "or input", group_dir, iteration)
                continue
            load_checkpoint(self.run, f"{group_dir}/iter-{iteration}", manifest)
            return iteration
        return None


# -- writing and reading one checkpoint -----------------------------------------------------


def _parts(state: RelationState) -> dict[str, DataFrame]:
    """The DataFrames that make up a state (written as one parquet dataset each)."""
    parts = {"all": state.all, "delta": state.delta}
    if isinstance(state, ContributorState):
        parts["contributors"] = state.contributors
    return parts


def write_checkpoint(group_run: Loop, where: str, iteration: int, fp: str) -> None:
    _delete(where)  # a partial directory left by a crash at this iteration
    states = {}
    for key, state in group_run.states.items():
        for part, df in _parts(state).items():
            df.write.mode("overwrite").parquet(f"{where}/{key}/{part}")
        states[key] = {"kind": type(state).__name__, "delta_rows": state.delta_rows,
                       "total_rows": state.total_rows, "parts": sorted(_parts(state))}
    manifest = {"version": FORMAT_VERSION, "fingerprint": fp, "iteration": iteration,
                "group": [c.name for c in group_run.group.ctes], "states": states,
                "written": time.time()}
    _write_atomically(f"{where}/{MANIFEST}", json.dumps(manifest, indent=1))


def load_checkpoint(group_run: Loop, where: str, manifest: dict) -> None:
    for key, state in group_run.states.items():
        info = manifest["states"][key]
        frames = {
            part: _reload(state, state_part.schema, f"{where}/{key}/{part}")
            for part, state_part in _parts(state).items()
        }
        state.restore(frames["all"], frames["delta"], info["delta_rows"], info["total_rows"],
                      frames.get("contributors"))


def _reload(state: RelationState, schema, path: str) -> DataFrame:
    """Read a part back, placed by the state's key as the loop expects, and held in memory so
    later deletions of the checkpoint directory cannot reach it."""
    df = state.spark.read.schema(schema).parquet(path)
    key_cols = [c for c in state.key if c in schema.fieldNames()]
    df = df.repartition(state.partitions, *key_cols) if key_cols else df.coalesce(1)
    return df.localCheckpoint(eager=True)


# -- files ----------------------------------------------------------------------------------


def _write_atomically(uri: str, text: str) -> None:
    filesystem, path = _fs(uri)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    with filesystem.open_output_stream(temporary) as out:
        out.write(text.encode())
    filesystem.move(temporary, path)


def _complete_checkpoints(group_dir: str) -> list[tuple[int, dict]]:
    """(iteration, manifest) of the complete checkpoints of a group, oldest first."""
    from pyarrow import fs

    filesystem, path = _fs(group_dir)
    try:
        entries = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
    except OSError:
        return []
    found = []
    for entry in entries:
        name = entry.base_name
        if entry.type != fs.FileType.Directory or not name.startswith("iter-"):
            continue
        try:
            iteration = int(name[len("iter-"):])
            with filesystem.open_input_stream(f"{entry.path}/{MANIFEST}") as stream:
                manifest = json.loads(stream.read().decode())
        except (ValueError, OSError):
            continue  # no manifest (an interrupted write) or unreadable: never used
        found.append((iteration, manifest))
    return sorted(found, key=lambda item: item[0])


def _delete(uri: str) -> None:
    from pyarrow import fs

    filesystem, path = _fs(uri)
    try:
        if filesystem.get_file_info(path).type == fs.FileType.Directory:
            filesystem.delete_dir(path)
    except OSError as error:
        log.warning("recsql: could not delete %s: %s", uri, error)
