"""Crash-safe storage of one chain: samples in SQLite, checkpoint as JSON.

Protocol (data first, counter last):

1. kept samples are inserted into ``samples.sqlite`` (primary key = sweep, so
   a sample can never be stored twice) and committed;
2. then ``checkpoint.json`` (graph, hyperparameters, bit-generator state,
   sweep counter) is written to a temp file, fsynced and renamed over the old
   one.

A run killed at any moment therefore has every sample up to its last
checkpoint, possibly some beyond it. ``resume`` deletes the samples beyond the
checkpoint's sweep and continues from the checkpoint with the saved random
stream, so the store ends up exactly as an uninterrupted run's. No pickle: all
files are JSON or SQLite.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

SCALARS = ("num_nodes", "num_edges", "num_hidden", "depth", "log_prior", "log_lik", "log_joint",
           "alpha", "gamma", "phi")


def atomic_write_json(path: Path, obj) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_savez(path, **arrays) -> None:
    """Write ``arrays`` to an NPZ file atomically (temporary file, fsync, rename)."""
    import numpy as np

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class SQLiteStore:
    """Samples of one chain: one row per kept sweep with its graph (JSON) and scalars."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = None
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            cols = ", ".join(f"{c} REAL" for c in SCALARS)
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS samples (sweep INTEGER PRIMARY KEY, graph TEXT NOT NULL, "
                              f"{cols})")
            self.conn.commit()
        except sqlite3.DatabaseError as err:  # one line naming the file, not a traceback
            if self.conn is not None:
                self.conn.close()
            if isinstance(err, sqlite3.OperationalError):  # locked by another process, unreadable, a disk error
                raise OSError(f"{self.path} cannot be opened ({err}); if another process holds it, wait for it "
                              "to finish") from None
            raise ValueError(f"{self.path} is damaged ({err}); this chain's samples cannot be read") from None
        self._pending: list[tuple] = []

    def add(self, sweep: int, graph_json: str, scalars: dict) -> None:
        self._pending.append((int(sweep), graph_json, *[float(scalars[c]) for c in SCALARS]))

    def flush(self) -> None:
        if not self._pending:
            return
        q = ",".join("?" * (2 + len(SCALARS)))
        pending, self._pending = self._pending, []
        try:
            with self.conn:
                self.conn.executemany(f"INSERT INTO samples VALUES ({q})", pending)
        except sqlite3.IntegrityError:
            raise ValueError("a sample of the same sweep is already stored (stored twice)") from None

    def truncate_after(self, sweep: int) -> int:
        """Delete samples with sweep > ``sweep`` (work done after the last checkpoint)."""
        self._pending = [p for p in self._pending if p[0] <= sweep]
        with self.conn:
            cur = self.conn.execute("DELETE FROM samples WHERE sweep > ?", (int(sweep),))
        return cur.rowcount

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def last_sweep(self) -> int:
        r = self.conn.execute("SELECT MAX(sweep) FROM samples").fetchone()[0]
        return -1 if r is None else int(r)

    def scalars(self) -> dict:
        rows = self.conn.execute(f"SELECT sweep, {', '.join(SCALARS)} FROM samples ORDER BY sweep").fetchall()
        out = {"sweep": [r[0] for r in rows]}
        for j, c in enumerate(SCALARS):
            out[c] = [r[j + 1] for r in rows]
        return out

    def graphs(self):
        for (text,) in self.conn.execute("SELECT graph FROM samples ORDER BY sweep"):
            yield text

    def rows(self):
        return self.conn.execute(f"SELECT sweep, graph, {', '.join(SCALARS)} FROM samples ORDER BY sweep").fetchall()

    def close(self) -> None:
        self.flush()
        self.conn.close()


class MemoryStore:
    """The same interface in memory (for library use without a run directory)."""

    def __init__(self):
        self._rows: dict[int, tuple] = {}

    def add(self, sweep, graph_json, scalars):
        if int(sweep) in self._rows:
            raise ValueError(f"sample of sweep {sweep} stored twice")
        self._rows[int(sweep)] = (graph_json, dict(scalars))

    def flush(self):
        pass

    def truncate_after(self, sweep):
        drop = [s for s in self._rows if s > sweep]
        for s in drop:
            del self._rows[s]
        return len(drop)

    def count(self):
        return len(self._rows)

    def last_sweep(self):
        return max(self._rows, default=-1)

    def scalars(self):
        keys = sorted(self._rows)
        out = {"sweep": keys}
        for c in SCALARS:
            out[c] = [self._rows[k][1][c] for k in keys]
        return out

    def graphs(self):
        for k in sorted(self._rows):
            yield self._rows[k][0]

    def close(self):
        pass
