"""The analyst's tools beside the service: ``deniable compare`` (local, shuffled and central error at the same
ε), ``deniable audit`` (an empirical lower bound on a mechanism's ε, and the trade-off view), ``deniable
demo`` and their figures.

They need the ``tools`` extra (``pip install 'deniable[tools]'``: scipy, matplotlib, tqdm); a server install
(``deniable[aggregator]``) runs without it, and nothing of the service imports this package.
"""
