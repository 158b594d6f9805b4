"""Query: tenant-scoped retrieval over the true knowledge base. The pure rules are in
``rules/`` (which rows are true, how hits rank, what a request may ask, the filters); the
one query library is ``search.QueryService``, what answers a query ``serving``, the
read-side truth ``truth`` and the one-shot form the CLI uses ``one_shot.run_query``."""
