"""One loader per on-disk format; each validates its input and names the file and line on errors."""

from fedgraphrec.data.loaders.lightgcn import load_lightgcn
from fedgraphrec.data.loaders.movielens import load_ml100k, load_ml100k_ratings
from fedgraphrec.data.loaders.tsv import load_rating_folder
from fedgraphrec.data.loaders.weeplaces import load_weeplaces

__all__ = ["load_lightgcn", "load_ml100k", "load_ml100k_ratings", "load_rating_folder", "load_weeplaces"]
