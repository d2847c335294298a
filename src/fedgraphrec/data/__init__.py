"""fedgraphrec.data: datasets as immutable objects, their loaders, splits and the registry.

Typical use::

    from fedgraphrec.data import load_dataset
    data = load_dataset("gowalla")            # searched in --data-dir, $FEDGRAPHREC_DATA, the cache
    demo = load_dataset("synthetic", n_users=500, seed=1)
"""
