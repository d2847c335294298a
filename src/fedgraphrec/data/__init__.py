"""fedgraphrec.data: datasets as immutable objects, their loaders, splits and the registry.

Typical use::

    from fedgraphrec.data import load_dataset
    data = load_dataset("gowalla")            # searched in --data-dir, $FEDGRAPHREC_DATA, the cache
    demo = load_dataset("synthetic", n_users=500, seed=1)
"""

from fedgraphrec.data.errors import DataError, DataFormatError, DatasetNotFoundError
from fedgraphrec.data.listing import DatasetListing, describe, format_listing, list_datasets
from fedgraphrec.data.loaders import (
    load_lightgcn,
    load_ml100k,
    load_ml100k_ratings,
    load_rating_folder,
    load_weeplaces,
)
from fedgraphrec.data.registry import (
    ENV_VAR,
    FORMATS,
    REGISTRY,
    DatasetSpec,
    cache_dir,
    data_roots,
    detect_format,
    find_dataset,
    load_dataset,
    resolve_data_root,
)
from fedgraphrec.data.splits import (
    DEFAULT_FRACTIONS,
    carve_validation,
    per_user_split,
    sample_users,
    split_interactions,
    split_ratings,
)
from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings
from fedgraphrec.data.types import (
    Dataset,
    Interactions,
    ItemGraph,
    ItemTags,
    Ratings,
    RatingSplit,
    SocialGraph,
    binary_csr,
)

__all__ = [
    "DEFAULT_FRACTIONS",
    "ENV_VAR",
    "FORMATS",
    "REGISTRY",
    "DataError",
    "DataFormatError",
    "Dataset",
    "DatasetListing",
    "DatasetNotFoundError",
    "DatasetSpec",
    "Interactions",
    "ItemGraph",
    "ItemTags",
    "RatingSplit",
    "Ratings",
    "SocialGraph",
    "binary_csr",
    "cache_dir",
    "carve_validation",
    "data_roots",
    "describe",
    "detect_format",
    "find_dataset",
    "format_listing",
    "list_datasets",
    "load_dataset",
    "load_lightgcn",
    "load_ml100k",
    "load_ml100k_ratings",
    "load_rating_folder",
    "load_weeplaces",
    "per_user_split",
    "resolve_data_root",
    "sample_users",
    "split_interactions",
    "split_ratings",
    "synthetic_interactions",
    "synthetic_ratings",
]
