"""Dataset names, where their files live, and :func:`load_dataset`.

Data roots are searched in this order, and the first root that holds the dataset's folder wins:

1. the explicit ``data_dir`` argument (the CLI's ``--data-dir``);
2. the environment variable ``FEDGRAPHREC_DATA``;
3. the user cache, ``$XDG_CACHE_HOME/fedgraphrec`` or ``~/.cache/fedgraphrec``.

A dataset with a public URL (MovieLens-100K) that is in none of them is downloaded into the cache.
A name that is not registered is looked up the same way, as ``ROOT/NAME`` (any folder or file name).

Per-dataset rules (the defaults in :data:`REGISTRY`; every one can be overridden by a keyword of
:func:`load_dataset`):

* ``ml-100k``: split ``u1``, ratings ≥ 4 are positives, ids compacted over the training users and
  items (942 × 1,408); test pairs of unseen users/items are dropped (``info["dropped_test"]``).
* ``ml-100k-ratings``: split ``u1``, explicit 1..5, full 943 × 1,682 id space.
* ``gowalla``, ``yelp2018``: LightGCN files as released. ``amazon-book``: only the test split
  exists, so loading raises a :class:`DatasetNotFoundError` that says the training set is missing.
* ``filmtrust``: ratings 0.5–4.0, directed trust; every row kept (3 repeated pairs, as in the
  paper's 35,497); the user space includes the 134 trust-only users (1,642).
* ``ciao``: rating-0 rows (34, outside 1–5) are dropped first, then repeated (user, item) pairs are
  de-duplicated keeping the *last* occurrence in file order; counts in ``info``.
* ``epinions``: ratings 1–5, same de-duplication (keep last; 9,826 rows removed); the social file is
  kept as given (self-loops and duplicate rows are counted in ``info``, and
  :meth:`SocialGraph.adjacency` drops them).
* ``douban``, ``flixster``: the fixed ``train.tsv``/``test.tsv`` split, a 3,000 × 3,000 id space,
  symmetric user graph; Flixster ratings are 0.5–5 and its item graph is ``info["item_graph"]``.
* ``weeplaces``: train = GroupIM train + val/test fold-in, valid = val held-out, test = test held-out.
* FilmTrust, Ciao and Epinions have no fixed split: a seeded per-user 80/10/10 split is drawn
  (``seed``/``fractions`` options).
* ``ciao-10core``: a *derived* dataset (format ``"derived"``): Ciao's iterated 10-core, 2,540 × 3,018
  (:mod:`fedgraphrec.data.derived`); the base's options (``seed``, …) pass through, and
  ``min_user``/``min_item``/``top_items`` override the filter.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fedgraphrec.data import download as _download
from fedgraphrec.data._io import find_file
from fedgraphrec.data.catalog import REGISTRY, DatasetSpec
from fedgraphrec.data.derived import load_derived
from fedgraphrec.data.errors import DataError, DatasetNotFoundError
from fedgraphrec.data.loaders.interactions import FILE_FORMATS, HINT, interaction_files, load_interactions
from fedgraphrec.data.loaders.lightgcn import load_lightgcn
from fedgraphrec.data.loaders.movielens import load_ml100k, load_ml100k_ratings
from fedgraphrec.data.loaders.tsv import load_rating_folder
from fedgraphrec.data.loaders.weeplaces import is_weeplaces_file, load_weeplaces
from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings
from fedgraphrec.data.types import Interactions, Ratings

ENV_VAR = "FEDGRAPHREC_DATA"

Loader = Callable[..., Interactions | Ratings]

FORMATS: Mapping[str, Loader] = MappingProxyType(
    {
        "interactions": load_interactions,
        "lightgcn": load_lightgcn,
        "ml100k": load_ml100k,
        "ml100k-ratings": load_ml100k_ratings,
        "ratings": load_rating_folder,
        "weeplaces": load_weeplaces,
    }
)
"""Folder formats that :func:`load_dataset` understands, by the name ``format=`` takes.

``format="csv"``, ``"tsv"`` or ``"parquet"`` also work: the ``interactions`` loader reading that file type.
"""


_GENERATORS: Mapping[str, Loader] = MappingProxyType(
    {"synthetic": synthetic_interactions, "synthetic-ratings": synthetic_ratings}
)


def _download_ml100k(cache_root: Path) -> Path:
    # Looked up at call time so tests can replace the module's network function.
    return _download.download_ml100k(cache_root)


_DOWNLOADERS: Mapping[str | None, Callable[[Path], Path]] = MappingProxyType(
    {_download.ML100K_URL: _download_ml100k}
)


def cache_dir() -> Path:
    """The user cache folder: ``$XDG_CACHE_HOME/fedgraphrec`` or ``~/.cache/fedgraphrec``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "fedgraphrec"


def data_roots(data_dir: str | Path | None = None) -> list[tuple[str, Path]]:
    """The data roots in search order, each with where it came from (for messages)."""
    roots: list[tuple[str, Path]] = []
    if data_dir is not None:
        roots.append(("data_dir argument", Path(data_dir).expanduser()))
    env = os.environ.get(ENV_VAR)
    if env:
        roots.append((ENV_VAR, Path(env).expanduser()))
    roots.append(("user cache", cache_dir()))
    return roots


def resolve_data_root(data_dir: str | Path | None = None) -> Path:
    """The primary data root: ``data_dir`` if given, else ``$FEDGRAPHREC_DATA``, else the cache."""
    return data_roots(data_dir)[0][1]


def find_dataset(name: str, data_dir: str | Path | None = None) -> Path | None:
    """Folder of the known dataset ``name`` in the first data root that has it, or ``None``.

    Raises:
        DatasetNotFoundError: ``name`` is not a known dataset.
    """
    spec = get_spec(name)
    if spec.folder is None:
        return None
    for _, root in data_roots(data_dir):
        candidate = root / spec.folder
        if candidate.is_dir():
            return candidate
    return None


def get_spec(name: str) -> DatasetSpec:
    """The :class:`DatasetSpec` of a known name.

    Raises:
        DatasetNotFoundError: unknown name (the message lists the known ones).
    """
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(REGISTRY)
        raise DatasetNotFoundError(f"unknown dataset {name!r}; known datasets: {known}") from None


def detect_format(folder: str | Path) -> str:
    """Guess a folder's format from its files.

    ``train.txt``/``test.txt`` (or ``.gz``) → ``lightgcn``; ``u.data`` or ``u1.base`` → ``ml100k``;
    ``ratings.tsv`` (or ``.gz``) or ``train.tsv`` + ``test.tsv`` → ``ratings``;
    ``interactions.tsv.gz`` whose third column names GroupIM splits → ``weeplaces``;
    ``interactions.csv|tsv|parquet`` or ``train.*`` + ``test.*`` of those types → ``interactions``.

    Raises:
        DataError: no known file is present.
    """
    p = Path(folder)
    if find_file(p, "train.txt", "train.txt.gz", "test.txt", "test.txt.gz"):
        return "lightgcn"
    if find_file(p, "u.data", "u1.base"):
        return "ml100k"
    if find_file(p, "ratings.tsv", "ratings.tsv.gz") or (
        find_file(p, "train.tsv", "train.tsv.gz") and find_file(p, "test.tsv", "test.tsv.gz")
    ):
        return "ratings"
    weeplaces = find_file(p, "interactions.tsv.gz", "interactions.tsv")
    if weeplaces is not None and is_weeplaces_file(weeplaces):
        return "weeplaces"
    if interaction_files(p) is not None:
        return "interactions"
    raise DataError(
        f"cannot tell the format of {p}: expected train.txt/test.txt (lightgcn), u.data (ml100k), "
        "ratings.tsv (ratings), interactions.tsv.gz (weeplaces) or interactions.csv|tsv|parquet "
        "(interactions); pass format= explicitly, e.g. " + HINT.format(path=p / "interactions.csv", fmt="csv")
    )


def _not_found(spec: DatasetSpec, data_dir: str | Path | None) -> DatasetNotFoundError:
    looked = "; ".join(f"{root / (spec.folder or '')} ({why})" for why, root in data_roots(data_dir))
    return DatasetNotFoundError(
        f"dataset {spec.name!r} not found; looked in: {looked}. Put the {spec.folder}/ folder under a data "
        f"root and set {ENV_VAR}=<root> or pass --data-dir <root>"
    )


def _call(loader: Loader, folder: Path, fmt: str, spec: DatasetSpec | None, options: dict[str, Any]) -> Any:
    opts: dict[str, Any] = {}
    if spec is not None:
        if spec.format == fmt:
            opts.update(spec.options)
        opts["name"] = spec.name
    opts.update(options)
    _check_options(loader, options, spec.name if spec is not None else str(folder))
    try:
        return loader(folder, **opts)
    except DatasetNotFoundError as exc:
        if spec is not None and spec.note and spec.availability == "partial":
            raise DatasetNotFoundError(f"{exc} [{spec.name}: {spec.note}]") from exc
        raise


def _check_options(loader: Callable[..., Any], options: Mapping[str, Any], what: str) -> None:
    """Refuse loader options the loader does not take, naming them and the ones it accepts.

    Raises:
        DataError: an unknown option (e.g. a misspelt ``dataset_options`` key).
    """
    params = inspect.signature(loader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = sorted(
        n
        for n, p in params.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n not in ("folder", "name")
    )
    unknown = sorted(set(options) - set(params))
    if unknown:
        raise DataError(
            f"{what}: unknown dataset option(s) {', '.join(unknown)}; "
            f"this loader takes: {', '.join(accepted)}"
        )


def _spec_for_folder(folder: Path, fmt: str) -> DatasetSpec | None:
    """The known dataset whose folder name and format match, so its cleaning rules apply."""
    for spec in REGISTRY.values():
        if spec.folder == folder.name and spec.format == fmt:
            return spec
    return None


def load_dataset(
    name_or_path: str | Path,
    data_dir: str | Path | None = None,
    format: str | None = None,
    *,
    download: bool = True,
    **options: Any,
) -> Interactions | Ratings:
    """Load a dataset by registry name, from a folder or file, or by a folder name under a data root.

    Args:
        name_or_path: a name in :data:`REGISTRY` (e.g. ``"gowalla"``, ``"ml-100k"``,
            ``"synthetic"``); a path to a folder in one of the :data:`FORMATS` or to a CSV, TSV or
            Parquet interaction file; or any other name, looked up as ``ROOT/name`` (folder or file)
            in the data roots in order (``data_dir``, ``$FEDGRAPHREC_DATA``, the cache). A folder
            whose name and format match a known dataset (e.g. ``.../ciao``) gets that dataset's
            cleaning rules; otherwise the loader's defaults apply.
        data_dir: explicit data root (searched before ``$FEDGRAPHREC_DATA`` and the cache).
        format: force a format instead of detecting it: a key of :data:`FORMATS`, or ``"csv"``,
            ``"tsv"``, ``"parquet"`` (the ``interactions`` loader reading that file type).
        download: allow downloading a dataset with a public URL into the cache when it is not found.
        **options: loader options, overriding the registry defaults (e.g. ``split="u2"``,
            ``seed=1``, ``valid_fraction=0.1``); for ``synthetic`` the generator's arguments.

    Returns:
        :class:`Interactions` or :class:`Ratings`.

    Raises:
        DatasetNotFoundError: a name that is neither registered nor a path nor found under a data
            root, or a registered dataset's folder in no data root (the message lists where it
            looked and how to point at the data).
        DataFormatError: a malformed file (naming file and line).
        DataError: any other data problem (e.g. Amazon-Book's missing training set).
    """
    key = str(name_or_path)
    if key in REGISTRY:
        spec = REGISTRY[key]
        if spec.folder is None:
            generator = _GENERATORS[spec.format]
            _check_options(generator, options, spec.name)
            return generator(**{"name": spec.name, **options})
        folder = find_dataset(key, data_dir)
        if folder is None:
            if not (download and spec.url in _DOWNLOADERS):
                raise _not_found(spec, data_dir)
            folder = _DOWNLOADERS[spec.url](cache_dir())
        if spec.format == "derived":
            return load_derived(spec.name, {**spec.options, **options}, load_dataset, data_dir, download)
        fmt = format or spec.format
        if fmt not in FORMATS:
            raise DataError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
        return _call(FORMATS[fmt], folder, fmt, spec, options)

    path = Path(name_or_path).expanduser()
    if not path.exists():
        path = _find_folder(key, data_dir)
    return _load_path(path, format, options)


def _find_folder(name: str, data_dir: str | Path | None) -> Path:
    """``ROOT/name`` (a folder or a file) in the first data root that has it.

    Raises:
        DatasetNotFoundError: in no root; the message lists the known names and where it looked.
    """
    looked = []
    if not Path(name).is_absolute():
        for why, root in data_roots(data_dir):
            candidate = root / name
            if candidate.exists():
                return candidate
            looked.append(f"{candidate} ({why})")
    known = ", ".join(REGISTRY)
    where = f"; looked for a folder {name!r} in: {'; '.join(looked)}" if looked else ""
    raise DatasetNotFoundError(f"{name!r} is neither a known dataset ({known}) nor a folder{where}")


def _load_path(path: Path, format: str | None, options: dict[str, Any]) -> Interactions | Ratings:
    """Load a folder (format detected unless given) or a single interaction file."""
    if path.is_file():
        if format not in (None, "interactions", *FILE_FORMATS):
            raise DataError(
                f"{path} is a file; format {format!r} reads folders. Files are read by the interactions "
                f"loader (format csv, tsv or parquet), e.g. {HINT.format(path=path, fmt='csv')}"
            )
        fmt = format or "interactions"
    else:
        fmt = format or detect_format(path)
    if fmt in FILE_FORMATS:
        options = {**options, "format": fmt}
        fmt = "interactions"
    if fmt not in FORMATS:
        known = ", ".join([*FORMATS, *FILE_FORMATS])
        raise DataError(f"unknown format {fmt!r}; known formats: {known}")
    spec = _spec_for_folder(path, fmt) if path.is_dir() else None
    return _call(FORMATS[fmt], path, fmt, spec, options)
