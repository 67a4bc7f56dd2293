"""Snapshots of the places an escaped program would write, taken before and after the attack
corpus runs (test_program_attacks.py), and what changed between them.

A snapshot records every entry under a watched tree, recursively: its kind, mode, inode,
and for files the size, mtime and ctime (ns); for the trees the attacks aim at (the XLA
cache, the run directory) also the sha256 of every file under :data:`HASH_MAX_BYTES`. The
kernel sets a file's ctime on every write, truncation, chmod, utime and rename, and no
process can set it back (short of setting the clock), so a change through the file system
shows in the stat record even where the content is not hashed: HOME and TMPDIR hold
gigabytes of toolchains (hashing them would take longer than the corpus) and credentials
(whose content a test has no business reading). Directories are recorded as entries, so
their listings are compared too.

What a watched tree may legitimately see while the corpus runs depends on its kind:

- ``"private"`` (the run directory the test made): nothing may change.
- ``"cache"`` (the XLA compilation cache the engine uses): other processes (this suite's
  other workers, any other limen_jax or JAX program of the user) add entries, but JAX never
  rewrites or removes one (it writes a key once; eviction is off unless a size limit is
  configured, which limen_jax does not do). So every entry present before must be there,
  unchanged, after; an added entry must be named as JAX names them. JAX writes an entry in
  place, without a temporary file: one changed in the last :data:`WRITING_SECONDS` may be
  half written and is not compared.
- ``"shared"`` (HOME, TMPDIR): other processes of the user write here all the time. An
  entry changed in the :data:`LIVE_SECONDS` before the first snapshot is live (a log being
  written, a directory a job is filling): a live file is not compared, and entries added to
  or removed from a live directory are not attributed to the corpus. Everything at rest
  (nearly everything: the toolchains, the configuration, deep cache directories) must stay
  as it was, and nothing may appear in a directory at rest. TMPDIR's own top level counts
  as live always: it is every process's scratch space (pytest's, Chromium's, the checker's
  worker directories, any ``mkdtemp``); a new entry directly in it is left to the canary
  search.

Each tree also has explicit exclusions (:func:`watched_trees`), the places this test suite
itself writes while the corpus runs, each explained there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

HASH_MAX_BYTES = 4 << 20  # bigger files (a large XLA executable) are compared by their stat record
LIVE_SECONDS = 600.0
WRITING_SECONDS = 10.0
# JAX's persistent cache entries: "<function name>-<sha256 key>-cache" (and "-atime" files
# when eviction is configured).
JAX_CACHE_ENTRY = re.compile(r"^.+-[0-9a-f]{64}-(cache|atime)$")
DECOY = "limen_attack_decoy"  # in the names of what the test plants for the attacks to find


@dataclasses.dataclass(frozen=True)
class Tree:
    """A watched directory. skip: paths left out with everything below them."""

    root: str
    kind: str  # "private" | "cache" | "shared"
    skip: Callable[[str], bool] = lambda path: False
    root_is_live: bool = False  # a shared tree whose top level is every process's (TMPDIR)


# path -> (facts compared between snapshots, mtime_ns that tells a live entry)
Entries = dict[str, tuple[tuple[object, ...], int]]


@dataclasses.dataclass
class Snapshot:
    taken_ns: int
    trees: list[Tree]
    entries: list[Entries]
    skipped: list[set[str]]  # per tree, the topmost skipped paths found
    marked: list[str]  # paths whose name holds the canary mark, anywhere below the roots


def take(trees: list[Tree], mark: str) -> Snapshot:
    """A snapshot of ``trees``. Paths whose name contains ``mark`` are collected from every
    directory below a root, skipped subtrees included (only listed, not recorded)."""
    taken_ns = time.time_ns()
    marked: list[str] = []
    roots = {os.path.abspath(t.root) for t in trees} | {os.path.realpath(t.root) for t in trees}
    walks = [_walk(t, roots, mark, marked) for t in trees]
    return Snapshot(taken_ns, trees, [w[0] for w in walks], [w[1] for w in walks], marked)


def _walk(tree: Tree, roots: set[str], mark: str, marked: list[str]) -> tuple[Entries, set[str]]:
    root = os.path.abspath(tree.root)
    digest = tree.kind in ("private", "cache")
    out: Entries = {}
    skipped: set[str] = set()
    if os.path.isdir(root):
        out[root] = _facts(root, os.lstat(root), False)
    stack = [(root, True)]
    while stack:
        folder, record = stack.pop()
        try:
            listing = list(os.scandir(folder))
        except OSError:  # unreadable, or removed under us
            continue
        for entry in listing:
            path = entry.path
            if mark in entry.name:
                marked.append(path)
            if path in roots:  # another watched tree: snapshotted on its own
                continue
            keep = record and not tree.skip(path)
            if record and not keep:
                skipped.add(path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if keep:
                    out[path] = _facts(path, entry.stat(follow_symlinks=False), digest)
            except OSError:  # gone between the listing and the stat
                continue
            if is_dir:
                stack.append((path, keep))
    return out, skipped


def _facts(path: str, st: os.stat_result, digest: bool) -> tuple[tuple[object, ...], int]:
    if stat.S_ISDIR(st.st_mode):
        # A directory's own mtime and ctime move with its listing, compared entry by entry.
        return ("dir", st.st_mode, st.st_ino), st.st_mtime_ns
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path), st.st_ino), st.st_mtime_ns
    facts: tuple[object, ...] = (
        "file" if stat.S_ISREG(st.st_mode) else "other", st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns,
        st.st_ctime_ns,
    )
    if digest and stat.S_ISREG(st.st_mode) and st.st_size < HASH_MAX_BYTES:
        facts += (_sha256(path),)
    return facts, st.st_mtime_ns


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What changed between two snapshots of the same trees that the trees' kinds do not
    explain: one line per change ("added: PATH", "removed: PATH", "changed: PATH"), only
    the topmost path when a whole directory came or went."""
    out: list[str] = []
    for i, tree in enumerate(before.trees):
        old, new = before.entries[i], after.entries[i]
        out += _tree_changes(tree, old, new, before.taken_ns, before.skipped[i] | after.skipped[i])
    return out


def _tree_changes(tree: Tree, old: Entries, new: Entries, taken_ns: int, skipped: set[str]) -> list[str]:
    root = os.path.abspath(tree.root)
    window = {"shared": LIVE_SECONDS, "cache": WRITING_SECONDS}.get(tree.kind)
    live_ns = None if window is None else taken_ns - int(window * 1e9)
    # Directories that hold skipped paths (~/.config for ~/.config/matplotlib) may come and
    # go with them: such a directory is not itself a change, what else appears in it is.
    holders = {str(p) for s in skipped for p in Path(s).parents}

    def live(path: str) -> bool:
        """Changed in the window before the first snapshot: another process is at work there.
        In the cache only files count (an entry being written); a shared tree's root is
        everyone's (TMPDIR's top level)."""
        if path == root and tree.root_is_live:
            return True
        if path not in old or live_ns is None:
            return False
        if tree.kind == "cache" and old[path][0][0] == "dir":
            return False
        return old[path][1] >= live_ns

    out: list[str] = []
    covered: set[str] = set()  # added or removed directories whose contents came or went with them
    for path in sorted(old.keys() | new.keys()):
        was, now = old.get(path), new.get(path)
        if was is not None and now is not None and was[0] == now[0]:
            continue
        parent = os.path.dirname(path)
        if parent in covered:
            covered.add(path)
            continue
        if was is not None and now is not None:
            if not live(path):
                out.append(f"changed: {path}")
            continue
        gone = now is None
        facts = (was if gone else now)[0]  # type: ignore[index]
        if live(parent) or (gone and live(path)):
            covered.add(path)
        elif not gone and tree.kind == "cache" and parent == root and JAX_CACHE_ENTRY.match(os.path.basename(path)):
            covered.add(path)  # another process compiled something
        elif facts[0] == "dir" and path in holders:
            continue  # came or went with what it holds; its other contents are still compared
        else:
            out.append(f"{'removed' if gone else 'added'}: {path}")
            covered.add(path)
    return out


def under(*prefixes: str | os.PathLike[str]) -> Callable[[str], bool]:
    """A skip predicate: the paths at or below any of ``prefixes``."""
    roots = tuple(os.path.abspath(p) for p in prefixes)
    return lambda path: any(path == r or path.startswith(r + os.sep) for r in roots)


def either(*skips: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda path: any(s(path) for s in skips)


def in_pycache(path: str) -> bool:
    """Byte-code caches: any Python that imports a module first writes its ``.pyc``."""
    return f"{os.sep}__pycache__" in path


def xla_cache_dir() -> Path:
    """The XLA compilation cache the engine uses (limen_jax/xla_cache.py): $LIMEN_JAX_XLA_CACHE,
    or ~/.cache/limen_jax/xla (also when the variable turns the cache off: there is where an
    attacker looks)."""
    path = os.environ.get("LIMEN_JAX_XLA_CACHE", "off")
    return Path(os.path.expanduser("~/.cache/limen_jax/xla") if path == "off" else path)


def watched_trees(home: Path, tmp: Path, xla: Path, run_dir: Path, pytest_tmp: Path, decoy: Path) -> list[Tree]:
    """HOME, TMPDIR, the XLA cache and the run directory, less what this suite legitimately
    writes there while the corpus runs (found by running the suite's files with an empty
    HOME):

    - the XLA cache, wherever it lies, is its own "cache" tree (and so is the default
      ~/.cache/limen_jax/xla when $LIMEN_JAX_XLA_CACHE points elsewhere); other test
      sessions' decoy entries (planted and removed by them as ``decoy`` is by this one)
      are left out;
    - ``__pycache__`` directories: any Python process importing a module first;
    - HOME: matplotlib's configuration and font cache (~/.config/matplotlib,
      ~/.cache/matplotlib, or $MPLCONFIGDIR), written when a test process first imports it
      (the plots, the viewer); Chromium, run by the viewer's browser test
      (tests/view/test_browser.py): ~/.config/chromium (its crash-report folders) and
      ~/.cache/dconf (GTK's settings); Ray, started by the Ray evaluator's tests: ~/.ray
      (its session token);
    - TMPDIR: pytest's temporary directories (``pytest-of-<user>``: this run's, the other
      test processes', other pytest runs', and old ones that a starting run deletes; the
      run directory inside is its own "private" tree) and Ray's session directories
      (``ray``); new and removed top-level entries are not attributed (see above).
    """
    config = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    cache = Path(os.environ.get("XDG_CACHE_HOME", home / ".cache"))
    mpl = os.environ.get("MPLCONFIGDIR", config / "matplotlib")
    home_skip = under(config / "matplotlib", cache / "matplotlib", mpl, config / "chromium", cache / "dconf",
                      home / ".ray")  # fmt: skip
    mine = os.path.abspath(decoy)

    def other_decoy(path: str) -> bool:
        return DECOY in os.path.basename(path) and path != mine

    trees = [
        Tree(str(home), "shared", either(in_pycache, home_skip)),
        Tree(str(tmp), "shared", either(in_pycache, under(pytest_tmp, tmp / "ray")), root_is_live=True),
        Tree(str(xla), "cache", other_decoy),
        Tree(str(run_dir), "private"),
    ]
    default = home / ".cache" / "limen_jax" / "xla"
    if default.is_dir() and default.resolve() != xla.resolve():  # $LIMEN_JAX_XLA_CACHE elsewhere: other
        trees.append(Tree(str(default), "cache", other_decoy))  # processes may still compile into the default
    return trees


def pytest_tmp_root(basetemp: Path) -> Path:
    """The directory that holds every pytest run's temporary directories for this user
    (``/tmp/pytest-of-<user>``), or the given ``--basetemp`` itself."""
    for parent in (basetemp, *basetemp.parents):
        if parent.name.startswith("pytest-of-"):
            return parent
    return basetemp
