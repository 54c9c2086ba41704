"""Implicit-feedback interaction data for the ``recsys`` plugin: MovieLens, generic CSV, and a generated set.

Sources (``data.dataset``):

* ``ml-100k``: GroupLens MovieLens-100k, ``u.data`` (tab-separated ``user item rating timestamp``);
* ``ml-1m``: GroupLens MovieLens-1M, ``ratings.dat`` (``UserID::MovieID::Rating::Timestamp``);
* ``csv``: a file of ``user,item[,rating[,timestamp]]`` rows, with or without a header line;
* ``synthetic``: a latent-factor set generated from a seed (tests and the ``smoke`` preset).

MovieLens is read from the extracted folder (``ml-100k/``, ``ml-1m/``) or from the original zip archive
(``ml-100k.zip``, ``ml-1m.zip``); nothing is downloaded (GroupLens does not allow redistribution, so the user
fetches the archive once). Every source becomes :class:`Interactions`: de-duplicated (user, item) pairs with
ids remapped to contiguous indices ``0..U-1`` and ``0..I-1`` (integer ids in numeric order, others in text
order). Implicit feedback: by default every rating is a positive interaction, as in BCL Appendix D (Table 9
counts all 100,000 MovieLens-100k ratings as interactions); ``data.min_rating`` keeps only ratings ≥ it.
Timestamps are read (the column count is checked) but not used: the split is random per user (:mod:`.split`).

Errors are one line: a missing file or a corrupt archive is a :class:`DataMissingError` that says where to put
the files and where to get them; a malformed row (with its file and line) or an empty result is a
:class:`ConfigError`.
"""

from __future__ import annotations

import io
import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from contrastlab.data.base import cache_dir
from contrastlab.platform.errors import ConfigError, DataMissingError

MOVIELENS = {"ml-100k": ("u.data", "\t"), "ml-1m": ("ratings.dat", "::")}
"""MovieLens variant → (ratings file inside the folder/archive, field separator)."""
DATASETS = ("synthetic", "ml-100k", "ml-1m", "csv")
"""Values of ``data.dataset``."""
GET_MOVIELENS = (
    "download {name}.zip from https://grouplens.org/datasets/movielens/ and put the zip or its extracted "
    "{name}/ folder in {where} (or pass --set data.root=DIR)"
)
NON_CANONICAL_ID = re.compile(r"^ *(?:\+|-?0\d|-0\b)|^[^\t\n]*\t *(?:\+|-?0\d|-0\b)", re.M)
"""A user or item field (first two tab-separated fields) that is a number but not written as Python writes that
integer (``007``, ``+7``, ``-0``): the line parser reads such a file, keeping the ids' text, so that
:func:`_remap` can tell ``007`` from ``7``."""
HEADER_NAMES = re.compile(r"(user|item|movie|product|customer|business|song|artist|track|book)s?(id)?|[ui]id|id")
"""Column names a header line's user or item field may hold, once lower-cased with ``_``, ``-``, ``.`` and spaces
removed (``user``, ``userId``, ``item_id``, ``movie``, ``uid``, ``id``, ...). The whole field must be such a name:
an id that merely contains a word (``user_1``, ``android``) is data, not a header (``data.csv_header`` auto)."""
ID_COLUMN = re.compile(r"[A-Za-z][\w .-]*?(?:[_ .-][Ii][Dd]|(?<=[a-z])I[Dd])s?")
"""Any other column name ending in a separate ``id`` word (``member_id``, ``anime id``, ``reviewerID``,
``playlistId``); ``android`` or ``ANDROID`` (no word boundary before the ``id``) do not match."""


@dataclass(frozen=True)
class Interactions:
    """Observed (user, item) pairs with contiguous ids; each pair appears once."""

    users: Tensor
    """``[n]`` long user index of each interaction, in ``[0, num_users)``."""
    items: Tensor
    """``[n]`` long item index of each interaction, in ``[0, num_items)``."""
    num_users: int
    """Number of distinct users."""
    num_items: int
    """Number of distinct items."""
    name: str
    """Where the data came from (dataset name and file)."""

    def __len__(self) -> int:
        return int(self.users.numel())

    @property
    def density(self) -> float:
        """``#interactions / (#users × #items)``: BCL Table 9's density (MovieLens-100k: 0.06304)."""
        return len(self) / float(self.num_users * self.num_items)


@dataclass(frozen=True)
class RawRatings:
    """Rows as read from a file, before thresholding, de-duplication and id remapping."""

    users: np.ndarray
    """Original user ids (integers, or text when some id is not an integer)."""
    items: np.ndarray
    """Original item ids (integers, or text)."""
    ratings: np.ndarray | None
    """Ratings (float64), or ``None`` when the file has no rating column."""
    name: str
    """Human-readable source (for messages)."""


# ----------------------------------------------------------------------------------------------- parsing
def _decode(raw: bytes) -> str:
    """UTF-8 text (a BOM is dropped); files that are not UTF-8 are read as latin-1."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")  # MovieLens-1M ships latin-1 text files; ratings.dat is plain ASCII


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def parse_rows(text: str, sep: str, where: str, *, min_fields: int, max_fields: int, header: bool = False
               ) -> RawRatings:
    """Split ``text`` into ``user sep item [sep rating [sep timestamp]]`` rows (blank lines are skipped).

    ``header`` drops the first non-blank line. A row with a wrong field count, an empty id or a rating that is
    not a finite number raises a one-line :class:`ConfigError` naming ``where`` and the line number.
    """
    fast = _parse_numeric(text, sep, where, min_fields=min_fields, max_fields=max_fields, header=header)
    if fast is not None:
        return fast
    numbered = [(n, line.strip(" \r\n")) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    first = numbered[0][1] if header and numbered else None
    if header and numbered:
        numbered = numbered[1:]
    if not numbered:
        found = f"after its header line {first!r}" if first is not None else "found (the file is empty)"
        raise ConfigError(f"{where}: no interaction rows {found}")
    rows = []
    for n, line in numbered:
        fields = [f.strip() for f in line.split(sep)]
        if not min_fields <= len(fields) <= max_fields:
            want = f"{min_fields}" if min_fields == max_fields else f"{min_fields} to {max_fields}"
            raise ConfigError(f"{where}, line {n}: expected {want} fields separated by {sep!r}, got "
                              f"{len(fields)}: {line[:60]!r}")
        if not fields[0] or not fields[1]:
            raise ConfigError(f"{where}, line {n}: empty user or item id: {line[:60]!r}")
        if len(fields) >= 3 and not _is_number(fields[2]):
            raise ConfigError(f"{where}, line {n}: rating {fields[2]!r} is not a number")
        if len(fields) == 4 and not _is_number(fields[3]):
            raise ConfigError(f"{where}, line {n}: timestamp {fields[3]!r} is not a number")
        rows.append(fields)
    width = {len(r) for r in rows}
    if len(width) > 1:
        n = next(n for (n, _), r in zip(numbered, rows, strict=True) if len(r) != len(rows[0]))
        raise ConfigError(f"{where}, line {n}: {len(rows[0])} fields on the first row but a different count here")
    users = np.array([r[0] for r in rows])
    items = np.array([r[1] for r in rows])
    ratings = np.array([float(r[2]) for r in rows]) if len(rows[0]) >= 3 else None
    return RawRatings(users, items, ratings, where)


def _parse_numeric(text: str, sep: str, where: str, *, min_fields: int, max_fields: int, header: bool
                   ) -> RawRatings | None:
    """Fast path of :func:`parse_rows` for all-numeric files (MovieLens: 1M rows in ~0.4 s instead of ~7 s).

    Returns ``None`` whenever the file is not a clean numeric table (text ids, blank lines inside, a bad row):
    the line-by-line parser then reads it, or names the offending line.
    """
    body = (text if sep == "\t" else text.replace(sep, "\t")).lstrip()
    if header:
        body = body.split("\n", 1)[1].lstrip() if "\n" in body else ""
    ncols = len(body.split("\n", 1)[0].split("\t"))
    if not body or not min_fields <= ncols <= max_fields or NON_CANONICAL_ID.search(body):
        return None
    dtype = [("user", "i8"), ("item", "i8"), ("rating", "f8"), ("time", "f8")][:ncols]
    try:
        table = np.loadtxt(io.StringIO(body), delimiter="\t", dtype=dtype, comments=None, ndmin=1)
    except ValueError:
        return None
    ratings = table["rating"] if ncols >= 3 else None
    if ncols >= 3 and not (np.isfinite(table["rating"]).all() and (ncols < 4 or np.isfinite(table["time"]).all())):
        return None
    return RawRatings(table["user"], table["item"], ratings, where)


def csv_has_header(text: str, sep: str = ",") -> bool:
    """Whether the first non-blank line is a header: its user/item field names a column (``user``, ``itemId``,
    ``movie_id``, ``reviewerID``, ..., quoted or not) or its rating field is not a number. Ids may be text, so
    numbers alone do not decide."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    fields = [f.strip().strip("\"'").strip() for f in first.split(sep)]           # "userId" as R writes it
    if len(fields) >= 3 and not _is_number(fields[2]):
        return True
    return any(HEADER_NAMES.fullmatch(re.sub(r"[\s_.\-]", "", f.lower())) or ID_COLUMN.fullmatch(f)
               for f in fields[:2])


# ----------------------------------------------------------------------------------------------- files
def _read_zip_member(archive: Path, filename: str, how: str) -> bytes:
    try:
        with zipfile.ZipFile(archive) as zf:
            names = [n for n in zf.namelist() if n == filename or n.endswith("/" + filename)]
            if not names:
                raise DataMissingError(f"{archive} has no {filename}; {how}")
            return zf.read(sorted(names, key=len)[0])
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataMissingError(f"corrupt archive {archive} ({exc}); {how}") from None


def _not_movielens_file(variant: str, file: Path) -> str:
    """Why the file ``data.root`` names holds no MovieLens ``variant``, and what to pass instead."""
    filename = MOVIELENS[variant][0]
    text = f"data.root={file} is a file, but neither {variant}.zip nor {filename}"
    if file.suffix.lower() == ".csv":
        return f"{text}; for a CSV of user,item[,rating[,timestamp]] rows add --set data.dataset=csv"
    return (f"{text}; pass --set data.root=PATH with PATH the {variant}.zip archive, its extracted {variant}/ "
            "folder or a folder holding either (from https://grouplens.org/datasets/movielens/)")


def movielens_bytes(variant: str, root: str | Path | None) -> tuple[bytes, str]:
    """The ratings file of ``variant`` (``ml-100k``/``ml-1m``) and its location, from ``root`` or the cache.

    ``root`` may be the extracted folder, a folder holding it or the zip, or the zip itself; ``None`` looks in
    ``$CONTRASTLAB_DATA/movielens`` (default ``~/.cache/contrastlab/data/movielens``).
    """
    filename, _ = MOVIELENS[variant]
    base = Path(root).expanduser() if root else cache_dir("movielens")
    how = GET_MOVIELENS.format(name=variant, where=base if base.suffix != ".zip" else base.parent)
    if base.is_file():
        if base.suffix == ".zip":
            return _read_zip_member(base, filename, how), f"{base}:{filename}"
        if base.name == filename:
            return base.read_bytes(), str(base)
        raise DataMissingError(_not_movielens_file(variant, base))
    if root and base.suffix == ".zip" and not base.exists():
        raise DataMissingError(f"data.root={base} does not exist; download {variant}.zip from "
                               f"https://grouplens.org/datasets/movielens/ to {base}, or point data.root at the zip "
                               f"or its extracted {variant}/ folder")
    for folder in (base, base / variant):
        if (folder / filename).is_file():
            return (folder / filename).read_bytes(), str(folder / filename)
    archive = base / f"{variant}.zip"
    if archive.is_file():
        return _read_zip_member(archive, filename, how), f"{archive}:{filename}"
    raise DataMissingError(f"MovieLens {variant} not found: no {base / variant / filename} and no {archive}; {how}")


def read_movielens(variant: str, root: str | Path | None) -> RawRatings:
    """Parse MovieLens ``ml-100k`` (``u.data``) or ``ml-1m`` (``ratings.dat``): four fields per row."""
    raw, where = movielens_bytes(variant, root)
    return parse_rows(_decode(raw), MOVIELENS[variant][1], where, min_fields=4, max_fields=4)


def read_csv(path: str | Path | None, header: bool | None = None) -> RawRatings:
    """Parse a ``user,item[,rating[,timestamp]]`` CSV; ``header=None`` detects a header line."""
    if path is None:
        raise ConfigError("data.dataset=csv needs data.root=FILE, a CSV of user,item[,rating[,timestamp]] rows")
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataMissingError(f"interaction file {file} not found; pass --set data.root=FILE (a CSV of "
                               "user,item[,rating[,timestamp]] rows, with or without a header)")
    text = _decode(file.read_bytes())
    has_header = csv_has_header(text) if header is None else header
    return parse_rows(text, ",", str(file), min_fields=2, max_fields=4, header=has_header)


# ----------------------------------------------------------------------------------------------- building
def _remap(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Contiguous indices of ``ids``: integer ids in numeric order, otherwise text order.

    Text ids that all read as integers keep the numeric order (``02`` before ``10``, as ``2`` before ``10``), unless
    two of them are the same integer written differently (``007`` and ``7``, ``+7``): the column is then text, so
    that two distinct ids never merge into one. A column without such a pair is indexed as it was before ``007``
    and ``7`` were told apart, so older runs' splits and checkpoints still match their data.
    """
    uniq, index = np.unique(ids, return_inverse=True)
    if ids.dtype.kind in "US" and uniq.size:
        try:
            numbers = uniq.astype(np.int64)
        except (ValueError, OverflowError):
            numbers = None
        if numbers is not None and np.unique(numbers).size == uniq.size:     # no id written twice: numeric order
            rank = np.empty(uniq.size, dtype=np.int64)
            rank[np.argsort(numbers)] = np.arange(uniq.size)
            index = rank[index]
    return index.astype(np.int64), int(uniq.size)


def build_interactions(raw: RawRatings, min_rating: float | None = None) -> Interactions:
    """Keep ratings ≥ ``min_rating`` (all when ``None``), drop repeated pairs, remap ids to contiguous indices."""
    keep = np.ones(raw.users.shape[0], dtype=bool)
    if min_rating is not None:
        if raw.ratings is None:
            raise ConfigError(f"data.min_rating={min_rating} but {raw.name} has no rating column")
        keep = raw.ratings >= min_rating
    if not keep.any():
        raise ConfigError(f"{raw.name}: no interaction has rating >= {min_rating}; lower data.min_rating")
    users, num_users = _remap(raw.users[keep])
    items, num_items = _remap(raw.items[keep])
    pairs = np.unique(users * num_items + items)  # de-duplicated, sorted by (user, item)
    return Interactions(torch.from_numpy(pairs // num_items), torch.from_numpy(pairs % num_items),
                        num_users, num_items, raw.name)


def generate_synthetic(users: int = 400, items: int = 500, factors: int = 8, min_per_user: int = 10,
                       max_per_user: int = 40, sharpness: float = 3.0, seed: int = 0) -> Interactions:
    """A latent-factor implicit-feedback set: user ``u`` picks items by sampling without replacement from
    ``softmax(sharpness · ⟨p_u, q_i⟩/√f + b_i)`` (Gumbel top-k), ``p, q ~ N(0, I_f)``, popularity ``b ~ N(0, ½²)``.

    The number of items of each user is uniform in ``[min_per_user, max_per_user]``. A model that recovers the
    factors ranks held-out items far above chance, so learning is measurable in seconds.
    """
    if not 1 <= min_per_user <= max_per_user <= items:
        raise ConfigError(f"data.synthetic: need 1 <= min_per_user ({min_per_user}) <= max_per_user "
                          f"({max_per_user}) <= items ({items})")
    g = torch.Generator().manual_seed(int(seed))
    p = torch.randn(users, factors, generator=g)
    q = torch.randn(items, factors, generator=g)
    bias = 0.5 * torch.randn(items, generator=g)
    logits = sharpness * (p @ q.T) / math.sqrt(factors) + bias  # [U, I]
    gumbel = -torch.log(-torch.log(torch.rand(users, items, generator=g).clamp_min(1e-12)))
    order = (logits + gumbel).argsort(dim=1, descending=True)  # [U, I] a sample without replacement per row
    counts = torch.randint(min_per_user, max_per_user + 1, (users,), generator=g)
    take = torch.arange(items)[None, :] < counts[:, None]  # [U, I] first counts[u] of each row
    user_idx = torch.arange(users)[:, None].expand(users, items)[take]
    item_idx = order[take]
    keys = torch.unique(user_idx * items + item_idx)
    return Interactions(keys // items, keys % items, users, items, f"synthetic(seed={seed})")


def load_interactions(dataset: str, root: str | None = None, *, min_rating: float | None = None,
                      csv_header: bool | None = None, synthetic: dict | None = None) -> Interactions:
    """Load ``dataset`` (one of :data:`DATASETS`) as :class:`Interactions`."""
    if dataset == "synthetic":
        return generate_synthetic(**(synthetic or {}))
    if dataset in MOVIELENS:
        raw = read_movielens(dataset, root)
    elif dataset == "csv":
        raw = read_csv(root, csv_header)
    else:
        raise ConfigError(f"unknown data.dataset '{dataset}'; valid: {', '.join(DATASETS)}")
    return build_interactions(raw, min_rating)
